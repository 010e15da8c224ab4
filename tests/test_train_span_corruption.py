"""T5 pretraining with span corruption, end to end with the real commands: shard raw rows of WikiText, pretrain a
tiny T5 that learns (validation loss far below chance), score it again with `evaluate`, and fine-tune it into the
classifier of the text-to-text tests."""

import json
import math
import re

import pytest

from conftest import assert_user_error, run_module, run_train

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("inputs, raw, targets", [(128, 141, 29), (512, 568, 114)])
def test_the_sharder_cuts_raw_rows_for_t5s_lengths(inputs, raw, targets, t5_data, wikitext_path, tmp_path):
    result = run_module("mlm_tpu.shard", "--task", "span-corruption", "--tokenizer", str(t5_data.tokenizer),
                        "--text-files", str(wikitext_path), "--limit", "400", "--max-length", str(inputs),
                        "--output-dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "train" / "manifest.json").read_text())
    settings = manifest["settings"]
    assert (settings["raw_length"], settings["input_length"], settings["target_length"]) == (raw, inputs, targets)
    assert (settings["noise_density"], settings["mean_noise_span_length"]) == (0.15, 3.0)
    assert manifest["features"] == {"input_ids": {"dtype": "int64", "length": raw}}
    # no document framing: raw rows hold no </s> (T5's pipeline concatenates documents as they are)
    import tensorflow as tf

    shard = sorted((tmp_path / "train").glob("*.tfrecord"))[0]
    record = tf.train.Example.FromString(next(iter(tf.data.TFRecordDataset(str(shard)))).numpy())
    ids = record.features.feature["input_ids"].int64_list.value
    assert len(ids) == raw and 1 not in ids  # 1 is </s> in the T5 template


@pytest.fixture(scope="module")
def pretrained_t5(t5_data, wikitext_path, tmp_path_factory):
    folder = tmp_path_factory.mktemp("span-corruption")
    for split, limit in (("train", "2500"), ("validation", "300")):
        result = run_module("mlm_tpu.shard", "--task", "span-corruption", "--tokenizer", str(t5_data.tokenizer),
                            "--text-files", str(wikitext_path), "--limit", limit, "--split", split, "--max-length",
                            "64", "--output-dir", str(folder / "shards"))
        assert result.returncode == 0, result.stderr
    result = run_train("--task", "span-corruption", "--train-dataset", folder / "shards" / "train", "--eval-dataset",
                       folder / "shards" / "validation", "--tokenizer", t5_data.tokenizer, "--model-config", "t5-tiny",
                       "--learning-rate", "3e-3", "--per-replica-batch-size", 32, "--num-epochs", 2,
                       "--output-dir", folder / "model")
    assert result.returncode == 0, result.stderr[-3000:]
    return folder, result


def test_pretraining_learns_far_below_chance(pretrained_t5, t5_data):
    folder, result = pretrained_t5
    losses = [float(line.split("loss ")[1].split(",")[0]) for line in result.stderr.splitlines()
              if "validation: loss" in line]
    chance = math.log(3000)  # the tokenizer's vocabulary
    assert len(losses) == 2 and losses[1] < losses[0] < chance - 2, losses
    record = json.loads((folder / "model" / "best_model.json").read_text())
    assert (record["metric"], record["epoch"]) == ("val_loss", 2)
    config = json.loads((folder / "model" / "config.json").read_text())
    settings = config["task_specific_params"]["mlm_tpu_text2text"]
    assert settings["task"] == "span-corruption" and settings["max_length"] == 64
    speeds = re.findall(r"; ([\d,]+) examples/s, ([\d,]+) tokens/s .*, [\d.]+ [kMG]FLOP per token, MFU unknown",
                        result.stderr)  # a T5's tokens: its inputs' and its targets'
    assert len(speeds) == 2, result.stderr
    for examples, tokens in speeds:
        per_example = int(tokens.replace(",", "")) / int(examples.replace(",", ""))
        assert per_example == pytest.approx(settings["max_length"] + settings["max_new_tokens"], rel=0.03)
    assert (folder / "model" / "model.safetensors").is_file() and (folder / "model" / "README.md").is_file()
    from huggingface_hub import ModelCard

    card = ModelCard.load(folder / "model" / "README.md")  # its words come from the span-corruption plug-in
    assert card.data.pipeline_tag == "text2text-generation" and "span-corruption" in card.data.tags
    assert "pretrained from scratch by span corruption" in card.text and "predict text2text" in card.text


def test_evaluate_scores_the_pretrained_model_as_its_last_validation(pretrained_t5):
    folder, result = pretrained_t5
    last = [line for line in result.stderr.splitlines() if "validation: loss" in line][-1]
    evaluation = run_module("mlm_tpu.evaluate", "--model", str(folder / "model"), "--eval-dataset",
                            str(folder / "shards" / "validation"), "--per-replica-batch-size", "32", "--json")
    assert evaluation.returncode == 0, evaluation.stderr
    scores = json.loads(evaluation.stdout)
    assert f"loss {scores['loss']:.4f}" in last, (scores, last)


def test_the_pretrained_model_fine_tunes_into_a_classifier(pretrained_t5, quality_shards, t5_data, tmp_path):
    folder, _ = pretrained_t5
    result = run_train("--task", "classification", "--train-dataset", quality_shards / "train", "--eval-dataset",
                       quality_shards / "validation", "--model-name-or-path", folder / "model", "--learning-rate",
                       "3e-3", "--per-replica-batch-size", 16, "--num-epochs", 8, "--output-dir", tmp_path / "cls")
    assert result.returncode == 0, result.stderr[-3000:]
    accuracies = [float(line.split("accuracy ")[1].split("%")[0]) for line in result.stderr.splitlines()
                  if "validation:" in line and "accuracy " in line]
    # Three classes: the prior is 30%. The first epochs sit there (span corruption's targets always start with
    # <extra_id_0>, so the decoder's first position never needed the encoder), then it learns the task.
    assert max(accuracies) > 90, accuracies


def test_bad_span_corruption_input(t5_data, wikitext_tokenizer, shards, wikitext_path, tmp_path, pretrained_t5,
                                   in_process):
    mlm_tokenizer = in_process("shard", "--task", "span-corruption", "--tokenizer",
                               str(wikitext_tokenizer[0]), "--text-files", str(wikitext_path), "--max-length", "64",
                               "--output-dir", str(tmp_path / "a"))
    assert_user_error(mlm_tokenizer, "a T5 tokenizer", "--template t5")
    assert not (tmp_path / "a").exists()
    density = in_process("shard", "--task", "span-corruption", "--tokenizer", str(t5_data.tokenizer),
                         "--text-files", str(wikitext_path), "--noise-density", "1.5", "--output-dir",
                         str(tmp_path / "b"))
    assert_user_error(density, "--noise-density")
    mlm_shards = in_process("train", "--task", "span-corruption", "--train-dataset", shards / "train", "--tokenizer",
                           t5_data.tokenizer, "--output-dir", tmp_path / "c")
    assert_user_error(mlm_shards, "masked-LM examples", "--task span-corruption")
    span_shards = in_process("train", "--task", "mlm", "--train-dataset", pretrained_t5[0] / "shards" / "train", "--tokenizer",
                            wikitext_tokenizer[0], "--output-dir", tmp_path / "d")
    assert_user_error(span_shards, "raw rows for span corruption", "--task mlm")
