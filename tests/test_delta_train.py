"""`python train.py --delta ...` for real: each method on the tiny T5 classifier, LoRA on the tiny RoBERTa, each
trained once (module fixtures) and looked at from every side: the base bit-identical, the adapter folder as PEFT
(AdapterHub) saves it and as PEFT 0.21 / adapters 1.3 load it in PyTorch, predict / evaluate / export --merge on
it, and a method of each place a delta lives killed and resumed bit-identical. What a method does to a model in
process (only the delta trains, step 0 is the base, Adam holds state for the delta alone) is
tests/test_delta_units.py; bad input is in tests/test_bad_inputs.py's table."""

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import run_train

pytestmark = pytest.mark.slow  # trains models (the session's fixtures, then the deltas)

METHODS = ("lora", "ia3", "prompt", "prefix", "adapter")
PEFT_TYPES = {"lora": "LORA", "ia3": "IA3", "prompt": "PROMPT_TUNING", "prefix": "PREFIX_TUNING"}
# Killed and resumed: one method of each place a delta's weights live (they resume by the same backup code): before the
# layers (prompt tuning's virtual tokens; prefix tuning's sit there too) and between them (AdapterHub's bottleneck
# adapters) here; inside them (LoRA; IA3's vectors sit there too) on the RoBERTa below
RESUMED = ("prompt", "adapter")
DELTA_MARKS = {"lora": ".lora_", "ia3": ".ia3_l", "prompt": "prompt_embeddings", "prefix": "prompt_embeddings",
               "adapter": ".adapters."}
STEPS = 8
CHECKS = Path(__file__).parent


def tree(folder: Path) -> dict:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def delta_flags(method, quality_shards, base, output_dir, *more):
    """STEPS steps of 16 examples from the trained classifier, validated once, the loss logged every step, a backup
    every 2."""
    return ["--task", "classification", "--delta", method, "--model-name-or-path", base, "--train-dataset",
            quality_shards / "train", "--eval-dataset", quality_shards / "validation", "--learning-rate", "1e-2",
            "--per-replica-batch-size", 16, "--max-steps", STEPS, "--logging-steps", 1, "--backup-steps", 2,
            "--output-dir", output_dir,
            *{"prompt": ["--num-virtual-tokens", 8], "prefix": ["--num-virtual-tokens", 8],
              "adapter": ["--adapter-reduction", 8]}.get(method, []), *more]


def mlm_lora_flags(shards, base, output_dir):
    """16 LoRA steps on the tiny RoBERTa, 2 per call into the device, a backup every 4."""
    return ["--task", "mlm", "--delta", "lora", "--model-name-or-path", base, "--train-dataset", shards / "validation",
            "--learning-rate", "1e-2", "--per-replica-batch-size", 16, "--max-steps", 16, "--steps-per-execution", 2,
            "--backup-steps", 4, "--logging-steps", 1, "--output-dir", output_dir]


@pytest.fixture(scope="module")
def delta_runs(tmp_path_factory, quality_shards, trained_classifier):
    """Each method trained once on the classifier: {method: (output folder, run)}; its files bit-identical after."""
    base = trained_classifier[0]
    before = tree(base)
    runs = {}
    for method in METHODS:
        output_dir = tmp_path_factory.mktemp(f"delta-{method}") / "adapter"
        result = run_train(*delta_flags(method, quality_shards, base, output_dir))
        assert result.returncode == 0, result.stderr[-3000:]
        runs[method] = output_dir, result
    assert tree(base) == before
    return runs


@pytest.fixture(scope="module")
def roberta_lora(tmp_path_factory, shards, trained_mlm):
    """LoRA on the tiny RoBERTa, uninterrupted; (output folder, run)."""
    output_dir = tmp_path_factory.mktemp("roberta-lora") / "adapter"
    before = tree(trained_mlm[0])
    result = run_train(*mlm_lora_flags(shards, trained_mlm[0], output_dir))
    assert result.returncode == 0, result.stderr[-3000:]
    assert tree(trained_mlm[0]) == before
    return output_dir, result


def step_losses(folder: Path) -> list:
    from mlm_tpu.training.run_logs import read_scalars

    losses = read_scalars(str(folder / "logs" / "train"))["loss"]
    return [losses[step] for step in sorted(losses)]


def adapter_weights(folder: Path) -> dict:
    from safetensors.numpy import load_file

    name = "adapter.safetensors" if (folder / "adapter.safetensors").is_file() else "adapter_model.safetensors"
    return load_file(str(folder / name))


@pytest.mark.parametrize("method", METHODS)
def test_each_method_trains_its_delta_alone_and_saves_it_as_its_library_does(method, delta_runs):
    output_dir, result = delta_runs[method]
    line = next(line for line in result.stderr.splitlines() if f"Delta-tuning with {method}:" in line)
    counts = line.split(f"Delta-tuning with {method}: ")[1].split(" parameters")[0]
    trained, total = (int(number.replace(",", "")) for number in counts.split(" of "))
    assert 0 < trained < total * 0.05, line
    assert "Epoch 1 validation: accuracy" in result.stderr
    config = json.loads((output_dir / "adapter_config.json").read_text())
    card = (output_dir / "README.md").read_text()
    if method == "adapter":
        assert config["config"]["reduction_factor"] == 8 and "library_name: adapter-transformers" in card
    else:
        assert config["peft_type"] == PEFT_TYPES[method] and config["task_type"] == "SEQ_2_SEQ_LM"
        assert "library_name: peft" in card
    weights = adapter_weights(output_dir)
    assert weights and all(DELTA_MARKS[method] in name for name in weights), sorted(weights)[:5]
    assert sum(array.size for array in weights.values()) == trained  # what trained is what is saved, nothing else
    assert f"{trained:,} trained parameters" in card and (output_dir / "tokenizer.json").is_file()
    assert not (output_dir / "tf_model.h5").exists() and not (output_dir / "model.safetensors").exists()
    assert len(step_losses(output_dir)) == STEPS  # (the loss of 8 batches on a trained classifier is noise: that
    # each method's loss falls is shown in test_delta_units.py, and on the RoBERTa below)


@pytest.mark.parametrize("method", RESUMED)
def test_each_kind_of_method_killed_and_resumed_ends_bit_identical(method, delta_runs, quality_shards,
                                                                   trained_classifier, tmp_path):
    from test_resume import resumed_at, train_and_kill_after_backup

    resumed = tmp_path / "adapter"
    flags = [flag for flag in delta_flags(method, quality_shards, trained_classifier[0], resumed)
             if flag not in ("--eval-dataset", quality_shards / "validation")]  # one epoch: the same delta saved
    train_and_kill_after_backup(flags, 2, tmp_path / "killed.log")
    result = run_train(*flags)
    assert result.returncode == 0, result.stderr[-3000:]
    assert 2 <= resumed_at(result.stderr) < STEPS
    assert_same_adapter(resumed, delta_runs[method][0])


def test_lora_on_a_roberta_trains_and_saves_peft_s_layout(roberta_lora, shards, trained_mlm):
    """The loss falls: the adapter scores lower than its base on the split it trained on, with the same masks (16
    steps' losses on their own are too noisy a measure)."""
    output_dir, result = roberta_lora
    config = json.loads((output_dir / "adapter_config.json").read_text())
    assert config["peft_type"] == "LORA" and config["target_modules"] == ["query", "value"]
    assert all(".lora_" in name and (".query." in name or ".value." in name) for name in adapter_weights(output_dir))
    assert len(step_losses(output_dir)) == 16
    base, adapted = (json.loads(command("evaluate", "--model", model, "--eval-dataset", shards / "validation",
                                        "--per-replica-batch-size", 16, "--json"))["loss"]
                     for model in (trained_mlm[0], output_dir))
    assert adapted < base, (adapted, base)


def test_a_roberta_lora_killed_and_resumed_ends_bit_identical(roberta_lora, shards, trained_mlm, tmp_path):
    from test_resume import train_and_kill_after_backup

    resumed = tmp_path / "resumed"
    train_and_kill_after_backup(mlm_lora_flags(shards, trained_mlm[0], resumed), 8, tmp_path / "killed.log")
    result = run_train(*mlm_lora_flags(shards, trained_mlm[0], resumed))
    assert result.returncode == 0 and "Resuming from the backup at step 8" in result.stderr, result.stderr[-3000:]
    assert_same_adapter(resumed, roberta_lora[0])


def assert_same_adapter(resumed: Path, uninterrupted: Path) -> None:
    """The same delta weights, bit for bit, and the same loss at every step."""
    expected, got = adapter_weights(uninterrupted), adapter_weights(resumed)
    assert expected.keys() == got.keys()
    for name, value in expected.items():
        assert np.array_equal(value, got[name]), name
    assert step_losses(resumed) == step_losses(uninterrupted)


def tensorflow_logits(folder: Path, path: Path) -> np.ndarray:
    """The adapter applied to its base in TensorFlow (mlm_tpu's loader): inputs and logits saved into `path`."""
    import tensorflow as tf
    from transformers import AutoTokenizer

    from mlm_tpu.delta.folder import load_adapter

    model, _ = load_adapter(str(folder))
    tokenizer = AutoTokenizer.from_pretrained(folder)
    encoded = tokenizer(["quality: a title\nthe body was excellent", "quality: two\nsloppy words here too"],
                        padding=True, return_tensors="np")
    inputs = {"input_ids": encoded["input_ids"].astype(np.int64),
              "attention_mask": encoded["attention_mask"].astype(np.int64)}
    if model.config.model_type == "t5":
        inputs["decoder_input_ids"] = np.array([[0, 5, 9], [0, 7, 4]], np.int64)
    logits = model(**{name: tf.constant(value) for name, value in inputs.items()}).logits.numpy()
    np.savez(path, logits=logits, **inputs)
    return logits


def interpreter(variable: str, what: str) -> str:
    python = os.environ.get(variable)
    if not python:
        pytest.skip(f"{variable} is not set: point it to a Python with {what} to check the adapter folders there "
                    "(the project itself needs no PyTorch)")
    return python


def run_check(python: str, script: str, *arguments) -> list:
    result = subprocess.run([python, str(CHECKS / script), *map(str, arguments)], capture_output=True, text=True,
                            timeout=600, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    return [json.loads(line) for line in result.stdout.strip().splitlines() if line.startswith("{")]


def wide_t5_prefix(folder: Path) -> tuple:
    """Prefix tuning on a random T5 whose d_model (16) is not heads x d_kv (2 x 16), as t5-3b's (1024 against
    32 x 128): (adapter folder, base folder), each written by mlm_tpu's own savers."""
    from types import SimpleNamespace

    import tf_keras as keras
    from transformers import T5Config, TFT5ForConditionalGeneration

    from mlm_tpu.delta import method_class
    from mlm_tpu.delta.folder import save_adapter_folder
    from mlm_tpu.model_folder.card import CardFacts
    from mlm_tpu.model_folder.saving import save_model_folder
    from mlm_tpu.tasks import make_task
    from mlm_tpu.tokenizer.load import load_tokenizer

    keras.utils.set_random_seed(0)
    tokenizer = load_tokenizer(str(CHECKS / "fixtures" / "made-by-0.2" / "t5-tokenizer"))
    model = TFT5ForConditionalGeneration(T5Config(vocab_size=len(tokenizer), d_model=16, d_kv=16, num_heads=2,
                                                  d_ff=32, num_layers=1, decoder_start_token_id=0))
    model.build_in_name_scope()
    facts = CardFacts.of_model(make_task("generation"), model, tokenizer)
    save_model_folder(str(folder / "base"), model, tokenizer, facts)
    prefix = method_class("prefix").of(SimpleNamespace(num_virtual_tokens=4))
    prefix.apply(model)
    save_adapter_folder(str(folder / "adapter"), prefix, model, tokenizer, str(folder / "base"), facts, None,
                        "adapter")
    return folder / "adapter", folder / "base"


@pytest.fixture(scope="module")
def peft_reports(delta_runs, roberta_lora, trained_classifier, trained_mlm, tmp_path_factory):
    """PEFT 0.21 on transformers 5 (PyTorch) loading every PEFT folder, in one process: {name: report}."""
    python = interpreter("MLM_TPU_PYTORCH_PYTHON", "torch, transformers 5 and peft")
    folder = tmp_path_factory.mktemp("peft-inputs")
    cases = {method: (delta_runs[method][0], trained_classifier[0], "T5ForConditionalGeneration")
             for method in PEFT_TYPES}
    cases["roberta-lora"] = roberta_lora[0], trained_mlm[0], "RobertaForMaskedLM"
    cases["wide-t5-prefix"] = *wide_t5_prefix(tmp_path_factory.mktemp("wide-t5")), "T5ForConditionalGeneration"
    arguments = []
    for name, (adapter, base, class_name) in cases.items():
        tensorflow_logits(adapter, folder / f"{name}.npz")
        arguments += [adapter, base, class_name, folder / f"{name}.npz"]
    return dict(zip(cases, run_check(python, "peft_check.py", *arguments)))


@pytest.mark.parametrize("name", [*PEFT_TYPES, "roberta-lora", "wide-t5-prefix"])
def test_peft_loads_each_adapter_with_every_key_and_the_same_logits(name, peft_reports):
    """wide-t5-prefix: prefix tuning on a T5 whose d_model is not heads x d_kv (t5-3b's, t5-11b's shape)."""
    report = peft_reports[name]
    assert "error" not in report, report["error"]
    assert report["missing"] == [] and report["unexpected"] == [], report
    assert report["max_abs_diff"] < 1e-4, report
    assert report["change_from_base"] > 1e-6, report  # the adapter was applied, not silently skipped


def test_the_card_s_adapterhub_snippet_loads_the_adapters_with_every_key_and_the_same_logits(delta_runs, tmp_path):
    """The snippet on the folder's card, run as written (adapters 1.3 reads adapter.safetensors only when asked)."""
    python = interpreter("MLM_TPU_ADAPTERS_PYTHON", "torch, transformers 4.57 and adapters")
    folder = delta_runs["adapter"][0]
    tensorflow_logits(folder, tmp_path / "inputs.npz")
    [report] = run_check(python, "adapters_check.py", folder, tmp_path / "inputs.npz")
    assert report["missing"] == [] and report["unexpected"] == [] and report["max_abs_diff"] < 1e-4, report


def command(module: str, *arguments) -> str:
    """Run an mlm-tpu command in this process, as the console script does; its stdout."""
    import contextlib
    import io

    from mlm_tpu.cli import run_command

    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        run_command(__import__(f"mlm_tpu.cli.{module}", fromlist=["main"]).main, list(map(str, arguments)))
    return stdout.getvalue()


@pytest.mark.parametrize("method", ["lora", "ia3"])
def test_export_merge_writes_a_full_model_with_the_adapter_s_outputs(method, delta_runs, tmp_path):
    import tensorflow as tf
    from transformers import TFT5ForConditionalGeneration

    from mlm_tpu.model_folder.loading import load_model

    adapter = delta_runs[method][0]
    command("export", "--model", adapter, "--merge", "--output-dir", tmp_path / "merged")
    merged = tmp_path / "merged"
    assert {"tf_model.h5", "model.safetensors", "README.md", "config.json", "tokenizer.json"} <= set(os.listdir(merged))
    expected = tensorflow_logits(adapter, tmp_path / "inputs.npz")
    stored = np.load(tmp_path / "inputs.npz")
    model = load_model(str(merged), TFT5ForConditionalGeneration)
    logits = model(**{name: tf.constant(stored[name]) for name in stored.files if name != "logits"}).logits.numpy()
    assert np.abs(logits - expected).max() < 1e-5
    assert not any("lora" in weight.name or "ia3" in weight.name for weight in model.weights)


def test_predict_and_evaluate_take_the_adapter_folder(delta_runs, quality_shards):
    adapter = delta_runs["lora"][0]
    best = json.loads((adapter / "best_model.json").read_text())
    scores = json.loads(command("evaluate", "--model", adapter, "--eval-dataset", quality_shards / "validation",
                                "--per-replica-batch-size", 16, "--json"))
    assert scores["accuracy"] == pytest.approx(best["value"])  # the trainer's validation of the same delta
    [prediction] = [json.loads(line) for line in command("predict", "text2text", "--model", adapter, "--json",
                                                          "quality: a title\nthe body was excellent").splitlines()]
    assert prediction["label"] in ("low", "good", "high")
