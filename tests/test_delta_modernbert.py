"""Delta-tuning a ModernBERT (issue 50): LoRA on its attention's and feed-forward's projections (`attn.Wqkv`,
`attn.Wo`, `mlp.Wi`, `mlp.Wo`: the family's names, asked of the registry; PEFT has no default for ModernBERT), saved as
PEFT saves it on ModernBertForSequenceClassification, ...ForTokenClassification and ...ForMaskedLM (target_modules
and keys in PyTorch's names, the classifier saved whole as modules_to_save), so that PEFT 0.21 on transformers 5
loads each folder, as its card says, with mlm_tpu's logits; evaluate and export --merge take it; a method that cannot
apply to a ModernBERT is one error line naming the one that can.

The base is a tiny random ModernBERT masked LM saved as mlm_tpu saves one (3 layers: a global one, then two local ones
whose 8-token window the 32-token rows exceed), with the fixtures' tokenizer (no Hub, no tokenizer training).
"""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import assert_user_error, pytorch_python
from test_delta_encoder import (TEXTS, TOKENIZER, assert_peft_gives_our_logits, built_adapter,
                                merged_with_the_adapters_logits, tensorflow_logits)
from test_delta_train import adapter_weights, command, run_check, tree
from test_encoder import LABELS, MAX_LENGTH, shard

PROJECTIONS = ("attn.Wqkv", "attn.Wo", "mlp.Wi", "mlp.Wo")
LAYERS = 3
SENTENCES = ["the river runs past the old mill and the town", "a long bridge of stone crosses the water there",
             "the school opened its doors in the first year", "he walked to the city with his two brothers"]


def modernbert_base(folder: Path) -> Path:
    """A tiny random ModernBERT masked LM with the fixtures' tokenizer, saved as mlm_tpu saves one."""
    from mlm_tpu.model_folder import families
    from mlm_tpu.modernbert import presets, weights
    from mlm_tpu.modernbert.model import build
    from mlm_tpu.tokenizer.load import load_tokenizer

    tokenizer = load_tokenizer(str(TOKENIZER), "--tokenizer")
    config = presets.preset("modernbert-tiny", hidden_size=32, intermediate_size=48, num_hidden_layers=LAYERS,
                            local_attention=8)
    weights.save_pretrained(build(families.MODERNBERT.fitted_config(config, tokenizer, MAX_LENGTH)), str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder


def masked_lm_shards(folder: Path) -> Path:
    import mlm_tpu

    for split, count in (("train", 64), ("validation", 16)):
        text = folder.parent / f"corpus-{split}.txt"
        text.write_text("\n".join(SENTENCES[index % 4] for index in range(count)) + "\n")
        mlm_tpu.shard_corpus(str(TOKENIZER), str(folder), text_files=(str(text),), split=split, max_length=MAX_LENGTH)
    return folder


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """The base and the shards (single texts of 3 classes, tagged words, masked-LM rows): no training."""
    tmp = tmp_path_factory.mktemp("modernbert-delta")
    return SimpleNamespace(tmp=tmp, bases={"modernbert": modernbert_base(tmp / "base")},
                           shards={**{run: shard(TOKENIZER, tmp, run) for run in ("single", "tags")},
                                   "mlm": masked_lm_shards(tmp / "mlm")})


@pytest.fixture(scope="module")
def work(made):
    """LoRA trained for real on the sequence classifier (2 epochs) and on the masked LM (3 steps); the base's files
    stay bit-identical."""
    import mlm_tpu

    base = made.bases["modernbert"]
    before = tree(base)
    common = dict(delta="lora", model_name_or_path=str(base), learning_rate=1e-2, seed=1)
    lora = mlm_tpu.train_model(str(made.shards["single"] / "train"), str(made.tmp / "sequence-lora"),
                               task="sequence-classification", eval_dataset=str(made.shards["single"] / "validation"),
                               per_replica_batch_size=16, num_epochs=2, **common)
    masked = mlm_tpu.train_model(str(made.shards["mlm"] / "train"), str(made.tmp / "mlm-lora"), task="mlm",
                                 per_replica_batch_size=8, max_steps=3, **common)
    assert tree(base) == before
    return SimpleNamespace(**vars(made), lora=lora, masked=masked)


def expected_keys(*head: str) -> set:
    return {f"base_model.model.model.layers.{layer}.{module}.lora_{part}.weight" for layer in range(LAYERS)
            for module in PROJECTIONS for part in "AB"} | {f"base_model.model.{name}" for name in head}


@pytest.mark.slow
def test_lora_trains_modernberts_projections_and_the_new_head_and_saves_them_as_peft_does(work):
    folder = Path(work.lora.output_dir)
    config = json.loads((folder / "adapter_config.json").read_text())
    assert (config["peft_type"], config["task_type"]) == ("LORA", "SEQ_CLS")
    assert config["target_modules"] == ["Wi", "Wo", "Wqkv"] and config["modules_to_save"] == ["classifier", "score"]
    assert config["base_model_name_or_path"] == str(work.bases["modernbert"].resolve())
    weights = adapter_weights(folder)
    assert set(weights) == expected_keys("classifier.weight", "classifier.bias")
    assert weights["base_model.model.model.layers.1.attn.Wqkv.lora_B.weight"].shape == (96, 8)  # [out, r]
    assert weights["base_model.model.model.layers.1.mlp.Wo.lora_A.weight"].shape == (8, 48)  # [r, in]
    assert weights["base_model.model.classifier.weight"].shape == (3, 32)
    assert not (folder / "modeling_mean_pooling.py").exists()  # ModernBERT's own class reads classifier_pooling
    assert "classifier_pooling='mean'" in (folder / "README.md").read_text()
    losses = [epoch["loss"] for epoch in work.lora.epochs]
    assert losses[-1] < losses[0], losses
    masked = json.loads((Path(work.masked.output_dir) / "adapter_config.json").read_text())
    assert (masked["task_type"], masked["modules_to_save"]) == (None, None)
    assert set(adapter_weights(Path(work.masked.output_dir))) == expected_keys()


@pytest.mark.slow
def test_evaluate_predict_and_export_merge_take_a_modernbert_adapter(work):
    """evaluate scores as the run's validation did; predict labels texts; --merge writes a full
    ModernBertForSequenceClassification folder (no tf_model.h5: transformers 4 has no ModernBERT) whose logits are the
    adapter's."""
    import mlm_tpu

    from mlm_tpu.modernbert.model import ModernBertForSequenceClassification

    folder = work.lora.output_dir
    evaluated = mlm_tpu.evaluate_model(folder, str(work.shards["single"] / "validation"), per_replica_batch_size=7)
    assert evaluated.task == "sequence-classification" and evaluated.scores == pytest.approx(
        work.lora.best["validation"], abs=1e-5)
    predicted = mlm_tpu.predict_text_classification(folder, TEXTS)
    assert [set(result["scores"]) for result in predicted] == [set(LABELS)] * 2
    config = merged_with_the_adapters_logits(work, folder, ModernBertForSequenceClassification)
    assert config["architectures"] == ["ModernBertForSequenceClassification"] and config["classifier_pooling"] == "mean"
    assert "tf_model.h5" not in {path.name for path in (work.tmp / "merged").iterdir()}


@pytest.mark.slow
def test_peft_loads_each_modernbert_adapter_on_transformers_5s_classes_with_our_logits(work):
    """The card's snippet, run as written, loads the sequence and token classifiers' adapters (heads included: none of
    their keys unexpected, none missing); PeftModel.from_pretrained(ModernBertForMaskedLM.from_pretrained(base), ...)
    the masked LM's; each gives TensorFlow's logits within 1e-4, and the adapter changes them. The merged folder loads
    as ModernBertForSequenceClassification with the adapter's logits."""
    python = pytorch_python()
    cases = {"sequence": (Path(work.lora.output_dir), "card", "-"),
             "tags": (built_adapter(work, "lora", "modernbert", "tags"), "card", "-"),
             "masked": (Path(work.masked.output_dir), work.bases["modernbert"], "ModernBertForMaskedLM")}
    tags = json.loads((cases["tags"][0] / "adapter_config.json").read_text())
    assert tags["task_type"] == "TOKEN_CLS" and tags["modules_to_save"] == ["classifier", "score"]
    arguments = []
    for name, (folder, base, class_name) in cases.items():
        tensorflow_logits(folder, work.tmp / f"{name}.npz")
        arguments += [folder, base, class_name, work.tmp / f"{name}.npz"]
    merged = work.tmp / "merged"
    if not merged.is_dir():
        command("export", "--model", work.lora.output_dir, "--merge", "--output-dir", merged)
    tensorflow_logits(Path(work.lora.output_dir), work.tmp / "merged.npz")
    arguments += [merged, "-", "ModernBertForSequenceClassification", work.tmp / "merged.npz"]
    reports = run_check(python, "peft_check.py", *arguments)
    print(json.dumps(dict(zip([*cases, "merged"], reports))))  # the figures, with -s
    assert_peft_gives_our_logits(reports, [*cases, "merged"])


@pytest.mark.parametrize("method, task, more, words", [
    ("ia3", "sequence-classification", (), "--delta ia3 does not support modernbert models"),
    ("prompt", "mlm", (), "--delta prompt does not support modernbert models"),
    ("prefix", "mlm", (), "--delta prefix does not support modernbert models"),
    ("adapter", "mlm", (), "--delta adapter does not support modernbert models"),
    ("lora", "sequence-classification", ("--lora-targets", "query"),
     "query matches no layer of this modernbert model; its Dense layers are named Wi, Wo, Wqkv")])
def test_what_cannot_apply_to_a_modernbert_is_one_error_line(method, task, more, words, made, in_process):
    """Each method but LoRA (which names the modules it could wrap) is refused in one line that names it and the one
    that works; nothing is written."""
    run = "single" if task == "sequence-classification" else "mlm"
    output_dir = made.tmp / f"refused-{method}"
    result = in_process("train", "--task", task, "--delta", method, "--model-name-or-path", made.bases["modernbert"],
                        "--train-dataset", made.shards[run] / "train", "--max-steps", 1, "--output-dir", output_dir,
                        *more)
    assert_user_error(result, words, *(["--delta lora does"] if method != "lora" else []))
    assert not output_dir.exists()


@pytest.mark.slow
def test_fill_mask_takes_a_modernbert_masked_lm_adapter_as_it_takes_its_merged_folder(work, in_process):
    """The adapter's tokenizer gives token_type_ids, which ModernBERT takes none of: fill-mask predicts through the
    adapter (once a traceback from transformers' pipeline) what the folder --merge writes predicts."""
    adapter, merged = work.masked.output_dir, work.tmp / "merged-mlm"
    assert in_process("export", "--model", adapter, "--merge", "--output-dir", merged).returncode == 0
    sentence = "the river runs past the old [MASK] and the town"
    through_adapter, through_merged = (in_process("predict", "--model", model, "--json", "--top-k", 3, sentence)
                                       for model in (adapter, merged))
    assert through_adapter.returncode == 0, through_adapter.stderr[-3000:]
    found, expected = (json.loads(result.stdout.splitlines()[-1]) for result in (through_adapter, through_merged))
    assert [[c["token"] for c in mask] for mask in found["predictions"]] == [
        [c["token"] for c in mask] for mask in expected["predictions"]]
    assert [c["score"] for c in found["predictions"][0]] == pytest.approx(
        [c["score"] for c in expected["predictions"][0]], abs=1e-5)
