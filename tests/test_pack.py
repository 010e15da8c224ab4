"""--pack: several text-to-text examples per row, each computed as if alone (block-diagonal masks), the packing
deterministic and resumable like the rest of the pipeline."""

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from conftest import assert_same_batches, assert_user_error, global_batches, run_train

FIXTURES = Path(__file__).parent / "fixtures" / "made-by-0.2"


@pytest.fixture(scope="module")
def examples(short_shards):
    """Every training example of those shards, decoded."""
    import tensorflow as tf

    from mlm_tpu.shards.reading import find_shards
    from mlm_tpu.t5.shard_kinds import TEXT2TEXT_ROWS
    from mlm_tpu.tasks import shard_kinds

    shards = find_shards(str(short_shards), shard_kinds(), TEXT2TEXT_ROWS.name, TEXT2TEXT_ROWS.features(None, None))
    schema = {name: tf.io.FixedLenFeature([length], tf.int64) for name, length in shards.features.items()}
    records = tf.data.TFRecordDataset(shards.files).batch(1000).get_single_element()
    return shards, {name: tf.cast(values, tf.int32) for name, values in tf.io.parse_example(records, schema).items()}


def per_example(labels, logits, segments=None):
    """Each example's summed target loss, token hits and target tokens, in order (by row, then segment)."""
    from mlm_tpu.t5.packed import token_losses

    losses = token_losses(labels, logits).numpy()
    labels = labels.numpy()
    hits = (np.argmax(logits.numpy(), axis=-1) == labels) & (labels != -100)
    segments = np.where(labels != -100, 1, 0) if segments is None else segments.numpy()
    found = []
    for row in range(len(labels)):
        for segment in sorted(set(segments[row]) - {0}):
            where = segments[row] == segment
            found.append((losses[row][where].sum(), hits[row][where].sum(), where.sum()))
    return np.array(found)


def tiny_t5():
    """A tiny T5 with dropout off (random weights, seeded)."""
    import tf_keras as keras
    from transformers import AutoTokenizer, TFT5ForConditionalGeneration

    from mlm_tpu.t5.presets import config_for

    keras.utils.set_random_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(FIXTURES / "t5-tokenizer")
    return TFT5ForConditionalGeneration.from_config(config_for("t5-tiny", tokenizer, "dropout_rate=0"))


def test_packed_rows_give_every_example_its_own_loss_and_the_same_gradients(examples):
    """The masking proof: a tiny T5 (dropout off) on the 80 examples one per row, and packed several per row,
    gives each example the same loss within 1e-5, the same hits, and the batch the same gradients."""
    import tensorflow as tf

    from mlm_tpu.shards.text2text_packing import pack_examples
    from mlm_tpu.t5.packed import packed_outputs

    _, batch = examples
    model = tiny_t5()
    packed = pack_examples(batch)
    rows = len(packed["input_ids"])
    assert rows < len(batch["input_ids"]) / 2  # short examples: several per row
    assert int(tf.reduce_max(packed["input_segments"])) >= 3

    with tf.GradientTape(persistent=True) as tape:
        alone = model(**batch, training=True)
        together = packed_outputs(model, packed, training=True)
    expected = per_example(batch["labels"], alone.logits)
    got = per_example(packed["labels"], together.logits, packed["target_segments"])
    assert len(got) == len(expected) == 80
    np.testing.assert_allclose(got[:, 0] / got[:, 2], expected[:, 0] / expected[:, 2], atol=1e-5)
    np.testing.assert_array_equal(got[:, 1:], expected[:, 1:])  # token hits and scored tokens: the metrics
    assert float(together.loss) == pytest.approx(float(alone.loss[0]), abs=1e-5)
    for one, other in zip(tape.gradient(alone.loss, model.trainable_variables),
                          tape.gradient(together.loss, model.trainable_variables)):
        np.testing.assert_allclose(tf.convert_to_tensor(other).numpy(), tf.convert_to_tensor(one).numpy(),
                                   atol=2e-6, rtol=1e-4)


def test_prefix_tuning_scores_packed_rows_as_each_example_alone(examples):
    """Prefix tuning on packed rows: each target token sees the prefix as far away as alone (PEFT puts it right
    before the example's first target token), not as far as the example's offset in its row, so every example's
    loss is its loss alone, within 1e-5 (an example packed at offset o otherwise saw the prefix o tokens away)."""
    from types import SimpleNamespace

    from mlm_tpu.delta import method_class
    from mlm_tpu.shards.text2text_packing import pack_examples
    from mlm_tpu.t5.packed import packed_outputs

    _, batch = examples
    model = tiny_t5()
    model.build_in_name_scope()
    method_class("prefix").of(SimpleNamespace(num_virtual_tokens=4)).apply(model)
    packed = pack_examples(batch)
    expected = per_example(batch["labels"], model(**batch).logits)
    got = per_example(packed["labels"], packed_outputs(model, packed, training=False).logits, packed["target_segments"])
    assert max(len(set(row) - {0}) for row in packed["target_segments"].numpy()) >= 3  # offsets of several tokens
    np.testing.assert_allclose(got[:, 0] / got[:, 2], expected[:, 0] / expected[:, 2], atol=1e-5)


def test_packing_keeps_every_token_of_every_example_in_order(examples):
    from mlm_tpu.shards.text2text_packing import pack_examples

    _, batch = examples
    packed = {name: values.numpy() for name, values in pack_examples(batch).items()}
    inputs = [ids[mask > 0].tolist() for ids, mask in zip(batch["input_ids"].numpy(),
                                                          batch["attention_mask"].numpy())]
    targets = [labels[labels != -100].tolist() for labels in batch["labels"].numpy()]
    packed_inputs, packed_targets = [], []
    for row in range(len(packed["input_ids"])):
        for segment in sorted(set(packed["input_segments"][row]) - {0}):
            packed_inputs.append(packed["input_ids"][row][packed["input_segments"][row] == segment].tolist())
            packed_targets.append(packed["labels"][row][packed["target_segments"][row] == segment].tolist())
    assert packed_inputs == inputs and packed_targets == targets
    assert np.all(packed["labels"][packed["target_segments"] == 0] == -100)


def test_packed_batches_are_a_function_of_seed_and_step(examples):
    """Epochs of the same number of steps; a pipeline started at step k gives what the one from 0 gave from k on;
    each epoch packs every example once, in a new order."""
    from mlm_tpu.shards.layout import BatchLayout
    from mlm_tpu.shards.text2text_packing import host_packed_batches, packed_steps_per_epoch

    shards, _ = examples
    layout = BatchLayout(1, 2, 1, 1)
    per_epoch = packed_steps_per_epoch(shards, layout, seed=3, window=16)
    assert per_epoch >= 3

    def batches(start, count):
        return global_batches(layout, lambda host: host_packed_batches(
            shards, layout, host, seed=3, window=16, steps_per_epoch=per_epoch, start_step=start, vocab_size=5000),
            count)

    run = batches(0, 2 * per_epoch + 2)
    assert_same_batches(batches(per_epoch + 1, per_epoch + 1), run[per_epoch + 1:])
    first, second = (np.concatenate([b["input_ids"] for b in run[e * per_epoch:(e + 1) * per_epoch]])
                     for e in (0, 1))
    assert not np.array_equal(first, second)
    segments = sum(len(set(row) - {0}) for b in run[:per_epoch] for row in b["target_segments"])
    assert 80 - 16 < segments <= 80  # at most the rows of one batch dropped at the epoch's end


def test_packed_global_batches_are_the_same_on_any_number_of_hosts_and_replicas(examples):
    """Two virtual pipelines, each packing its own half of the examples: 1 host x 2 replicas, 2 hosts x 1 replica and 1 x 1 train
    the same rows every step, into the second epoch, and a run resumed on another topology continues them."""
    from mlm_tpu.shards.layout import BatchLayout
    from mlm_tpu.shards.text2text_packing import host_packed_batches, packed_steps_per_epoch

    shards, _ = examples
    per_epoch = packed_steps_per_epoch(shards, BatchLayout(2, 4, 1, 1), seed=3, window=16)
    one_pipeline = packed_steps_per_epoch(shards, BatchLayout(1, 4, 1, 1), seed=3, window=16)
    assert 2 <= per_epoch <= one_pipeline  # each packs only its half of the examples: about one pipeline's steps

    def batches(hosts, replicas, start, count):  # replicas: all hosts' together
        layout = BatchLayout(2, 4, hosts, replicas)
        layout.check(len(shards.files), flag_given=True)
        return global_batches(layout, lambda host: host_packed_batches(
            shards, layout, host, seed=3, window=16, steps_per_epoch=per_epoch, start_step=start), count)

    alone = batches(1, 1, 0, 2 * per_epoch + 1)
    assert len({b["input_ids"].tobytes() for b in alone}) == len(alone)
    assert_same_batches(batches(1, 2, 0, len(alone)), alone)  # 1 host x 2 replicas
    assert_same_batches(batches(2, 2, 0, len(alone)), alone)  # 2 hosts x 1 replica
    assert_same_batches(batches(2, 4, per_epoch - 1, 3), alone[per_epoch - 1:per_epoch + 2])  # 2 x 2, resumed
    assert_same_batches(batches(1, 2, per_epoch + 1, per_epoch), alone[per_epoch + 1:])


def test_pack_with_mlm_is_one_line(tmp_path):
    result = run_train("--task", "mlm", "--pack", "--train-dataset", FIXTURES / "shards" / "train",
                       "--output-dir", tmp_path / "out")
    assert_user_error(result, "--pack packs text-to-text examples", "--task mlm")
    assert not (tmp_path / "out").exists()


def test_the_packed_row_count_is_kept_and_used_only_for_the_same_shards_and_settings(short_shards, tmp_path,
                                                                                     monkeypatch):
    """--pack's count (which packs every example) is made once: a later start finds it in the cache, a resumed run
    in its backup's record, so neither reads the shards again (here: emptied); its key changes with the seed, V,
    the window and any shard's checksum; a damaged cache file is counted afresh; shards without checksums (no
    manifest) have no key, and nothing is kept for them."""
    import shutil

    from mlm_tpu.shards.layout import BatchLayout
    from mlm_tpu.shards.packed_rows import count_key, packed_rows, steps_of
    from mlm_tpu.shards.reading import find_shards
    from mlm_tpu.t5.shard_kinds import TEXT2TEXT_ROWS
    from mlm_tpu.tasks import shard_kinds

    monkeypatch.setenv("MLM_TPU_CACHE", str(tmp_path / "cache"))
    split = tmp_path / "train"
    shutil.copytree(short_shards, split)
    shards = find_shards(str(split), shard_kinds(), TEXT2TEXT_ROWS.name, TEXT2TEXT_ROWS.features(None, None))
    layout = BatchLayout(2, 4, 1, 1)
    counted = packed_rows(shards, layout, seed=3, window=16)
    assert len(counted["rows"]) == 2 and steps_of(counted, layout) == min(counted["rows"]) // 2
    [cached] = (tmp_path / "cache").rglob("*.json")
    assert cached.name == f"{counted['key']}.json"

    cached.write_text(cached.read_text()[:30])  # cut short: counted again, and written whole
    assert packed_rows(shards, layout, seed=3, window=16) == counted
    for path in split.glob("*.tfrecord"):
        path.write_bytes(b"")  # read again, these would fail
    assert packed_rows(shards, layout, seed=3, window=16) == counted  # a later start: from the cache
    cached.unlink()
    assert packed_rows(shards, layout, seed=3, window=16, recorded=counted) == counted  # a resume: from its backup

    def key(manifest=shards.manifest, layout=layout, seed=3, window=16):
        return count_key(dataclasses.replace(shards, manifest=manifest), layout, seed=seed, window=window)

    changed = dict(shards.manifest, shards=[dict(entry, crc32c="AAAAAA==") if index == 1 else entry
                                            for index, entry in enumerate(shards.manifest["shards"])])
    keys = [key(), key(seed=4), key(layout=BatchLayout(1, 4, 1, 1)), key(window=8), key(manifest=changed)]
    assert keys[0] == counted["key"] and len(set(keys)) == 5
    assert key(layout=BatchLayout(2, 8, 1, 2)) == keys[0]  # the batch is not in it: the steps are rows // batch
    assert key(manifest=None) is None
