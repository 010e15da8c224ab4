"""`python train.py` for real on tiny RoBERTa models: one replica, two CPU replicas, preemption, bad input."""

import json
import os
import re
import shutil

import pytest

from conftest import MAX_LENGTH, REPO_ROOT, assert_user_error, run_train
from fake_hub import FakeHub

pytestmark = pytest.mark.slow  # trains models

EPOCH_LINE = re.compile(r"^Epoch (\d+) training: loss ([\d.]+), masked accuracy ([\d.]+)%.*$"
                        r"(?:\nEpoch \1 validation: loss ([\d.]+), perplexity [\d.]+, masked accuracy ([\d.]+)%)?", re.M)


def common_flags(shards, tokenizer, output_dir):
    return ["--train-dataset", shards / "train", "--eval-dataset", shards / "validation", "--tokenizer", tokenizer,
            "--max-length", MAX_LENGTH, "--model-config", "tiny", "--learning-rate", "3e-3", "--output-dir", output_dir]


def epoch_losses(result):
    """(loss, masked accuracy, val loss, val masked accuracy) of each epoch, from the trainer's lines on stderr."""
    return [(float(loss), float(accuracy) / 100, float(val_loss) if val_loss else None,
             float(val_accuracy) / 100 if val_accuracy else None)
            for _, loss, accuracy, val_loss, val_accuracy in EPOCH_LINE.findall(result.stderr)]


def test_training_lowers_the_loss_and_saves_a_reloadable_model(trained_mlm):
    output_dir, result = trained_mlm
    epochs = epoch_losses(result)
    assert len(epochs) == 3, result.stderr
    assert epochs[-1][0] < epochs[0][0] - 0.3, epochs  # training loss falls (from ~ln(2000) = 7.6 at the start)
    assert epochs[-1][2] < epochs[0][2], epochs  # and so does validation loss
    assert all(0 <= e[1] <= 1 and 0 <= e[3] <= 1 for e in epochs)

    from transformers import AutoTokenizer, TFAutoModelForMaskedLM

    model = TFAutoModelForMaskedLM.from_pretrained(output_dir, use_safetensors=False)  # transformers#40028
    tokenizer = AutoTokenizer.from_pretrained(output_dir)
    assert model.config.vocab_size == len(tokenizer) == 2000
    assert model.config.max_position_embeddings >= MAX_LENGTH + tokenizer.pad_token_id + 1
    assert model.config.pad_token_id == tokenizer.pad_token_id == 1  # RoBERTa's padding index is the tokenizer's pad
    assert tokenizer.convert_ids_to_tokens(1) == "<pad>"
    logits = model(tokenizer(["The game was released in Japan ."], return_tensors="tf")).logits
    assert logits.shape[-1] == 2000
    info = json.loads((output_dir / "training_args.json").read_text())
    assert (info["run"]["replicas"], info["run"]["global_batch_size"]) == (1, 16)
    assert any(name.startswith("events") for _, _, names in os.walk(output_dir / "logs") for name in names)
    assert not (output_dir / "backup").exists()  # the backup is removed once training finished
    assert "Masked-LM head: sparse, at 25 of the 64 positions of each row" in result.stderr  # the default
    speed = re.findall(r"^Epoch \d training: .*; [\d,]+ examples/s, ([\d,]+) tokens/s \(([\d,]+) per replica\), "
                       r"[\d.]+ [kMG]FLOP per token, MFU unknown \(no peak known for CPU: pass --peak-tflops\)$",
                       result.stderr, re.M)
    assert len(speed) == 3 and all(total == per_replica for total, per_replica in speed), result.stderr
    from mlm_tpu.training.run_logs import read_scalars

    scalars = read_scalars(str(output_dir / "logs" / "train"))
    assert len(scalars["tokens_per_second"]) == 3 and "mfu" not in scalars


def test_two_cpu_replicas_train_with_a_doubled_global_batch(shards, wikitext_tokenizer, tmp_path):
    output_dir = tmp_path / "mirrored"
    result = run_train(*common_flags(shards, wikitext_tokenizer[0], output_dir), "--per-replica-batch-size", 8,
                       "--num-epochs", 2, "--cpu-replicas", 2, "--train-dataset", shards / "validation",  # 25 steps
                       "--peak-tflops", "0.5")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "MirroredStrategy with 2 replica(s): global batch 16 = 8 per replica x 2" in result.stderr
    speed = re.findall(r"([\d,]+) tokens/s \(([\d,]+) per replica\), .* MFU ([\d.]+)% of 0.5 TFLOP/s per replica "
                       r"\(--peak-tflops\)$", result.stderr, re.M)
    assert len(speed) == 2, result.stderr
    for total, per_replica, mfu in speed:
        total, per_replica = int(total.replace(",", "")), int(per_replica.replace(",", ""))
        assert abs(total - 2 * per_replica) <= 1 and 0 < float(mfu) < 100
    info = json.loads((output_dir / "training_args.json").read_text())
    assert (info["run"]["replicas"], info["run"]["global_batch_size"]) == (2, 16)
    epochs = epoch_losses(result)
    assert len(epochs) == 2 and epochs[1][0] < epochs[0][0], epochs


def test_max_steps_stops_exactly_and_masks_beyond_the_prediction_slots_are_counted(shards, wikitext_tokenizer,
                                                                                    tmp_path):
    result = run_train(*common_flags(shards, wikitext_tokenizer[0], tmp_path / "m"), "--per-replica-batch-size", 8,
                       "--max-steps", 7, "--max-predictions-per-seq", 4)  # 15% of 64 tokens: 9 masks a row
    assert result.returncode == 0, result.stderr[-3000:]
    assert "7 steps in all" in result.stderr and re.search(r"^Epoch 1 training: .*\(7 steps", result.stderr, re.M)
    assert "at 4 of the 64 positions of each row (--max-predictions-per-seq)" in result.stderr
    left_out = re.search(r"^warning: ([\d,]+) masked positions found no prediction slot in their rows and were left "
                         r"unmasked: .* raise --max-predictions-per-seq \(now 4\)", result.stderr, re.M)
    assert left_out and 7 * 8 < int(left_out.group(1).replace(",", "")) < 7 * 8 * 64, result.stderr


def test_tpu_flag_without_a_tpu_is_one_line_and_exit_2(shards, wikitext_tokenizer, tmp_path):
    result = run_train(*common_flags(shards, wikitext_tokenizer[0], tmp_path / "t"), "--tpu")
    assert_user_error(result, "no TPU found", "drop --tpu")


def corrupt_copy(shards, tmp_path, edit):
    target = tmp_path / "train"
    shutil.copytree(shards / "train", target)
    edit(target)
    return target


@pytest.mark.parametrize("case", ["no shards", "name without a count", "length differs, manifest",
                                  "length differs, no manifest", "corrupt record"])
def test_bad_shards_are_named_in_one_line(case, shards, wikitext_tokenizer, tmp_path, in_process):
    first = sorted(p for p in os.listdir(shards / "train") if p.endswith(".tfrecord"))[0]

    def flip_a_byte(folder):
        os.remove(folder / "manifest.json")
        data = bytearray((folder / first).read_bytes())
        data[len(data) // 2] ^= 0xFF
        (folder / first).write_bytes(bytes(data))

    cases = {
        "no shards": (lambda folder: [os.remove(folder / n) for n in os.listdir(folder)], ["no shards"], MAX_LENGTH),
        "name without a count": (lambda folder: (os.remove(folder / "manifest.json"),
                                                 os.rename(folder / first, folder / "renamed.tfrecord")),
                                 ["renamed.tfrecord", "no record count"], MAX_LENGTH),
        "length differs, manifest": (lambda folder: None, ["64-token examples", "--max-length 128"], 128),
        "length differs, no manifest": (lambda folder: os.remove(folder / "manifest.json"),
                                        ["64-token examples", "--max-length 64"], 128),
        "corrupt record": (flip_a_byte, [first, "corrupt"], MAX_LENGTH),
    }
    edit, phrases, max_length = cases[case]
    train_dir = corrupt_copy(shards, tmp_path, edit)
    result = in_process("train", "--train-dataset", train_dir, "--tokenizer", wikitext_tokenizer[0], "--max-length",
                        max_length, "--model-config", "tiny", "--per-replica-batch-size", 8, "--max-steps", 200,
                        "--output-dir", tmp_path / "out")
    assert_user_error(result, *phrases)


def test_help_lists_every_flag():
    result = run_train("--help")
    for flag in ["--tpu", "--tpu-zone", "--gcp-project", "--train-dataset", "--eval-dataset", "--tokenizer",
                 "--model-config", "--pretrained_model_config", "--output-dir", "--per-replica-batch-size",
                 "--num-epochs", "--max-steps", "--learning-rate", "--weight-decay-rate", "--warmup-ratio",
                 "--max-length", "--mlm-probability", "--bf16", "--steps-per-execution", "--hub-model-id", "--seed",
                 "--shuffle-buffer-size", "--cpu-replicas", "--backup-steps", "--logging-steps", "--dense-mlm-head",
                 "--max-predictions-per-seq", "--peak-tflops"]:
        assert flag in result.stdout, flag


def test_the_hub_push_commits_config_weights_and_tokenizer(shards, wikitext_tokenizer, tmp_path):
    output_dir = tmp_path / "pushed"
    with FakeHub(tmp_path / "hub") as hub:
        result = run_train(*common_flags(shards, wikitext_tokenizer[0], output_dir), "--per-replica-batch-size", 16,
                           "--max-steps", 5, "--hub-model-id", "tester/tiny-roberta",
                           env={"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": hub.endpoint, "HF_TOKEN": "hf_test"})
        assert result.returncode == 0, result.stderr[-3000:]
        files = hub.files("tester/tiny-roberta")
        assert {"config.json", "tf_model.h5", "model.safetensors", "README.md", "tokenizer.json",
                "tokenizer_config.json", "special_tokens_map.json", "loss.png"} <= set(files), files
        assert not [name for name in files if name.startswith("backup/")]
        pushed = hub.repos["tester/tiny-roberta"]
        assert json.loads((pushed / "config.json").read_text())["vocab_size"] == 2000
        assert {"tf_model.h5", "model.safetensors"} <= set(hub.lfs_paths["tester/tiny-roberta"])  # as on the Hub
        assert (pushed / "README.md").read_text() == (output_dir / "README.md").read_text()  # the final card
        assert (pushed / "tf_model.h5").read_bytes() == (output_dir / "tf_model.h5").read_bytes()


def test_shards_made_by_mlm_tpu_0_1_are_still_read(shards, tmp_path):
    """Its manifest listed each feature's type only."""
    import mlm_tpu  # noqa: F401  (Keras 2 behind tf.keras, before TensorFlow loads)
    from mlm_tpu.mlm.shard_kind import MASKED_LM
    from mlm_tpu.shards.reading import find_shards
    from mlm_tpu.tasks import shard_kinds

    old = tmp_path / "validation"
    shutil.copytree(shards / "validation", old)
    manifest = json.loads((old / "manifest.json").read_text())
    manifest["features"] = {"input_ids": "int64", "attention_mask": "int64"}
    (old / "manifest.json").write_text(json.dumps(manifest))
    found = find_shards(str(old), shard_kinds(), MASKED_LM.name, MASKED_LM.features(None), "--eval-dataset")
    assert found.features == {"input_ids": MAX_LENGTH, "attention_mask": MAX_LENGTH}


def test_a_config_file_trains_and_the_runs_own_record_replays_it(shards, wikitext_tokenizer, tmp_path):
    """The demo's tiny config, pointed at the test shards; then the run's training_args.json, as it is, starts
    the same run again (into another folder): same settings, same steps, the same losses to the last bit."""
    first = tmp_path / "first"
    result = run_train("--config", REPO_ROOT / "configs" / "demo.yaml", "--train-dataset", shards / "train",
                       "--eval-dataset", shards / "validation", "--tokenizer", wikitext_tokenizer[0], "--max-steps", 12,
                       "--logging-steps", 4, "--deterministic", "--dense-mlm-head", "--output-dir", first)
    assert result.returncode == 0, result.stderr[-3000:]
    recorded = json.loads((first / "training_args.json").read_text())
    assert recorded["model_config"] == "tiny" and recorded["run"]["total_steps"] == 12 and recorded["dense_mlm_head"]

    replay = run_train("--config", first / "training_args.json", "--output-dir", tmp_path / "replay")
    assert replay.returncode == 0, replay.stderr[-3000:]
    replayed = json.loads((tmp_path / "replay" / "training_args.json").read_text())
    assert {**replayed, "output_dir": None} == {**recorded, "output_dir": None}
    assert epoch_losses(replay) == epoch_losses(result) and len(epoch_losses(result)) == 1
    assert "Masked-LM head: dense, at every position (--dense-mlm-head)" in replay.stderr
