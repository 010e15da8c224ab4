"""--classifier-pooling mean: a sequence classifier's head reads the mean of the last hidden states over the real
tokens, in every encoder family's own head; predict, evaluate and delta-tuning follow the saved config; the folder
loads in transformers 5 (trust_remote_code: its class comes with it) with our logits, and its encoder in
sentence-transformers with our mean (its bad input: tests/test_bad_inputs.py).

The PyTorch checks run in a Python with torch, transformers 5, sentence-transformers and PEFT
(MLM_TPU_PYTORCH_PYTHON), and are skipped, saying so, without one.
"""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from test_delta_train import command, interpreter, run_check
from test_encoder import MAX_LENGTH, save_base, shard

TOKENIZER = Path(__file__).parent / "fixtures" / "made-by-0.2" / "roberta"
TEXTS = ["the city was one of the first", "he had two new school years"]
LABELS = ("low", "good", "high")
FAMILIES = ("roberta", "bert", "distilbert", "electra", "albert")


def family_config(family: str, tokenizer, pooling: str):
    """A tiny random sequence classifier's config of `family`, with weights large enough that logits differ by more
    than the checks' tolerance wherever the pooling does."""
    import transformers

    from mlm_tpu.mlm.presets import config_for

    shape = dict(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=64, max_position_embeddings=64, pad_token_id=tokenizer.pad_token_id)
    config = {"roberta": lambda: config_for("tiny", tokenizer, MAX_LENGTH),
              "bert": lambda: transformers.BertConfig(**shape),
              "distilbert": lambda: transformers.DistilBertConfig(
                  vocab_size=len(tokenizer), dim=32, n_layers=2, n_heads=2, hidden_dim=64,
                  max_position_embeddings=64, pad_token_id=tokenizer.pad_token_id),
              "electra": lambda: transformers.ElectraConfig(embedding_size=16, **shape),
              "albert": lambda: transformers.AlbertConfig(embedding_size=16, **shape)}[family]()
    config.update({"num_labels": len(LABELS), "id2label": dict(enumerate(LABELS)), "initializer_range": 0.3,
                   "label2id": {name: index for index, name in enumerate(LABELS)}, "classifier_pooling": pooling})
    return config


def saved_classifier(folder: Path, family: str, pooling: str = "mean") -> Path:
    """A tiny random classifier of `family` built and saved as the trainer builds and saves one."""
    import tf_keras as keras
    from transformers import AutoTokenizer, TFAutoModelForSequenceClassification

    from mlm_tpu.model_folder.card import CardFacts
    from mlm_tpu.model_folder.pooling import follow_classifier_pooling
    from mlm_tpu.model_folder.saving import save_model_folder
    from mlm_tpu.tasks import make_task

    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER)
    keras.utils.set_random_seed(0)
    model = follow_classifier_pooling(TFAutoModelForSequenceClassification.from_config(
        family_config(family, tokenizer, pooling)))
    model.build_in_name_scope()
    facts = CardFacts.of_model(make_task("sequence-classification"), model, tokenizer, max_length=MAX_LENGTH)
    save_model_folder(str(folder), model, tokenizer, facts)
    return folder


def tensorflow_outputs(folder: Path, path: Path, load=None, with_mean: bool = True) -> np.ndarray:
    """The folder's classifier loaded by mlm_tpu (or `load`) on TEXTS: its inputs, logits and (`with_mean`, for
    pooling_check.py) the texts and the masked mean of its last hidden states saved into `path`; the logits
    returned."""
    from transformers import AutoTokenizer, TFAutoModelForSequenceClassification

    from mlm_tpu.encoder.models import model_inputs
    from mlm_tpu.model_folder.loading import load_model
    from mlm_tpu.model_folder.pooling import masked_mean

    model = (load or (lambda: load_model(str(folder), TFAutoModelForSequenceClassification)))()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    encoded = tokenizer(TEXTS, padding=True, return_tensors="np")
    inputs = {name: encoded[name].astype(np.int64) for name in model_inputs(model.config, tokenizer)}
    outputs = model(**inputs, output_hidden_states=True)
    embeddings = masked_mean(outputs.hidden_states[-1], inputs["attention_mask"]).numpy()
    mean = {"embeddings": embeddings, "texts": np.array(TEXTS)} if with_mean else {}
    np.savez(path, logits=outputs.logits.numpy(), **mean, **inputs)
    return outputs.logits.numpy()


@pytest.mark.parametrize("family", FAMILIES)
def test_the_mean_pooled_head_reads_the_mean_of_the_real_tokens_in_each_family(family, tmp_path):
    """Mean-pooled logits do not move with padding (the mean is over real tokens), differ from the first token's
    head with the same weights, and come back the same from the saved folder: the config says mean, and loading
    follows it."""
    from transformers import AutoTokenizer, TFAutoModelForSequenceClassification

    from mlm_tpu.model_folder.loading import load_model

    folder = saved_classifier(tmp_path / family, family)
    config = json.loads((folder / "config.json").read_text())
    assert config["classifier_pooling"] == "mean"
    assert config["auto_map"] == {"AutoModelForSequenceClassification": "modeling_mean_pooling.MeanPooling"
                                                                        f"{config['architectures'][0]}"}
    model = load_model(str(folder), TFAutoModelForSequenceClassification)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    short = tokenizer(TEXTS[:1], return_tensors="np")
    padded = tokenizer(TEXTS[:1], padding="max_length", max_length=MAX_LENGTH, return_tensors="np")
    alone = model(input_ids=short["input_ids"], attention_mask=short["attention_mask"]).logits.numpy()
    with_padding = model(input_ids=padded["input_ids"], attention_mask=padded["attention_mask"]).logits.numpy()
    np.testing.assert_allclose(with_padding, alone, atol=1e-5)
    as_tuple = model(input_ids=short["input_ids"], attention_mask=short["attention_mask"], return_dict=False)[0]
    np.testing.assert_allclose(as_tuple.numpy(), alone, atol=1e-6)  # the main layer's outputs as a tuple, too
    saved = tensorflow_outputs(folder, tmp_path / "mean.npz")
    first_token = load_model(str(saved_classifier(tmp_path / f"{family}-cls", family, "cls")),
                             TFAutoModelForSequenceClassification)
    tokens = tokenizer(TEXTS, padding=True, return_tensors="np")
    cls_logits = first_token(input_ids=tokens["input_ids"], attention_mask=tokens["attention_mask"]).logits.numpy()
    assert np.abs(saved - cls_logits).max() > 1e-3  # the same weights (seed 0), another pooling


@pytest.mark.slow  # starts torch and sentence-transformers on five folders
def test_transformers_5_and_sentence_transformers_load_each_family_with_our_logits_and_mean(tmp_path):
    """AutoModelForSequenceClassification with trust_remote_code builds the folder's class, with TensorFlow's logits
    and labels; without it transformers' own class reads the first token, and differs; SentenceTransformer(folder)
    embeds with TensorFlow's mean of the last hidden states."""
    python = interpreter("MLM_TPU_PYTORCH_PYTHON", "torch, transformers 5 and sentence-transformers")
    arguments = []
    for family in FAMILIES:
        folder = saved_classifier(tmp_path / family, family)
        tensorflow_outputs(folder, tmp_path / f"{family}.npz")
        arguments += [folder, tmp_path / f"{family}.npz"]
    reports = run_check(python, "pooling_check.py", *arguments)
    assert len(reports) == len(FAMILIES), reports
    for family, report in zip(FAMILIES, reports):
        assert report["class"].startswith("MeanPooling") and report["class"].endswith("ForSequenceClassification")
        assert report["id2label"] == {"0": "low", "1": "good", "2": "high"}, (family, report)
        assert report["max_abs_diff"] < 1e-4, (family, report)
        assert report["own_class_diff"] > 1e-3, (family, report)  # the check tells the poolings apart
        assert report["embeddings_diff"] < 1e-4, (family, report)


def test_the_card_says_the_folder_needs_trust_remote_code_and_names_sentence_transformers(tmp_path):
    folder = saved_classifier(tmp_path / "roberta", "roberta")
    card = (folder / "README.md").read_text()
    assert 'AutoModelForSequenceClassification.from_pretrained("roberta", trust_remote_code=True)' in card
    assert 'SentenceTransformer("roberta")' in card
    assert json.loads((folder / "1_Pooling" / "config.json").read_text())["pooling_mode_mean_tokens"] is True
    assert json.loads((folder / "sentence_bert_config.json").read_text())["max_seq_length"] == MAX_LENGTH
    assert "trust_remote_code" not in (saved_classifier(tmp_path / "cls", "roberta", "cls") / "README.md").read_text()


def test_a_mean_pooled_base_fine_tunes_mean_pooled_unless_told_and_exports_with_its_pytorch_files(tmp_path):
    """Fine-tuning a mean-pooled classifier again keeps its pooling by default (--classifier-pooling cls changes
    it, and the log says so); `export --output-dir` of its folder writes its class, auto_map and sentence-transformers'
    files too."""
    import mlm_tpu
    from mlm_tpu.console import logger
    from mlm_tpu.tasks import TrainingConfig, make_task
    from test_encoder import Lines

    folder = saved_classifier(tmp_path / "bert", "bert")
    task = make_task("sequence-classification")
    lines = Lines()
    logger.addHandler(lines)
    try:
        assert task.pooling(TrainingConfig("t", "o", task=task.name, model_name_or_path=str(folder))) == "mean"
        kept = list(lines.lines)
        assert task.pooling(TrainingConfig("t", "o", task=task.name, model_name_or_path=str(folder),
                                           classifier_pooling="cls")) == "cls"
        assert task.pooling(TrainingConfig("t", "o", task=task.name)) == "cls"
    finally:
        logger.removeHandler(lines)
    assert not any("instead" in line for line in kept)  # its own pooling: nothing switched
    switched = [line for line in lines.lines if "instead" in line]
    assert switched == [f"{folder} is a classifier whose head read the mean of the last hidden states over real tokens "
                        "(classifier_pooling mean); with --classifier-pooling cls its head now reads the first token's "
                        "hidden state instead, and the saved folder says so"]
    for name in ("modeling_mean_pooling.py", "modules.json", "sentence_bert_config.json", "1_Pooling"):
        (shutil.rmtree if (folder / name).is_dir() else Path.unlink)(folder / name)
    config = json.loads((folder / "config.json").read_text())
    del config["auto_map"]
    (folder / "config.json").write_text(json.dumps(config))
    exported = Path(mlm_tpu.export_model(str(folder), output_dir=str(tmp_path / "exported")))
    assert "MeanPoolingBertForSequenceClassification" in (exported / "modeling_mean_pooling.py").read_text()
    assert json.loads((exported / "config.json").read_text())["auto_map"] == {
        "AutoModelForSequenceClassification": "modeling_mean_pooling.MeanPoolingBertForSequenceClassification"}
    assert json.loads((exported / "1_Pooling" / "config.json").read_text())["word_embedding_dimension"] == 32
    assert json.loads((exported / "modules.json").read_text())[1]["path"] == "1_Pooling"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A tiny RoBERTa base; a mean-pooled classifier fine-tuned on it, in full and with LoRA (its head saved whole
    beside the delta), 2 epochs each."""
    import mlm_tpu

    tmp = tmp_path_factory.mktemp("pooling")
    base = save_base(tmp, "roberta", TOKENIZER)
    shards = shard(TOKENIZER, tmp, "single")
    common = dict(task="sequence-classification", model_name_or_path=str(base), classifier_pooling="mean",
                  eval_dataset=str(shards / "validation"), per_replica_batch_size=16, num_epochs=2, seed=1)
    full = mlm_tpu.train_model(str(shards / "train"), str(tmp / "full"), learning_rate=1e-3, **common)
    lora = mlm_tpu.train_model(str(shards / "train"), str(tmp / "lora"), delta="lora", learning_rate=1e-2, **common)
    return tmp, shards, full, lora


def cls_copy(folder: Path, target: Path) -> Path:
    """The folder with its config saying cls: what loading would give if it ignored the pooling."""
    shutil.copytree(folder, target)
    name = "mlm_tpu_delta.json" if (folder / "mlm_tpu_delta.json").is_file() else "config.json"
    record = json.loads((target / name).read_text())
    (record["head"] if name == "mlm_tpu_delta.json" else record)["classifier_pooling"] = "cls"
    (target / name).write_text(json.dumps(record))
    return target


@pytest.mark.slow
@pytest.mark.parametrize("run", ["full", "lora"])
def test_evaluate_and_predict_follow_the_saved_pooling(runs, run):
    """evaluate scores the folder as the run's validation did, and the same folder read as cls scores and predicts
    otherwise: loading follows classifier_pooling, for a whole model and an adapter folder alike."""
    import mlm_tpu

    tmp, shards, full, lora = runs
    result = {"full": full, "lora": lora}[run]
    folder = Path(result.output_dir)
    scores = mlm_tpu.evaluate_model(str(folder), str(shards / "validation")).scores
    assert scores["loss"] == pytest.approx(result.best["validation"]["loss"], abs=1e-4)
    other = cls_copy(folder, tmp / f"{run}-as-cls")
    assert abs(mlm_tpu.evaluate_model(str(other), str(shards / "validation")).scores["loss"] - scores["loss"]) > 1e-4
    mean_scores = mlm_tpu.predict_text_classification(str(folder), TEXTS)[0]["scores"]
    cls_scores = mlm_tpu.predict_text_classification(str(other), TEXTS)[0]["scores"]
    assert max(abs(mean_scores[name] - cls_scores[name]) for name in mean_scores) > 1e-4


@pytest.mark.slow
def test_pytorch_loads_the_trained_classifier_plain_and_with_lora_as_its_cards_say(runs):
    """The full fine-tune in transformers 5 (trust_remote_code) and sentence-transformers, the LoRA folder in PEFT
    as its card's snippet loads it (the class that comes with the folder, the head from modules_to_save), and the
    LoRA folder merged (`export --merge`): TensorFlow's logits, to 1e-4."""
    from mlm_tpu.delta.folder import load_adapter

    python = interpreter("MLM_TPU_PYTORCH_PYTHON", "torch, transformers 5, sentence-transformers and peft")
    tmp, _, full, lora = runs
    full_folder, lora_folder, merged = Path(full.output_dir), Path(lora.output_dir), tmp / "merged"
    assert json.loads((lora_folder / "mlm_tpu_delta.json").read_text())["head"]["classifier_pooling"] == "mean"
    assert (lora_folder / "modeling_mean_pooling.py").is_file()
    command("export", "--model", lora_folder, "--merge", "--output-dir", merged)
    tensorflow_outputs(full_folder, tmp / "full.npz")
    tensorflow_outputs(lora_folder, tmp / "lora.npz", load=lambda: load_adapter(str(lora_folder))[0],
                       with_mean=False)
    tensorflow_outputs(merged, tmp / "merged.npz")
    reports = run_check(python, "pooling_check.py", full_folder, tmp / "full.npz", merged, tmp / "merged.npz")
    reports += run_check(python, "peft_check.py", lora_folder, "card", "-", tmp / "lora.npz")
    assert len(reports) == 3, reports
    for name, report in zip(("full", "merged", "lora"), reports):
        assert "error" not in report, (name, report)
        assert report["max_abs_diff"] < 1e-4, (name, report)
    assert reports[0]["embeddings_diff"] < 1e-4 and reports[0]["own_class_diff"] > 1e-4, reports[0]
    assert reports[2]["missing"] == [] and reports[2]["unexpected"] == [], reports[2]
