"""`python train.py --head t5` for real on tiny T5 models: classification and generation learned from scratch,
the best epoch kept, the device-side class path, pretrained weights, two CPU replicas, and bad input."""

import json
import re

import pytest

from conftest import CLASSES, assert_user_error, backup_reached, run_train, t5_flags, train_until_killed
from fake_hub import FakeHub

pytestmark = pytest.mark.slow  # trains models

VALIDATION_LINE = re.compile(r"^Epoch (\d+) validation: (.*)$", re.M)


def validation_scores(result, name):
    """The `name` score ("accuracy", "exact match") of each epoch, from the trainer's validation lines."""
    found = []
    for epoch, line in VALIDATION_LINE.findall(result.stderr):
        value = re.search(rf"{name} ([\d.]+)%", line)
        found.append((int(epoch), float(value.group(1)) / 100))
    return found


def test_classification_reaches_90_percent_and_the_best_epoch_is_kept(trained_classifier):
    output_dir, result = trained_classifier
    scores = validation_scores(result, "accuracy")
    assert [epoch for epoch, _ in scores] == list(range(1, 13)), result.stderr[-2000:]
    best_epoch, best = max(scores, key=lambda item: (item[1], -item[0]))
    assert best >= 0.9, scores
    record = json.loads((output_dir / "best_model.json").read_text())
    assert (record["metric"], record["epoch"]) == ("val_accuracy", best_epoch)
    assert record["value"] == pytest.approx(best, abs=0.00005)
    for label in CLASSES:  # each class's precision, recall and F1 are reported every epoch
        assert re.search(rf"{label} P/R/F1 [\d.]+/[\d.]+/[\d.]+", result.stderr)
    settings = json.loads((output_dir / "config.json").read_text())["task_specific_params"]["mlm_tpu_text2text"]
    assert settings["task"] == "classification" and sorted(settings["labels"]) == sorted(CLASSES)
    assert settings["source_prefix"] == "quality:" and settings["max_length"] == 48
    assert "Classes: good (token" in result.stderr


def test_the_class_path_returns_one_integer_per_example_and_no_logits(trained_classifier, quality_shards):
    import mlm_tpu  # noqa: F401  (Keras 2 behind tf.keras, before TensorFlow loads)
    import tensorflow as tf
    from transformers import TFT5ForConditionalGeneration

    from mlm_tpu.shards.pipeline import evaluation_batches
    from mlm_tpu.shards.reading import find_shards
    from mlm_tpu.t5.classification import ClassificationScorer, LabelSet, predict_classes
    from mlm_tpu.t5.shard_kinds import TEXT2TEXT_ROWS
    from mlm_tpu.tasks import shard_kinds
    from mlm_tpu.tokenizer.load import load_tokenizer
    from mlm_tpu.training.evaluation import PredictionValidation

    model = TFT5ForConditionalGeneration.from_pretrained(trained_classifier[0], use_safetensors=False)
    settings = model.config.task_specific_params["mlm_tpu_text2text"]
    labels = LabelSet.from_names(settings["labels"], load_tokenizer(str(trained_classifier[0])))
    assert labels.token_ids == settings["label_token_ids"]
    shards = find_shards(str(quality_shards / "validation"), shard_kinds(), TEXT2TEXT_ROWS.name,
                         TEXT2TEXT_ROWS.features(48, 4))
    batch = next(iter(evaluation_batches(shards, 8, None)))
    classes = predict_classes(model, batch["input_ids"], batch["attention_mask"], tf.constant(labels.token_ids))
    assert classes.shape == (8,) and classes.dtype == tf.int32
    assert set(classes.numpy().tolist()) <= {0, 1, 2}

    scorer = ClassificationScorer(labels)
    validation = PredictionValidation(tf.distribute.get_strategy(), model, scorer, shards, 16, jit_compile=False)
    step = validation.runner.step(iter(validation.runner.dataset))
    assert {name: (value.shape, value.dtype) for name, value in step.items()} == {
        "predicted": ((16,), tf.int32), "truth": ((16,), tf.int32)}  # what leaves the device: ids only
    outputs = validation.outputs()
    assert (outputs["truth"] >= 0).sum() == shards.records == 150  # every example once; padding rows marked
    record = json.loads((trained_classifier[0] / "best_model.json").read_text())
    assert scorer.score(outputs)["accuracy"] == pytest.approx(record["value"], abs=1e-6)


def test_generation_learns_to_copy_spans(trained_copier):
    output_dir, result = trained_copier
    exact = validation_scores(result, "exact match")
    assert len(exact) == 3 and exact[-1][1] > 0.5, result.stderr[-2000:]
    assert re.search(r"F1 [\d.]+, ROUGE-1/2/L [\d.]+/[\d.]+/[\d.]+", result.stderr)
    record = json.loads((output_dir / "best_model.json").read_text())
    assert record["metric"] == "val_rougeL" and record["value"] > 0.5
    settings = json.loads((output_dir / "config.json").read_text())["task_specific_params"]["mlm_tpu_text2text"]
    assert (settings["task"], settings["max_new_tokens"]) == ("generation", 4)


def test_pretrained_weights_on_two_cpu_replicas_score_as_the_saved_best(trained_classifier, quality_shards,
                                                                        tmp_path):
    """--model-name-or-path loads the trained weights (its tokenizer too); one tiny step on two replicas keeps
    them, so the first validation matches the saved best epoch's accuracy, computed over the same examples."""
    result = run_train("--head", "t5", "--task", "classification", "--model-name-or-path", trained_classifier[0],
                       "--train-dataset", quality_shards / "train", "--eval-dataset", quality_shards / "validation",
                       "--per-replica-batch-size", 8, "--cpu-replicas", 2, "--max-steps", 1, "--learning-rate", "1e-12",
                       "--output-dir", tmp_path / "again")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "MirroredStrategy with 2 replica(s): global batch 16" in result.stderr
    record = json.loads((trained_classifier[0] / "best_model.json").read_text())
    assert validation_scores(result, "accuracy")[0][1] == pytest.approx(record["value"], abs=0.00005)


def test_generation_on_two_cpu_replicas_without_xla(trained_copier, copy_shards, tmp_path):
    result = run_train("--head", "t5", "--task", "generation", "--model-name-or-path", trained_copier[0],
                       "--train-dataset", copy_shards / "train", "--eval-dataset", copy_shards / "validation",
                       "--per-replica-batch-size", 8, "--cpu-replicas", 2, "--max-steps", 1, "--learning-rate", "1e-12",
                       "--output-dir", tmp_path / "again")
    assert result.returncode == 0, result.stderr[-3000:]
    assert validation_scores(result, "exact match")[0][1] > 0.5


@pytest.mark.parametrize("case", ["no task", "mlm flag", "multi-token label", "label missing from the shards",
                                  "masked-LM shards", "text2text shards for mlm", "target length", "bad best metric"])
def test_bad_t5_input_is_one_clear_line(case, quality_shards, shards, wikitext_tokenizer, t5_data, tmp_path,
                                        in_process):
    base = [str(f) for f in t5_flags(quality_shards, t5_data.tokenizer, tmp_path / "out", "classification")]
    cases = {
        "no task": ([f for f in base if f not in ("--task", "classification")], ["--head t5 needs --task"]),
        "mlm flag": (base + ["--mlm-probability", "0.2"], ["--mlm-probability is a setting of --task mlm and --task "
                                                            "electra, not of --task classification"]),
        "multi-token label": (base + ["--labels", "none", "low", "good", "high"], ["label 'none' is 2 tokens",
                                                                          "--task generation"]),
        "label missing from the shards": (base + ["--labels", "low", "high"], ["--train-dataset", "good", "--labels"]),
        "masked-LM shards": (["--head", "t5", "--task", "generation", "--train-dataset", str(shards / "train"),
                              "--tokenizer", str(wikitext_tokenizer[0]), "--output-dir", str(tmp_path / "o")],
                             ["masked-LM examples", "--task text2text"]),
        "text2text shards for mlm": (["--train-dataset", str(quality_shards / "train"), "--tokenizer",
                                      str(t5_data.tokenizer), "--output-dir", str(tmp_path / "o")],
                                     ["text-to-text examples", "--task classification"]),
        "target length": (base + ["--max-target-length", "8"], ["4-token targets", "--max-target-length 8"]),
        "bad best metric": (base + ["--metric-for-best-model", "rougeL"], ["accuracy, macro_f1"]),
    }
    flags, phrases = cases[case]
    assert_user_error(in_process("train", *flags), *phrases)
    assert not (tmp_path / "out" / "tf_model.h5").exists()


def test_help_lists_the_t5_flags():
    result = run_train("--help")
    for flag in ["--head", "--task", "--labels", "--max-target-length", "--max-new-tokens", "--model-name-or-path",
                 "--metric-for-best-model"]:
        assert flag in result.stdout, flag
    assert all(preset in result.stdout for preset in ("t5-tiny", "t5-small", "t5-base"))


def unchanged_classifier_flags(trained_classifier, quality_shards, output_dir):
    """Fine-tune the trained classifier with a learning rate too small to change it: every epoch scores the same."""
    return ["--head", "t5", "--task", "classification", "--model-name-or-path", trained_classifier[0],
            "--train-dataset", quality_shards / "train", "--eval-dataset", quality_shards / "validation",
            "--per-replica-batch-size", 16, "--learning-rate", "1e-12", "--output-dir", output_dir]


def test_a_killed_run_resumes_and_still_compares_against_the_best_epoch_before_the_kill(
        trained_classifier, quality_shards, tmp_path):
    output_dir = tmp_path / "preempted"
    flags = [*unchanged_classifier_flags(trained_classifier, quality_shards, output_dir), "--num-epochs", 2,
             "--backup-steps", 10]
    with open(tmp_path / "first.log", "w") as log:  # epochs of 36 steps: killed in epoch 2, once epoch 1 was saved
        train_until_killed(flags, lambda: (output_dir / "best_model.json").exists() and backup_reached(output_dir, 40),
                           stderr=log)

    rerun = run_train(*flags)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert re.search(r"Resuming from the backup at step \d+", rerun.stderr)
    both = (tmp_path / "first.log").read_text() + rerun.stderr
    assert both.count("is the best so far") == 1, both[-3000:]  # later epochs, resumed or not, are no better
    assert "is not better than epoch 1's" in rerun.stderr
    assert json.loads((output_dir / "best_model.json").read_text())["epoch"] == 1


def test_the_hub_gets_the_best_epoch_with_its_record_and_task_settings(trained_classifier, quality_shards,
                                                                       tmp_path):
    output_dir = tmp_path / "pushed"
    with FakeHub(tmp_path / "hub") as hub:
        result = run_train(*unchanged_classifier_flags(trained_classifier, quality_shards, output_dir),
                           "--num-epochs", 2, "--hub-model-id", "tester/t5-quality",
                           env={"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": hub.endpoint, "HF_TOKEN": "hf_test"})
        assert result.returncode == 0, result.stderr[-3000:]
        pushed = hub.repos["tester/t5-quality"]
        assert {"config.json", "tf_model.h5", "model.safetensors", "README.md", "tokenizer.json",
                "best_model.json"} <= set(hub.files("tester/t5-quality"))
        record = json.loads((pushed / "best_model.json").read_text())
        assert record == json.loads((output_dir / "best_model.json").read_text()) and record["epoch"] == 1
        config = json.loads((pushed / "config.json").read_text())
        assert config["task_specific_params"]["mlm_tpu_text2text"]["task"] == "classification"
