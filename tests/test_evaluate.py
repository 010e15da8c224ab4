"""`python -m mlm_tpu.evaluate` for real: repeatable, checked against a hand computation, under 1 and 2 replicas."""

import json
import math

import numpy as np
import pytest

from conftest import MAX_LENGTH, assert_user_error, run_module

pytestmark = pytest.mark.slow  # trains models


def evaluate(*args):
    return run_module("mlm_tpu.evaluate", *map(str, args))


@pytest.fixture(scope="module")
def scores(trained_mlm, shards):
    """Two identical runs and one over two CPU replicas, per-replica batch 8 each."""
    runs = [evaluate("--model", trained_mlm[0], "--eval-dataset", shards / "validation", "--per-replica-batch-size",
                     8, "--json", *extra) for extra in ([], [], ["--cpu-replicas", 2])]
    for run in runs:
        assert run.returncode == 0, run.stderr[-3000:]
    return [json.loads(run.stdout) for run in runs]


def test_two_runs_agree_exactly(scores):
    assert scores[0] == scores[1]


def test_figures_match_a_hand_computation(scores, trained_mlm, shards):
    import mlm_tpu  # noqa: F401  (Keras 2 behind tf.keras, before TensorFlow loads)
    from transformers import AutoTokenizer, TFAutoModelForMaskedLM

    from mlm_tpu.mlm.masking import MlmMasker
    from mlm_tpu.mlm.shard_kind import MASKED_LM
    from mlm_tpu.shards.pipeline import evaluation_batches
    from mlm_tpu.shards.reading import find_shards
    from mlm_tpu.tasks import shard_kinds

    model = TFAutoModelForMaskedLM.from_pretrained(trained_mlm[0], use_safetensors=False)  # transformers#40028
    tokenizer = AutoTokenizer.from_pretrained(trained_mlm[0])
    shard_set = find_shards(str(shards / "validation"), shard_kinds(), MASKED_LM.name, MASKED_LM.features(MAX_LENGTH))
    steps = math.ceil(shard_set.records / 8)
    batches = evaluation_batches(shard_set, 8, MlmMasker(tokenizer, 0.15, seed=42)).take(steps)
    loss_sum = masked = correct = 0.0
    rows = 0
    for batch in batches:
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits.numpy()
        labels = batch["labels"].numpy()
        rows += int(batch["attention_mask"].numpy().any(axis=1).sum())
        for row, position in zip(*np.nonzero(labels != -100)):
            scores_here = logits[row, position].astype(np.float64)
            log_probs = scores_here - scores_here.max() - np.log(np.exp(scores_here - scores_here.max()).sum())
            loss_sum -= log_probs[labels[row, position]]
            correct += scores_here.argmax() == labels[row, position]
            masked += 1
    assert rows == shard_set.records == scores[0]["examples"]  # every example counted once, padding rows none
    assert scores[0]["masked_tokens"] == masked > 0
    assert scores[0]["loss"] == pytest.approx(loss_sum / masked, rel=1e-5)
    assert scores[0]["perplexity"] == pytest.approx(math.exp(loss_sum / masked), rel=1e-4)
    assert scores[0]["masked_accuracy"] == pytest.approx(correct / masked, abs=1.5 / masked)


def test_two_cpu_replicas_see_the_same_masks(scores):
    one, two = scores[0], scores[2]
    assert two["masked_tokens"] == one["masked_tokens"] and two["examples"] == one["examples"]
    assert two["loss"] == pytest.approx(one["loss"], rel=1e-5)


def test_the_table_form_whole_word_masks_and_bad_input(scores, trained_mlm, shards, tmp_path, in_process):
    from transformers import AutoTokenizer

    from mlm_tpu.mlm.masking import Masking
    from mlm_tpu.mlm.shard_kind import MASKED_LM
    from mlm_tpu.shards.pipeline import evaluation_batches
    from mlm_tpu.shards.reading import find_shards
    from mlm_tpu.tasks import shard_kinds

    table = evaluate("--model", trained_mlm[0], "--eval-dataset", shards / "validation", "--masking", "whole-word")
    assert table.returncode == 0, table.stderr[-3000:]
    figures = dict(line.rsplit(None, 1) for line in table.stdout.splitlines())
    assert {"examples", "masked tokens", "loss", "perplexity", "masked accuracy"} <= set(figures)
    tokenizer = AutoTokenizer.from_pretrained(trained_mlm[0])  # the masks of --masking whole-word, made here
    shard_set = find_shards(str(shards / "validation"), shard_kinds(), MASKED_LM.name, MASKED_LM.features(MAX_LENGTH))
    masker = Masking("whole-word").masker(tokenizer, seed=42)
    masked = sum(int(np.sum(batch["labels"].numpy() != -100)) for batch in
                 evaluation_batches(shard_set, 8, masker).take(math.ceil(shard_set.records / 8)))
    assert int(figures["masked tokens"].replace(",", "")) == masked != scores[0]["masked_tokens"]
    assert_user_error(in_process("evaluate", "--model", tmp_path, "--eval-dataset", shards / "validation"),
                      "no config.json")
    assert_user_error(in_process("evaluate", "--model", trained_mlm[0], "--eval-dataset", tmp_path), "no shards")
    assert_user_error(in_process("evaluate", "--model", trained_mlm[0], "--eval-dataset", shards / "validation",
                                 "--max-length", 32), "64-token examples")


def test_t5_models_are_scored_on_the_task_they_were_trained_for(trained_classifier, quality_shards, trained_copier,
                                                                copy_shards, shards, in_process):
    classifier = evaluate("--model", trained_classifier[0], "--eval-dataset", quality_shards / "validation",
                          "--per-replica-batch-size", 16, "--json")
    assert classifier.returncode == 0, classifier.stderr[-3000:]
    scores = json.loads(classifier.stdout)
    best = json.loads((trained_classifier[0] / "best_model.json").read_text())
    assert scores["task"] == "classification" and scores["accuracy"] == pytest.approx(best["value"], abs=1e-6)
    assert {"macro_f1", "low_precision", "good_recall", "high_f1"} <= set(scores)

    copier = evaluate("--model", trained_copier[0], "--eval-dataset", copy_shards / "validation")
    assert copier.returncode == 0, copier.stderr[-3000:]
    table = dict(line.split() for line in copier.stdout.splitlines())
    assert set(table) == {"exact_match", "f1", "rouge1", "rouge2", "rougeL"} and float(table["exact_match"]) > 0.5

    assert_user_error(in_process("evaluate", "--model", trained_classifier[0], "--eval-dataset", shards / "validation"),
                      "masked-LM examples")
    assert_user_error(in_process("evaluate", "--model", trained_classifier[0], "--eval-dataset",
                                 quality_shards / "validation", "--mlm-probability", 0.2),
                      "--mlm-probability is for masked LMs")
