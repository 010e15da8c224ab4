"""The training input pipeline: every step's batch a function of (seed, step), and a resumed pipeline starting
exactly at its step, masks included, on one replica and across two."""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT

FIXTURES = Path(__file__).parent / "fixtures" / "made-by-0.2"
BATCH = 8  # 326 validation examples in 9 shards (40 each and 6): 40 batches per epoch, 6 examples left over


def checksums(batches, count):
    """A checksum of each batch's masked input ids and labels."""
    return [hashlib.sha256(batch["input_ids"].numpy().tobytes() + batch["labels"].numpy().tobytes()).hexdigest()[:12]
            for batch in batches.take(count)]


@pytest.fixture(scope="module")
def pipeline():
    import mlm_tpu  # noqa: F401  (Keras 2 behind tf.keras, before TensorFlow loads)
    from transformers import AutoTokenizer

    from mlm_tpu.mlm.masking import MlmMasker
    from mlm_tpu.mlm.shard_kind import MASKED_LM
    from mlm_tpu.shards.pipeline import training_batches
    from mlm_tpu.shards.reading import find_shards
    from mlm_tpu.tasks import shard_kinds

    shards = find_shards(str(FIXTURES / "shards" / "validation"), shard_kinds(), MASKED_LM.name,
                         MASKED_LM.features(None))
    tokenizer = AutoTokenizer.from_pretrained(FIXTURES / "tokenizer")

    def batches(start=0, seed=7, window=64, masked=True):
        return training_batches(shards, BATCH, MlmMasker(tokenizer, 0.15, seed) if masked else None, seed=seed,
                                pipeline=0, window=window, batches_per_epoch=40, start_batch=start)

    return batches


def test_a_resumed_pipeline_gives_the_batches_the_uninterrupted_one_gave_at_those_steps(pipeline):
    uninterrupted = checksums(pipeline(), 130)
    assert len(set(uninterrupted)) == 130  # no batch repeats: every epoch is shuffled anew
    for start in (1, 7, 8, 39, 40, 41, 63, 100):  # inside windows, at their edges, across epochs
        assert checksums(pipeline(start), 130 - start) == uninterrupted[start:], start


def test_each_epoch_sees_each_example_at_most_once_and_the_seed_decides_the_order(pipeline):
    epochs = [[tuple(row) for batch in pipeline(start, window=10**6, masked=False).take(40)
               for row in batch["input_ids"].numpy()] for start in (0, 40)]
    assert all(len(rows) == len(set(rows)) == 320 for rows in epochs)  # 320 of the 326 examples, none twice
    assert epochs[0] != epochs[1] and set(epochs[0]) | set(epochs[1]) > set(epochs[0])  # each epoch leaves out others
    first = [batch["input_ids"].numpy().tobytes() for batch in pipeline(seed=7).take(3)]
    assert first == [batch["input_ids"].numpy().tobytes() for batch in pipeline(seed=7).take(3)]
    assert first != [batch["input_ids"].numpy().tobytes() for batch in pipeline(seed=8).take(3)]


TWO_REPLICAS = """
import hashlib, json, sys
import mlm_tpu
from mlm_tpu.training.hardware import split_cpu
strategy = split_cpu(2)
from transformers import AutoTokenizer
from mlm_tpu.mlm.masking import MlmMasker
from mlm_tpu.mlm.shard_kind import MASKED_LM
from mlm_tpu.shards.layout import BatchLayout
from mlm_tpu.shards.pipeline import distributed_dataset, host_training_batches, next_per_replica
from mlm_tpu.shards.reading import find_shards
from mlm_tpu.tasks import shard_kinds
shards = find_shards(sys.argv[1] + "/shards/validation", shard_kinds(), MASKED_LM.name, MASKED_LM.features(None))
tokenizer = AutoTokenizer.from_pretrained(sys.argv[1] + "/tokenizer")
def steps(start, count):
    layout = BatchLayout(1, 16, 1, 2)
    dataset = distributed_dataset(strategy, layout, lambda host: host_training_batches(
        shards, layout, host, lambda seed: MlmMasker(tokenizer, 0.15, seed), seed=3, window=64, steps_per_epoch=20,
        start_step=start))
    found, iterator = [], iter(dataset)
    for _ in range(count):
        batch = next_per_replica(strategy, iterator)
        found.append([hashlib.sha256(value.numpy().tobytes()).hexdigest()[:12]
                      for value in strategy.experimental_local_results(batch["input_ids"])])
    return found
full = steps(0, 50)
print(json.dumps({"full": full, "resumed": steps(17, 33), "later": steps(31, 19)}))
"""


def test_two_replicas_resume_with_each_replica_given_its_own_batch_again():
    result = subprocess.run([sys.executable, "-c", TWO_REPLICAS, str(FIXTURES)], capture_output=True, text=True,
                            env={"PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert all(len(set(step)) == 2 for step in found["full"])  # two replicas, two different batches
    assert found["resumed"] == found["full"][17:] and found["later"] == found["full"][31:]
