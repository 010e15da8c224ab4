"""Loading a checkpoint for continued pretraining or fine-tuning (model_folder/loading.py), as transformers would
take it, and never with weights silently left random (issue 48): a BERT masked LM with PyTorch-only weights and no
pooler fine-tunes, its pooler new and named; missing encoder weights are one error line whatever the spelling of the
checkpoint's keys (TensorFlow names, PyTorch names with the model's prefix or without it); --config-overrides that
change a weight are refused; a sharded checkpoint missing a file names it; a Hub model with PyTorch-only weights
loads from the Hub cache; transformers 5's T5 configs load right beside tf_model.h5 and from the Hub; a RoBERTa
checkpoint whose positions TensorFlow would shift is refused; and what a user gets wrong is said for the command at
hand.

The checkpoints are tiny BERTs built here by transformers 4.57's TensorFlow class, saved in the layout asked for:
tf_model.h5, or mlm_tpu's PyTorch-layout model.safetensors (the names transformers 5's BertForMaskedLM saves), with
mlm_tpu 0.2's tokenizer, whose shards (tests/fixtures) they continue on."""

import io
import json
import shutil
from contextlib import redirect_stderr
from pathlib import Path

import numpy as np
import pytest

from conftest import MADE_BY_0_2, assert_user_error

TOKENIZER_FROM = MADE_BY_0_2 / "roberta"  # its tokenizer files: the pieces the fixtures' shards were made with
SHARDS = MADE_BY_0_2 / "shards"
BERT = dict(vocab_size=300, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
            max_position_embeddings=64)
HUB_NAME = "someone/tiny-bert"


def tiny_bert(layers: int = 2):
    """A BertForMaskedLM of BERT's shape with `layers` layers, built (no pooler, as transformers' masked LM has)."""
    import mlm_tpu  # noqa: F401  (Keras 2 behind tf.keras, before TensorFlow loads)
    from transformers import BertConfig, TFBertForMaskedLM

    model = TFBertForMaskedLM(BertConfig(**{**BERT, "num_hidden_layers": layers}))
    model.build_in_name_scope()
    return model


def save_checkpoint(folder: Path, layout: str, layers: int = 2, **config) -> Path:
    """A BERT masked-LM folder with mlm_tpu 0.2's tokenizer; `layout`: "tensorflow" (tf_model.h5), "pytorch"
    (model.safetensors, as transformers 5 saves a BertForMaskedLM) or "bare" (model.safetensors of the encoder alone,
    its keys without `bert.`, as a sentence-transformers BertModel saves them). Its config says BERT's 2 layers
    whatever `layers` the weights have (fewer: a checkpoint that lacks encoder weights)."""
    from safetensors.numpy import save_file

    from mlm_tpu.model_folder.pytorch import pytorch_state_dict

    model = tiny_bert(layers)
    folder.mkdir(parents=True)
    if layout == "tensorflow":
        model.save_pretrained(folder)
    else:
        state = pytorch_state_dict(model)
        if layout == "bare":
            state = {name.removeprefix("bert."): array for name, array in state.items() if name.startswith("bert.")}
        save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    values = {**model.config.to_dict(), "num_hidden_layers": 2, "architectures": ["BertForMaskedLM"], **config}
    (folder / "config.json").write_text(json.dumps(values))
    for path in TOKENIZER_FROM.glob("*token*"):
        shutil.copy(path, folder / path.name)
    return folder


def continue_flags(base, output: Path, *more) -> list:
    return ["--task", "mlm", "--model-name-or-path", base, "--train-dataset", SHARDS / "train",
            "--per-replica-batch-size", 8, "--max-steps", 1, "--output-dir", output, *more]


def continued(folder) -> str:
    """The log of loading `folder` for continued pretraining."""
    from mlm_tpu.mlm.continued import continued_masked_lm
    from mlm_tpu.tokenizer.load import load_tokenizer

    log = io.StringIO()
    with redirect_stderr(log):
        continued_masked_lm(str(folder), load_tokenizer(str(folder)))
    return log.getvalue()


def fine_tuned(folder) -> tuple:
    """(the PyTorch names of the new weights, the log) of loading `folder` as a 2-label sequence classifier."""
    from transformers import TFAutoModelForSequenceClassification

    from mlm_tpu.encoder.models import Labels, pretrained_encoder

    log = io.StringIO()
    with redirect_stderr(log):
        _, new_weights = pretrained_encoder(str(folder), TFAutoModelForSequenceClassification, Labels(("a", "b")))
    return new_weights, log.getvalue()


# --- a BERT masked LM with PyTorch-only weights fine-tunes: its pooler is the classifier's, new -------------------

LAYOUTS = ("tensorflow", "pytorch", "bare")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_bert_masked_lm_fine_tunes_with_a_new_pooler_named_in_the_log(layout, tmp_path):
    """transformers' BertForMaskedLM has no pooler (every run_mlm.py BERT): the classifier's pooler is new, as
    transformers initialises it, and the log names it beside the classifier, in every layout."""
    new_weights, log = fine_tuned(save_checkpoint(tmp_path / "bert", layout))
    assert new_weights == ["bert.pooler.dense.bias", "bert.pooler.dense.weight", "classifier.bias",
                           "classifier.weight"]
    assert "a new head is initialised for 2 outputs: bert.pooler.dense, classifier" in log


@pytest.mark.slow  # trains a step
def test_train_fine_tunes_a_pytorch_only_bert_masked_lm(tmp_path, in_process):
    """The command the issue ran: `train --task sequence-classification --model-name-or-path` a BERT masked LM saved
    with PyTorch weights only (it ended in "lacks 2 weights of the bert encoder (bert.pooler.dense.bias, ...)")."""
    from mlm_tpu.api import shard_corpus

    base = save_checkpoint(tmp_path / "bert", "pytorch")
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"text": f"text number {index}", "label": "ab"[index % 2]}) + "\n"
                            for index in range(16)))
    shard_corpus(str(base), str(tmp_path / "shards"), task="sequence-classification", text_files=(str(rows),),
                 split="train", input_columns=("text",), target_column="label", max_length=16)
    result = in_process("train", "--task", "sequence-classification", "--model-name-or-path", base,
                        "--train-dataset", tmp_path / "shards" / "train", "--per-replica-batch-size", 4,
                        "--max-steps", 1, "--output-dir", tmp_path / "model")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "a new head is initialised for 2 outputs: bert.pooler.dense, classifier" in result.stderr
    assert (tmp_path / "model" / "model.safetensors").is_file()


# --- missing encoder weights: one error line, for every spelling of the checkpoint's keys ---------------------------

@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_checkpoint_lacking_encoder_weights_is_refused_whatever_its_keys_spelling(layout, tmp_path):
    """Weights of one layer of 2 (a config that says more layers than the weights hold): refused by continued
    pretraining and by fine-tuning alike, where the TensorFlow names (`bert/encoder/layer_._1/...:0`) and the
    PyTorch names without their prefix (`encoder.layer.1...`) went through with layer 1 left random."""
    from mlm_tpu.errors import UserError

    base = save_checkpoint(tmp_path / "bert", layout, layers=1)
    for load in (continued, fine_tuned):
        with pytest.raises(UserError, match=r"lacks 16 weights of the bert encoder \(bert\.encoder\.layer\.1\."):
            load(base)


def test_a_bare_encoder_continues_with_a_new_masked_lm_head_named_in_the_log(tmp_path):
    """A checkpoint saved without its prefix and without a head (a sentence-transformers BertModel): the new
    masked-LM head is named, and nothing of the encoder is."""
    log = continued(save_checkpoint(tmp_path / "bert", "bare"))
    assert "it has no masked-LM head, so a new one is initialised" in log
    assert log.rstrip().endswith(": cls.predictions, cls.predictions.transform.LayerNorm, "
                                 "cls.predictions.transform.dense"), log


def test_train_refuses_a_bare_encoder_lacking_a_layer(tmp_path, in_process):
    base = save_checkpoint(tmp_path / "bert", "bare", layers=1)
    result = in_process("train", *continue_flags(base, tmp_path / "out"))
    assert_user_error(result, f"--model-name-or-path {base} lacks 16 weights of the bert encoder",
                      "is it a checkpoint of this model?")
    assert not (tmp_path / "out").exists()


# --- --config-overrides on a checkpoint: only those that change no weight ---------------------------------------------

@pytest.mark.parametrize("layout, override, changed", [("tensorflow", "intermediate_size=64", "changes 6 weights"),
                                                       ("tensorflow", "hidden_size=32", "changes 39 weights"),
                                                       ("tensorflow", "num_hidden_layers=3", "changes 16 weights"),
                                                       ("pytorch", "hidden_size=32", "changes 39 weights")])
def test_an_override_that_changes_a_weight_is_refused_naming_the_flag(layout, override, changed, tmp_path,
                                                                      in_process):
    """With tf_model.h5 the weights that no longer fit were re-initialised (hidden_size: all of them) and the run
    exited 0; with PyTorch weights it ended in "cannot reshape array of size ...", naming no flag."""
    base = save_checkpoint(tmp_path / "bert", layout)
    result = in_process("train", *continue_flags(base, tmp_path / "out", "--config-overrides", override))
    assert_user_error(result, f"--config-overrides '{override}' {changed} of --model-name-or-path {base}",
                      "override only settings that change no weight", "--model-config")
    assert not (tmp_path / "out").exists()


def test_an_override_that_changes_no_weight_is_kept(tmp_path):
    from mlm_tpu.mlm.continued import continued_masked_lm
    from mlm_tpu.tokenizer.load import load_tokenizer

    base = save_checkpoint(tmp_path / "bert", "pytorch")
    model = continued_masked_lm(str(base), load_tokenizer(str(base)), "hidden_dropout_prob=0,num_attention_heads=4")
    assert (model.config.hidden_dropout_prob, model.config.num_attention_heads) == (0, 4)


# --- a sharded checkpoint missing one of its files --------------------------------------------------------------------

def test_a_sharded_checkpoint_missing_a_file_names_it(tmp_path, in_process):
    from mlm_tpu.model_folder.pytorch import save_pytorch_weights

    base = save_checkpoint(tmp_path / "bert", "pytorch")
    (base / "model.safetensors").unlink()
    files = save_pytorch_weights(tiny_bert(), str(base), max_shard_size="20KB")
    shards = sorted(name for name in files if name.endswith(".safetensors"))
    assert len(shards) > 2
    (base / shards[1]).unlink()
    result = in_process("train", *continue_flags(base, tmp_path / "out"))
    assert_user_error(result, f"--model-name-or-path {base}: {shards[1]}, one of the {len(shards)} files its "
                      "model.safetensors.index.json lists, is missing", "copy the checkpoint again")
    assert not (tmp_path / "out").exists()


# --- a Hub name with PyTorch-only weights, read from the Hub cache ----------------------------------------------------

def hub_cache(root: Path, name: str, folder: Path) -> Path:
    """A Hub cache (huggingface_hub's layout: models--owner--name/refs/main -> snapshots/<commit>/) holding `folder`'s
    files as the Hub model `name`."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = root / f"models--{name.replace('/', '--')}"
    shutil.copytree(folder, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    return root


@pytest.fixture
def offline_hub(tmp_path, monkeypatch):
    """`use(folder)`: the Hub model HUB_NAME is `folder`'s files, in a Hub cache made here, offline."""
    import huggingface_hub.constants
    import transformers.utils.hub

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(transformers.utils.hub, "_is_offline_mode", True)

    def use(folder: Path) -> str:
        cache = hub_cache(tmp_path / "hub-cache", HUB_NAME, folder)
        monkeypatch.setenv("HF_HUB_CACHE", str(cache))
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
        monkeypatch.setattr(transformers.utils.hub, "TRANSFORMERS_CACHE", str(cache))
        return HUB_NAME

    return use


@pytest.mark.parametrize("sharded", [False, True], ids=["one-file", "sharded"])
def test_a_hub_model_with_pytorch_only_weights_loads_from_the_hub_cache(sharded, tmp_path, offline_hub):
    """As most models published since 2024: continued pretraining and fine-tuning read its safetensors (every shard
    its index lists) where they were refused ("cannot load ... tf_model.h5")."""
    from transformers import TFAutoModelForMaskedLM

    from mlm_tpu.model_folder.loading import load_model
    from mlm_tpu.model_folder.pytorch import save_pytorch_weights

    original = tiny_bert()
    folder = save_checkpoint(tmp_path / "bert", "pytorch")
    if sharded:
        (folder / "model.safetensors").unlink()
        save_pytorch_weights(original, str(folder), max_shard_size="20KB")
    else:
        save_pytorch_weights(original, str(folder))
    name = offline_hub(folder)
    loaded = load_model(name, TFAutoModelForMaskedLM, "--model-name-or-path")
    assert all(np.array_equal(mine.numpy(), theirs.numpy()) for mine, theirs in zip(loaded.weights, original.weights))
    assert "with its masked-LM head" in continued(name)
    assert fine_tuned(name)[0] == ["bert.pooler.dense.bias", "bert.pooler.dense.weight", "classifier.bias",
                                   "classifier.weight"]


# --- transformers 5's T5 configs beside tf_model.h5, and from the Hub -------------------------------------------------

@pytest.mark.parametrize("where", ["folder", "hub"])
def test_a_t5_1_1_whose_config_transformers_5_saved_again_loads_untied_beside_tf_model_h5(where, tmp_path,
                                                                                         offline_hub):
    """transformers 5 writes `tie_word_embeddings: true` beside `scale_decoder_outputs: false` for a T5 1.1, which
    transformers 4 read as tied and scaled: its own untied output layer, which tf_model.h5 holds, was dropped."""
    import mlm_tpu  # noqa: F401
    from transformers import T5Config, TFT5ForConditionalGeneration

    from mlm_tpu.model_folder.loading import load_model
    from mlm_tpu.t5.family import TFT5FamilyForConditionalGeneration

    config = T5Config(vocab_size=64, d_model=16, d_ff=32, num_layers=1, num_heads=2, d_kv=8,
                      feed_forward_proj="gated-gelu", tie_word_embeddings=False, decoder_start_token_id=0)
    model = TFT5ForConditionalGeneration(config)
    model.build_in_name_scope()
    model.lm_head.kernel.assign(model.lm_head.kernel * 3.0)
    folder = tmp_path / "t5"
    model.save_pretrained(folder)
    values = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**values, "tie_word_embeddings": True,
                                                    "scale_decoder_outputs": False, "transformers_version": "5.24.0"}))
    name = offline_hub(folder) if where == "hub" else str(folder)
    loaded = load_model(name, TFT5FamilyForConditionalGeneration, "--model-name-or-path")
    inputs = dict(input_ids=np.array([[5, 6, 7, 1]]), decoder_input_ids=np.array([[0, 5, 6]]))
    assert not loaded.config.tie_word_embeddings
    assert np.abs(loaded(**inputs).logits.numpy() - model(**inputs).logits.numpy()).max() < 1e-5


# --- a RoBERTa-family PyTorch checkpoint whose positions TensorFlow would shift ---------------------------------------

def test_a_pytorch_roberta_padding_with_another_id_than_1_is_refused(tmp_path, in_process):
    """TensorFlow's RoBERTa numbers positions from padding index 1 whatever the config says, PyTorch's from
    pad_token_id: a PyTorch checkpoint padding with 3 would read every position embedding 2 rows off."""
    from transformers import TFAutoModelForMaskedLM

    from mlm_tpu.model_folder.pytorch import save_pytorch_weights

    base = shutil.copytree(MADE_BY_0_2 / "roberta", tmp_path / "base", ignore=shutil.ignore_patterns("tf_model.h5"))
    save_pytorch_weights(TFAutoModelForMaskedLM.from_pretrained(MADE_BY_0_2 / "roberta"), str(base))
    assert json.loads((base / "config.json").read_text())["pad_token_id"] == 3
    result = in_process("train", *continue_flags(base, tmp_path / "out"))
    assert_user_error(result, f"--model-name-or-path {base} is a roberta checkpoint whose pad_token_id is 3",
                      "read a position embedding 2 row(s) off", "pad with id 1")
    assert not (tmp_path / "out").exists()


# --- messages: what is wrong, and what to do for the command at hand --------------------------------------------------

def test_a_broken_config_json_is_named_as_such(tmp_path, in_process):
    """Not "neither a model folder here nor a reachable Hub model": the folder is here, its config.json is bad."""
    base = save_checkpoint(tmp_path / "bert", "tensorflow")
    (base / "config.json").write_text('{"model_type": "bert", "hidden_size": ')
    result = in_process("train", *continue_flags(base, tmp_path / "out"))
    assert_user_error(result, f"--model-name-or-path {base}'s config.json", "is not valid JSON",
                      "copy the model folder again")
    assert not (tmp_path / "out").exists()


def test_an_unknown_model_type_is_named_as_such(tmp_path, in_process):
    base = save_checkpoint(tmp_path / "bert", "tensorflow", model_type="bertish")
    result = in_process("train", *continue_flags(base, tmp_path / "out"))
    assert_user_error(result, f"--model-name-or-path {base}: its config.json names the model type 'bertish', which "
                      "transformers 4.57", "does not know", "give a model of a type it builds")
    assert not (tmp_path / "out").exists()


def test_a_run_folder_that_has_saved_no_model_yet_says_to_resume_it(tmp_path, in_process):
    """A train folder killed before its first save was told to "give the --output-dir of `python train.py`": it
    is one."""
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    (run / "training_args.json").write_text("{}")
    result = in_process("train", *continue_flags(run, tmp_path / "out"))
    assert_user_error(result, f"--model-name-or-path {run} is the output folder of a training run that has saved no "
                      "model yet", "run its command again to resume it")
    assert not (tmp_path / "out").exists()


def test_continuing_a_fine_tuned_classifier_says_to_continue_its_masked_lm(tmp_path, in_process):
    """`train --task mlm` was told to "fill masks with the masked LM it was fine-tuned from"."""
    from transformers import BertConfig, TFBertForSequenceClassification

    base = tmp_path / "classifier"
    model = TFBertForSequenceClassification(BertConfig(**BERT))
    model.build_in_name_scope()
    model.save_pretrained(base)
    for path in TOKENIZER_FROM.glob("*token*"):
        shutil.copy(path, base / path.name)
    result = in_process("train", *continue_flags(base, tmp_path / "out"))
    assert_user_error(result, f"--model-name-or-path {base} is a fine-tuned BertForSequenceClassification",
                      "continue the masked LM it was fine-tuned from")
    assert not (tmp_path / "out").exists()


def test_every_task_head_of_the_registry_is_one_that_has_no_masked_lm_head():
    """Whether a saved class holds a masked-LM head is asked of transformers' maps of its classes, not of a list of
    head endings kept here: the registry's heads (and a question answerer, which it has not) are task heads; masked
    LMs, BERT's pretraining heads and bare encoders are not."""
    from mlm_tpu.model_folder.loading import has_task_head
    from mlm_tpu.tasks import HEADS

    for suffix, task in HEADS.items():
        if task != "electra":  # its discriminator: refused apart, pointing to its generator
            assert all(has_task_head(f"{family}{suffix}") for family in ("Bert", "Roberta", "Electra")), suffix
    assert has_task_head("RobertaForQuestionAnswering") and has_task_head("BertForMultipleChoice")
    assert not any(map(has_task_head, ("BertForMaskedLM", "BertForPreTraining", "BertModel", "RobertaForMaskedLM",
                                       "DebertaV2ForMaskedLM", "ModernBertForMaskedLM", "")))


def test_fill_mask_refuses_a_tensorflow_folder_lacking_weights(tmp_path, in_process):
    """A model used as it is (fill-mask, evaluate, predict, a T5 fine-tuned further) must hold every weight: with
    tf_model.h5 a missing layer was left random, with no more than transformers' warning."""
    base = save_checkpoint(tmp_path / "bert", "tensorflow", layers=1)
    result = in_process("predict", "fill-mask", "--model", base, "Paris is the [MASK].")
    assert_user_error(result, f"--model {base} lacks 16 weights of TFAutoModelForMaskedLM",
                      "(bert.encoder.layer.1.", "is it a checkpoint of this model?")
