"""The data order over virtual input pipelines: the global batch of every step, masks included, is the same
whatever the number of machines' input pipelines and replicas that read it, and a resumed pipeline starts at its
step; the layouts that cannot be are refused in one line. Dropout keyed by virtual pipeline gives each row of the
global batch the same noise on one replica or several."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT

from mlm_tpu.errors import UserError
from mlm_tpu.shards.layout import BatchLayout, default_input_pipelines

FIXTURES = Path(__file__).parent / "fixtures" / "made-by-0.2"  # 326 validation examples in 9 shards


def test_the_default_is_the_largest_divisor_of_the_batch_up_to_64_and_the_shards():
    assert default_input_pipelines(16, 2) == 2
    assert default_input_pipelines(16, 7) == 4
    assert default_input_pipelines(1024, 500) == 64
    assert default_input_pipelines(24, 100) == 24
    assert default_input_pipelines(12, 5) == 4
    assert default_input_pipelines(7, 3) == 1


@pytest.mark.parametrize("layout, shards, phrases", [
    (BatchLayout(2, 16, 4, 4), 3, ["3 shard(s), fewer than the 4 workers", "re-shard into at least 4"]),
    (BatchLayout(8, 16, 1, 1), 3, ["--input-pipelines 8: --train-dataset has only 3 shard(s)", "--input-pipelines 2"]),
    (BatchLayout(3, 16, 1, 1), 3, ["--input-pipelines 3 does not divide the global batch of 16",
                                   "--input-pipelines 2"]),
    (BatchLayout(3, 24, 2, 2), 3, ["cannot be shared by the 2 workers", "--input-pipelines 2"]),
    (BatchLayout(4, 24, 1, 6), 9, ["cannot be split evenly among 6 replicas", "--input-pipelines 6"]),
])
def test_layouts_that_cannot_be_are_one_line_with_one_that_can(layout, shards, phrases):
    with pytest.raises(UserError) as raised:
        layout.check(shards, flag_given=True)
    for phrase in phrases:
        assert phrase in str(raised.value), str(raised.value)


def test_each_pipeline_reads_an_equal_part_of_the_records_however_unequal_the_shards():
    from mlm_tpu.shards.reading import ShardSet

    shards = ShardSet(["a", "b", "c", "d"], [512, 512, 512, 45], {"input_ids": 64})  # the demo's train split
    parts = [shards.share(part, 4) for part in range(4)]
    assert [part.records for part in parts] == [395, 395, 395, 396]
    assert (parts[1].files, parts[1].first_records, parts[1].counts, parts[1].file_records) == (
        ["a", "b"], [395, 0], [117, 278], [512, 512])  # a part that ends inside a shard: the next starts there
    assert [(path, start, count) for part in parts for path, start, count in
            zip(part.files, part.first_records, part.counts)] == [
        ("a", 0, 395), ("a", 395, 117), ("b", 0, 278), ("b", 278, 234), ("c", 0, 161), ("c", 161, 351),
        ("d", 0, 45)]  # every record once
    assert shards.share(1, 2).share(0, 2).records == shards.share(2, 4).records  # a part of a part


@pytest.fixture(scope="module")
def host_batches():
    import mlm_tpu  # noqa: F401  (Keras 2 behind tf.keras, before TensorFlow loads)
    import numpy as np
    from transformers import AutoTokenizer

    from mlm_tpu.mlm.masking import MlmMasker
    from mlm_tpu.mlm.shard_kind import MASKED_LM
    from mlm_tpu.shards.pipeline import host_training_batches, steps_per_epoch
    from mlm_tpu.shards.reading import find_shards
    from mlm_tpu.tasks import shard_kinds

    shards = find_shards(str(FIXTURES / "shards" / "validation"), shard_kinds(), MASKED_LM.name,
                         MASKED_LM.features(None))
    tokenizer = AutoTokenizer.from_pretrained(FIXTURES / "tokenizer")

    def global_batches(pipelines: int, hosts: int, replicas: int, steps: int, start: int = 0):
        """Each step's global batch, put together from every host's batches for each of its replicas."""
        layout = BatchLayout(pipelines, 16, hosts, replicas)
        layout.check(len(shards.files), flag_given=True)
        per_epoch = steps_per_epoch(shards, layout)
        streams = [iter(host_training_batches(shards, layout, host, lambda seed: MlmMasker(tokenizer, 0.15, seed),
                                              seed=5, window=64, steps_per_epoch=per_epoch, start_step=start))
                   for host in range(hosts)]
        found = []
        for _ in range(steps):
            rows = [next(stream) for stream in streams for _ in range(layout.replicas_per_host)]
            assert all(row["input_ids"].shape[0] == 16 // replicas for row in rows)
            found.append(b"".join(np.concatenate([row[name].numpy() for row in rows]).tobytes()
                                  for name in ("input_ids", "labels")))
        return per_epoch, found

    return global_batches


def test_every_topology_sees_the_same_global_batches_and_resumes_at_its_step(host_batches):
    per_epoch, alone = host_batches(4, 1, 1, 24)
    assert per_epoch == 20 and len(set(alone)) == 24  # into the second epoch, every batch its own
    for hosts, replicas in ((1, 2), (4, 8)):  # 8 replicas: 2 per virtual pipeline
        assert host_batches(4, hosts, replicas, 24)[1] == alone, (hosts, replicas)
    assert host_batches(4, 2, 2, 8, start=16)[1] == alone[16:]  # resumed on another topology


def test_another_number_of_pipelines_is_another_order(host_batches):
    assert host_batches(4, 1, 1, 3)[1] != host_batches(8, 1, 1, 3)[1]


DROPOUT = """
import json, sys
import mlm_tpu
from mlm_tpu.training.hardware import split_cpu
strategy = split_cpu(4)
import numpy as np, tensorflow as tf
from mlm_tpu.shards.layout import BatchLayout
from mlm_tpu.training.dropout import StepKeys
rows = tf.reshape(tf.range(1, 8 * 6 + 1, dtype=tf.float32), [8, 6])
def global_output(pipelines, replicas):
    keys = StepKeys(11, BatchLayout(pipelines, 8, 1, replicas))
    run_on = tf.distribute.MirroredStrategy([d.name for d in tf.config.list_logical_devices("CPU")[:replicas]])
    @tf.function
    def step():
        def replica():
            context = tf.distribute.get_replica_context()
            keys.start_step(tf.constant(7))
            mine = tf.reshape(rows, [replicas, -1, 6])[context.replica_id_in_sync_group]
            return keys.dropout(mine, 0.5, layer=2)
        return run_on.run(replica)
    return np.concatenate([value.numpy() for value in run_on.experimental_local_results(step())]).tolist()
print(json.dumps({f"{v}x{r}": global_output(v, r) for v in (1, 2, 4) for r in (1, 2, 4)}))
"""


def test_dropout_gives_each_row_of_the_global_batch_the_same_noise_on_any_number_of_replicas():
    result = subprocess.run([sys.executable, "-c", DROPOUT], capture_output=True, text=True, timeout=300,
                            env={"PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    for pipelines in (1, 2, 4):
        one = found[f"{pipelines}x1"]
        assert sum(value == 0 for row in one for value in row) in range(12, 37)  # about half of the 48 dropped
        for replicas in (2, 4):  # 1 x 2: slices of one pipeline's noise; 4 x 2: two pipelines per replica
            assert found[f"{pipelines}x{replicas}"] == one, (pipelines, replicas)
    assert found["1x1"] != found["2x1"] != found["4x1"]


def test_a_resumed_run_keeps_its_backups_order_and_a_backup_from_before_v_resumes_only_as_it_was_written(tmp_path):
    from mlm_tpu.output_dir import write_json
    from mlm_tpu.training.data_order import SHARES, choose_layout

    assert choose_layout(None, None, str(tmp_path), 7, 16, 1, 1).input_pipelines == 4  # a new run: the default
    written = {"input_pipelines": 2, "pipeline_shares": SHARES}
    assert choose_layout(None, written, str(tmp_path), 7, 16, 2, 2).input_pipelines == 2
    with pytest.raises(UserError, match="written with --input-pipelines 2, and the data order depends on it"):
        choose_layout(4, written, str(tmp_path), 7, 16, 1, 1)
    # pipelines that read every V-th shard: V = 1 is the same order, V = 2 another
    assert choose_layout(None, {"input_pipelines": 1}, str(tmp_path), 7, 16, 1, 1).input_pipelines == 1
    with pytest.raises(UserError, match="each read one shard in 2 .* delete .*backup to start over"):
        choose_layout(None, {"input_pipelines": 2}, str(tmp_path), 7, 16, 1, 1)
    write_json(str(tmp_path / "training_args.json"), {"run": {"replicas": 1}})  # mlm_tpu 0.3.0: no V anywhere
    assert choose_layout(None, {"epochs": []}, str(tmp_path), 7, 16, 1, 1).input_pipelines == 1
    with pytest.raises(UserError, match="continues such a backup only as one process with one replica"):
        choose_layout(None, {"epochs": []}, str(tmp_path), 7, 16, 2, 2)
    write_json(str(tmp_path / "training_args.json"), {"run": {"replicas": 2}})
    with pytest.raises(UserError, match="by 2 replicas, whose data order depended on the number of replicas"):
        choose_layout(None, {"epochs": []}, str(tmp_path), 7, 16, 1, 1)
