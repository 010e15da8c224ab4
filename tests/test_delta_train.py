"""`python train.py --delta ...` for real: each method on the tiny T5 classifier, LoRA on the tiny RoBERTa; the
adapter folder as PEFT (AdapterHub) saves it and as PEFT 0.21 / adapters 1.3 load it in PyTorch, killed runs that
resume bit-identical, and bad input."""

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import MAX_LENGTH, REPO_ROOT, assert_user_error, run_train

pytestmark = pytest.mark.slow  # trains models (the session's fixtures, then the deltas)

METHODS = ("lora", "ia3", "prompt", "prefix", "adapter")
CHECKS = Path(__file__).parent


def delta_flags(method, quality_shards, base, output_dir, *more):
    """12 steps of 16 examples from the trained classifier, validated once, the loss logged every step."""
    return ["--task", "classification", "--delta", method, "--model-name-or-path", base, "--train-dataset",
            quality_shards / "train", "--eval-dataset", quality_shards / "validation", "--learning-rate", "1e-2",
            "--per-replica-batch-size", 16, "--max-steps", 12, "--logging-steps", 1, "--num-virtual-tokens", 8,
            "--adapter-reduction", 8, "--output-dir", output_dir, *more]


def mlm_delta_flags(shards, base, output_dir, *more):
    return ["--task", "mlm", "--delta", "lora", "--model-name-or-path", base, "--train-dataset", shards / "validation",
            "--eval-dataset", shards / "validation", "--learning-rate", "1e-2", "--per-replica-batch-size", 16,
            "--num-epochs", 2, "--steps-per-execution", 2, "--backup-steps", 4, "--logging-steps", 1,
            "--output-dir", output_dir, *more]


@pytest.fixture(scope="module")
def delta_runs(tmp_path_factory, quality_shards, trained_classifier):
    """Each method trained once: {method: (output folder, run)}; the base's files hashed before and after."""
    base = trained_classifier[0]
    before = (base / "tf_model.h5").read_bytes()
    runs = {}
    for method in METHODS:
        output_dir = tmp_path_factory.mktemp(f"delta-{method}") / "adapter"
        result = run_train(*delta_flags(method, quality_shards, base, output_dir))
        assert result.returncode == 0, result.stderr[-3000:]
        runs[method] = output_dir, result
    assert (base / "tf_model.h5").read_bytes() == before
    return runs


def step_losses(folder: Path) -> dict:
    from mlm_tpu.training.run_logs import read_scalars

    return read_scalars(str(folder / "logs" / "train"))["loss"]


@pytest.mark.parametrize("method", METHODS)
def test_each_method_saves_the_adapter_as_its_library_does(method, delta_runs):
    output_dir, result = delta_runs[method]
    assert f"Delta-tuning with {method}:" in result.stderr and "Epoch 1 validation: accuracy" in result.stderr
    config = json.loads((output_dir / "adapter_config.json").read_text())
    card = (output_dir / "README.md").read_text()
    if method == "adapter":
        assert config["config"]["reduction_factor"] == 8 and (output_dir / "adapter.safetensors").is_file()
        assert "library_name: adapter-transformers" in card
    else:
        assert config["task_type"] == "SEQ_2_SEQ_LM" and (output_dir / "adapter_model.safetensors").is_file()
        assert config["peft_type"] == {"lora": "LORA", "ia3": "IA3", "prompt": "PROMPT_TUNING",
                                       "prefix": "PREFIX_TUNING"}[method]
        assert "library_name: peft" in card
    assert "trained parameters" in card and (output_dir / "tokenizer.json").is_file()
    assert not (output_dir / "tf_model.h5").exists()  # the adapter only
    losses = step_losses(output_dir)
    assert len(losses) == 12


def tensorflow_logits(folder: Path, path: Path, base=None) -> None:
    """The adapter applied to its base in TensorFlow (mlm_tpu's loader): inputs and logits into `path`."""
    import tensorflow as tf
    from transformers import AutoTokenizer

    from mlm_tpu.delta.folder import load_adapter

    model, _ = load_adapter(str(folder), base)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    encoded = tokenizer(["quality: a title\nthe body was excellent", "quality: two\nsloppy words here too"],
                        padding=True, return_tensors="np")
    inputs = {"input_ids": encoded["input_ids"].astype(np.int64),
              "attention_mask": encoded["attention_mask"].astype(np.int64)}
    if model.config.model_type == "t5":
        inputs["decoder_input_ids"] = np.array([[0, 5, 9], [0, 7, 4]], np.int64)
    logits = model(**{name: tf.constant(value) for name, value in inputs.items()}).logits.numpy()
    np.savez(path, logits=logits, **inputs)


def interpreter(variable: str, what: str) -> str:
    python = os.environ.get(variable)
    if not python:
        pytest.skip(f"{variable} is not set: point it to a Python with {what} to check the adapter folders there "
                    "(the project itself needs no PyTorch)")
    return python


def run_check(python: str, script: str, *arguments) -> dict:
    result = subprocess.run([python, str(CHECKS / script), *map(str, arguments)], capture_output=True, text=True,
                            timeout=600, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("method", METHODS)
def test_pytorch_libraries_load_each_adapter_with_every_key_and_the_same_logits(method, delta_runs, trained_classifier,
                                                                               tmp_path):
    if method == "adapter":
        python, script = interpreter("MLM_TPU_ADAPTERS_PYTHON", "torch, transformers 4.57 and adapters"), \
            "adapters_check.py"
    else:
        python, script = interpreter("MLM_TPU_PYTORCH_PYTHON", "torch, transformers 5 and peft"), "peft_check.py"
    folder = delta_runs[method][0]
    tensorflow_logits(folder, tmp_path / "inputs.npz")
    report = run_check(python, script, folder, trained_classifier[0], "T5ForConditionalGeneration",
                       tmp_path / "inputs.npz")
    assert report["missing"] == [] and report["unexpected"] == [], report
    assert report["max_abs_diff"] < 1e-4, report
    if method in ("prompt", "prefix"):
        assert report["change_from_base"] > 1e-3, report  # PEFT applied the prompt, not silently skipped it


def test_lora_on_a_roberta_loads_in_peft_with_the_same_logits(trained_mlm, shards, tmp_path):
    output_dir = tmp_path / "adapter"
    result = run_train(*mlm_delta_flags(shards, trained_mlm[0], output_dir, "--max-steps", 8))
    assert result.returncode == 0, result.stderr[-3000:]
    config = json.loads((output_dir / "adapter_config.json").read_text())
    assert config["peft_type"] == "LORA" and config["target_modules"] == ["query", "value"]
    python = interpreter("MLM_TPU_PYTORCH_PYTHON", "torch, transformers 5 and peft")
    tensorflow_logits(output_dir, tmp_path / "inputs.npz")
    report = run_check(python, "peft_check.py", output_dir, trained_mlm[0], "RobertaForMaskedLM",
                       tmp_path / "inputs.npz")
    assert report["missing"] == [] and report["unexpected"] == [] and report["max_abs_diff"] < 1e-4, report


def adapter_weights(folder: Path) -> dict:
    from safetensors.numpy import load_file

    name = "adapter.safetensors" if (folder / "adapter.safetensors").is_file() else "adapter_model.safetensors"
    return load_file(str(folder / name))


def assert_same_adapter(resumed: Path, uninterrupted: Path) -> None:
    expected, got = adapter_weights(uninterrupted), adapter_weights(resumed)
    assert expected.keys() == got.keys()
    for name, value in expected.items():
        assert np.array_equal(value, got[name]), name  # bit for bit
    assert step_losses(resumed) == step_losses(uninterrupted)


@pytest.mark.parametrize("method", ["lora", "prefix"])
def test_a_t5_delta_killed_and_resumed_ends_bit_identical(method, quality_shards, trained_classifier, tmp_path):
    from test_resume import train_and_kill_after_backup

    def flags(output_dir):
        return delta_flags(method, quality_shards, trained_classifier[0], output_dir, "--steps-per-execution", 2,
                           "--backup-steps", 4)

    uninterrupted = tmp_path / "uninterrupted"
    assert run_train(*flags(uninterrupted)).returncode == 0
    resumed = tmp_path / "resumed"
    train_and_kill_after_backup(flags(resumed), 4, tmp_path / "killed.log")
    result = run_train(*flags(resumed))
    assert result.returncode == 0 and "Resuming from the backup at step" in result.stderr, result.stderr[-3000:]
    assert_same_adapter(resumed, uninterrupted)


def test_a_roberta_lora_killed_and_resumed_ends_bit_identical(trained_mlm, shards, tmp_path):
    from test_resume import train_and_kill_after_backup

    uninterrupted = tmp_path / "uninterrupted"
    flags = mlm_delta_flags(shards, trained_mlm[0], uninterrupted, "--max-steps", 16)
    assert run_train(*flags).returncode == 0
    resumed = tmp_path / "resumed"
    train_and_kill_after_backup(mlm_delta_flags(shards, trained_mlm[0], resumed, "--max-steps", 16), 8,
                                tmp_path / "killed.log")
    result = run_train(*mlm_delta_flags(shards, trained_mlm[0], resumed, "--max-steps", 16))
    assert result.returncode == 0 and "Resuming from the backup at step" in result.stderr, result.stderr[-3000:]
    assert_same_adapter(resumed, uninterrupted)
    losses = step_losses(uninterrupted)
    assert np.mean([losses[s] for s in sorted(losses)[-4:]]) < np.mean([losses[s] for s in sorted(losses)[:4]])


def test_bad_delta_input_is_one_line(quality_shards, trained_classifier, trained_mlm, shards, tmp_path):
    base = trained_classifier[0]
    assert_user_error(run_train(*delta_flags("lora", quality_shards, base, tmp_path / "a", "--lora-rank", 0)),
                      "--lora-rank must be at least 1, not 0")
    assert_user_error(run_train(*delta_flags("lora", quality_shards, base, tmp_path / "b", "--lora-targets", "query")),
                      "--lora-targets query", "matches no layer of this t5 model")
    assert_user_error(run_train(*delta_flags("prompt", quality_shards, base, tmp_path / "c",
                                             "--num-virtual-tokens", 500)),
                      "48 tokens + 500 virtual tokens are longer than", "lower --num-virtual-tokens")
    assert_user_error(run_train(*mlm_delta_flags(shards, trained_mlm[0], tmp_path / "d", "--delta", "prefix")),
                      "--delta prefix does not support roberta models")
    for folder in "abcd":
        assert not (tmp_path / folder / "adapter_config.json").exists()
