"""Delta-tuning an encoder's classifier for real: LoRA and IA3 on sequence and token classification, the new head
trained and saved whole beside the delta (PEFT's modules_to_save), and PEFT 0.21 loading each folder as its card says,
head included, with our logits; evaluate, predict and export --merge on the adapter folder.

Bases are tiny random encoders saved as mlm_tpu saves a pretrained one (a RoBERTa masked LM, a BERT masked LM, an
ELECTRA discriminator), the tokenizer the fixtures' (no Hub). LoRA on the RoBERTa trains for real (the trainer,
validation each epoch); IA3 on the BERT (whose pooler, new under a masked-LM base, is saved whole too) and LoRA on
the ELECTRA's token classifier are built by the trainer's own code, given trained-looking values, and saved by the
trainer's plug-in. What a method does in process (only the delta and the head train, the encoder stays
bit-identical, PEFT's key names, the backup restores the head) is tests/test_delta_units.py's.
"""

import json
import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from test_delta_train import adapter_weights, command, interpreter, run_check, tree
from test_encoder import LABELS, save_base, shard

pytestmark = pytest.mark.slow  # trains a model, and builds others

TOKENIZER = Path(__file__).parent / "fixtures" / "made-by-0.2" / "roberta"
TEXTS = ["the city was one of the first", "he had two new school years"]


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """The bases, the shards (single texts of 3 classes, tagged words) and the LoRA run on the RoBERTa, whose files
    stay bit-identical."""
    import mlm_tpu

    tmp = tmp_path_factory.mktemp("encoder-delta")
    bases = {family: save_base(tmp, family, TOKENIZER) for family in ("roberta", "bert", "electra")}
    shards = {run: shard(TOKENIZER, tmp, run) for run in ("single", "tags")}
    before = tree(bases["roberta"])
    lora = mlm_tpu.train_model(str(shards["single"] / "train"), str(tmp / "roberta-lora"),
                               task="sequence-classification", delta="lora", model_name_or_path=str(bases["roberta"]),
                               eval_dataset=str(shards["single"] / "validation"), learning_rate=1e-2,
                               per_replica_batch_size=16, num_epochs=2, seed=1)
    assert tree(bases["roberta"]) == before
    return SimpleNamespace(tmp=tmp, bases=bases, shards=shards, lora=lora)


def built_adapter(work, method: str, family: str, run: str) -> Path:
    """What `train.py --task <run's> --delta method --model-name-or-path <family base>` builds, its delta and head
    then given random values (as trained ones are), saved by the run's plug-in as the trainer saves it. On the way,
    its AdamW (1e-2, decay 1e-3) takes a step of zero gradients: the head decays as in full fine-tuning (kernels,
    not biases), LoRA's matrices too, IA3's scales not, and nothing else moves."""
    import tensorflow as tf

    from mlm_tpu.model_folder.card import CardFacts
    from mlm_tpu.shards.reading import find_shards
    from mlm_tpu.tasks import training_task
    from mlm_tpu.tasks import TrainingConfig
    from mlm_tpu.training.optimizers import with_schedule_defaults
    from mlm_tpu.training.input import Plan
    from mlm_tpu.training.step import build_model_and_optimizer

    task_name = "token-classification" if run == "tags" else "sequence-classification"
    config = with_schedule_defaults(TrainingConfig(
        train_dataset=str(work.shards[run] / "train"), output_dir="unused", task=task_name, delta=method,
        model_name_or_path=str(work.bases[family]), learning_rate=1e-2, warmup_steps=0))
    task = training_task(config)
    tokenizer = task.load_tokenizer(config)
    train = find_shards(config.train_dataset, task.shard_kinds, task.shard_kind, task.features(None, None),
                        "--train-dataset")
    task.prepare(config, tokenizer, train, None)
    model, optimizer = build_model_and_optimizer(config, task, tokenizer, train, Plan(16, 10, 1, 10))
    before = {id(variable): variable.numpy() for variable in model.weights}
    optimizer.apply_gradients((tf.zeros_like(variable), variable) for variable in model.trainable_variables)
    trained = {id(variable) for variable in model.trainable_variables}
    for variable in model.weights:
        decays = id(variable) in trained and "ia3_l" not in variable.name and (
            "kernel" in variable.name or "lora" in variable.name)
        np.testing.assert_allclose(variable.numpy(), before[id(variable)] * (1 - 1e-2 * 1e-3 if decays else 1),
                                   rtol=1e-6, err_msg=variable.name)
    rng = np.random.RandomState(5)
    for variable in task.method.delta_variables():
        variable.assign(variable.numpy() + rng.normal(0, 0.3, variable.shape).astype(np.float32))
    folder = work.tmp / f"{family}-{method}-{run}"
    task.save_model(str(folder), model, tokenizer, CardFacts.of_model(task, model, tokenizer), {}, folder.name)
    return folder


def tensorflow_logits(folder: Path, path: Path) -> np.ndarray:
    """The adapter on its base in TensorFlow (mlm_tpu's loader) on TEXTS: inputs and logits saved into `path`."""
    from transformers import AutoTokenizer

    from mlm_tpu.delta.folder import load_adapter
    from mlm_tpu.encoder.models import model_inputs

    model, _ = load_adapter(str(folder))
    tokenizer = AutoTokenizer.from_pretrained(folder)
    encoded = tokenizer(TEXTS, padding=True, return_tensors="np")
    inputs = {name: encoded[name].astype(np.int64) for name in model_inputs(model.config, tokenizer)}
    logits = model(**inputs).logits.numpy()
    np.savez(path, logits=logits, **inputs)
    return logits


def test_lora_trains_the_delta_and_the_new_head_and_saves_them_as_peft_does(work):
    folder = Path(work.lora.output_dir)
    config = json.loads((folder / "adapter_config.json").read_text())
    assert config["peft_type"] == "LORA" and config["task_type"] == "SEQ_CLS"
    assert config["target_modules"] == ["query", "value"] and config["modules_to_save"] == ["classifier", "score"]
    weights = adapter_weights(folder)
    head = {name.removeprefix("base_model.model."): array.shape for name, array in weights.items()
            if ".lora_" not in name}
    assert head == {"classifier.dense.weight": (64, 64), "classifier.dense.bias": (64,),
                    "classifier.out_proj.weight": (3, 64), "classifier.out_proj.bias": (3,)}
    assert all(name.startswith("base_model.model.") for name in weights)
    card = (folder / "README.md").read_text()
    trained = int(card.split("**Method**: LoRA: ")[1].split(" trained")[0].replace(",", ""))
    assert sum(array.size for array in weights.values()) == trained  # what trained is what is saved
    assert "AutoModelForSequenceClassification.from_pretrained(" in card and "num_labels=3" in card
    assert "id2label={0: 'good', 1: 'high', 2: 'low'}" in card
    losses = [epoch["loss"] for epoch in work.lora.epochs]
    assert losses[-1] < losses[0], losses


def test_evaluate_predict_and_export_merge_take_the_adapter_folder(work):
    """evaluate scores as the run's validation did; predict labels the texts; --merge writes a full classifier whose
    TensorFlow logits are the adapter's (its PyTorch ones: test_peft_... below)."""
    import mlm_tpu
    from transformers import TFAutoModelForSequenceClassification

    folder = work.lora.output_dir
    evaluated = mlm_tpu.evaluate_model(folder, str(work.shards["single"] / "validation"), per_replica_batch_size=7)
    assert evaluated.task == "sequence-classification" and evaluated.scores == pytest.approx(
        work.lora.best["validation"], abs=1e-5)
    predicted = mlm_tpu.predict_text_classification(folder, TEXTS, base_model=str(work.bases["roberta"]))
    assert [set(result["scores"]) for result in predicted] == [set(LABELS)] * 2
    [json_line, _] = command("predict", "text-classification", "--model", folder, "--json", *TEXTS).splitlines()
    assert json.loads(json_line)["label"] == predicted[0]["label"]

    config = merged_with_the_adapters_logits(work, folder, TFAutoModelForSequenceClassification)
    assert config["architectures"] == ["RobertaForSequenceClassification"] and list(config["id2label"].values()) == \
        sorted(LABELS)


def merged_with_the_adapters_logits(work, folder: str, model_class) -> dict:
    """`export --merge` the adapter folder into work.tmp/merged, a full model (loaded as `model_class`) whose
    TensorFlow logits are the adapter's (1e-5); its config.json."""
    import tensorflow as tf

    from mlm_tpu.model_folder.loading import load_model

    merged = work.tmp / "merged"
    command("export", "--model", folder, "--merge", "--output-dir", merged)
    expected = tensorflow_logits(Path(folder), work.tmp / "adapter-inputs.npz")
    stored = np.load(work.tmp / "adapter-inputs.npz")
    model = load_model(str(merged), model_class)
    logits = model(**{name: tf.constant(stored[name]) for name in stored.files if name != "logits"}).logits.numpy()
    assert np.abs(logits - expected).max() < 1e-5
    return json.loads((merged / "config.json").read_text())


def test_peft_loads_each_classifier_head_included_as_its_card_says_with_our_logits(work):
    """The card's snippet, run as written (the base built with the head's labels), loads every key of the adapter and
    its head (`set_peft_model_state_dict`: none unexpected, none missing) and gives TensorFlow's logits; the merged
    folder loads as AutoModelForSequenceClassification with the same logits."""
    python = interpreter("MLM_TPU_PYTORCH_PYTHON", "torch, transformers 5 and peft")
    cases = {"roberta-lora-single": Path(work.lora.output_dir),
             "bert-ia3-single": built_adapter(work, "ia3", "bert", "single"),
             "electra-lora-tags": built_adapter(work, "lora", "electra", "tags")}
    assert json.loads((cases["bert-ia3-single"] / "adapter_config.json").read_text())["modules_to_save"] == [
        "bert.pooler.dense", "classifier", "score"]  # new under a masked-LM base: trained, saved whole
    tags = json.loads((cases["electra-lora-tags"] / "adapter_config.json").read_text())
    assert tags["task_type"] == "TOKEN_CLS" and "num_labels=4" in (cases["electra-lora-tags"] / "README.md").read_text()
    arguments = []
    for name, folder in cases.items():
        tensorflow_logits(folder, work.tmp / f"{name}.npz")
        arguments += [folder, "card", "-", work.tmp / f"{name}.npz"]
    if not (work.tmp / "merged").is_dir():
        command("export", "--model", work.lora.output_dir, "--merge", "--output-dir", work.tmp / "merged")
    tensorflow_logits(Path(work.lora.output_dir), work.tmp / "merged.npz")
    arguments += [work.tmp / "merged", "-", "AutoModelForSequenceClassification", work.tmp / "merged.npz"]
    reports = run_check(python, "peft_check.py", *arguments)
    assert_peft_gives_our_logits(reports, [*cases, "merged"])
    assert reports[-1]["id2label"] == {"0": "good", "1": "high", "2": "low"}
    assert os.path.isfile(work.tmp / "merged" / "model.safetensors")


def assert_peft_gives_our_logits(reports: list, names: list) -> None:
    """tests/peft_check.py's report of each case (`merged`: a whole folder, no adapter): loaded with every key used,
    TensorFlow's logits within 1e-4, and an adapter's (with its head) changing the base's."""
    assert len(reports) == len(names), reports
    for name, report in zip(names, reports):
        assert "error" not in report, (name, report["error"])
        assert report["missing"] == [] and report["unexpected"] == [], (name, report)
        assert report["max_abs_diff"] < 1e-4, (name, report)
        if name != "merged":
            assert report["change_from_base"] > 1e-6, (name, report)  # the adapter and head applied
