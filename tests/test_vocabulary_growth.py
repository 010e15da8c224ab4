"""A checkpoint grown to an extended tokenizer (model_folder/new_embeddings.resized_model) in every family mlm_tpu
continues: text without a new id reads as before (hidden states and old-id logits within 1e-5), and each new row is
the mean of its pieces' rows. The trained runs of ELECTRA and T5 grown end to end are at the end (slow)."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

from test_electra_continued import checkpoint as electra_checkpoint  # noqa: F401  (a fixture)

OLD = 96  # the tiny models' vocabulary before growing
CUTS = {OLD: [5, 6], OLD + 1: [7, 8, 9], OLD + 2: [10], OLD + 3: []}  # new id: the old pieces it was cut into
SHAPES = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64,
          "vocab_size": OLD, "pad_token_id": 1, "max_position_embeddings": 40}


def tiny(family: str):
    """A tiny transformers TensorFlow model of `family` (the class mlm_tpu continues it as), random weights, built."""
    import transformers as t

    models = {
        "bert": (t.BertConfig, t.TFBertForMaskedLM, {}),
        "roberta": (t.RobertaConfig, t.TFRobertaForMaskedLM, {}),
        "xlm-roberta": (t.XLMRobertaConfig, t.TFXLMRobertaForMaskedLM, {}),
        "albert": (t.AlbertConfig, t.TFAlbertForMaskedLM, {"embedding_size": 16}),  # embeddings narrower than hidden
        "deberta-v2": (t.DebertaV2Config, t.TFDebertaV2ForMaskedLM, {"relative_attention": True,
                                                                      "position_buckets": 8, "pos_att_type": ["p2c",
                                                                                                               "c2p"]}),
        "electra-generator": (t.ElectraConfig, t.TFElectraForMaskedLM, {"embedding_size": 16}),
        "electra-discriminator": (t.ElectraConfig, t.TFElectraForPreTraining, {"embedding_size": 16}),
    }
    if family == "distilbert":
        config = t.DistilBertConfig(vocab_size=OLD, dim=32, n_layers=2, n_heads=2, hidden_dim=64,
                                    max_position_embeddings=40, pad_token_id=1)
        model = t.TFDistilBertForMaskedLM(config)
    elif family == "t5":  # the original T5: the lm_head is the shared embeddings
        model = t.TFT5ForConditionalGeneration(t.T5Config(vocab_size=OLD, d_model=32, d_kv=16, d_ff=64, num_layers=2,
                                                          num_heads=2))
    else:
        config_class, model_class, own = models[family]
        model = model_class(config_class(**{**SHAPES, **own}))
    model(model.dummy_inputs, training=False)
    return model


def embedding_matrix(model) -> np.ndarray:
    """The input embeddings [vocabulary, width]."""
    return [weight.numpy() for weight in model.get_input_embeddings().weights
            if weight.shape[0] == model.config.vocab_size][0]


@pytest.mark.parametrize("family", ["bert", "roberta", "xlm-roberta", "distilbert", "albert", "deberta-v2",
                                    "electra-generator", "electra-discriminator", "t5"])
def test_a_grown_model_of_each_family_reads_old_ids_as_before_and_starts_new_rows_at_their_pieces_mean(family):
    from mlm_tpu.model_folder.new_embeddings import resized_model

    model = tiny(family)
    grown, changed = resized_model(model, CUTS, "mean-of-pieces")
    assert grown.config.vocab_size == OLD + len(CUTS) and changed, changed
    old, new = embedding_matrix(model), embedding_matrix(grown)
    assert np.array_equal(new[:OLD], old)
    for index, pieces in CUTS.items():
        np.testing.assert_allclose(new[index], old[pieces].mean(axis=0) if pieces else old.mean(axis=0), atol=1e-6)

    ids = np.random.default_rng(0).integers(2, OLD, size=(3, 12)).astype(np.int32)
    inputs = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    if family == "t5":
        inputs["decoder_input_ids"] = ids
    before, after = (one(inputs, output_hidden_states=True, training=False) for one in (model, grown))
    hidden = "decoder_hidden_states" if family == "t5" else "hidden_states"
    np.testing.assert_allclose(getattr(after, hidden)[-1].numpy(), getattr(before, hidden)[-1].numpy(), atol=1e-5)
    if family != "electra-discriminator":  # its logits are per token (replaced or not), not over the vocabulary
        assert after.logits.shape[-1] == OLD + len(CUTS)
        np.testing.assert_allclose(after.logits.numpy()[..., :OLD], before.logits.numpy(), atol=1e-5)
    else:
        np.testing.assert_allclose(after.logits.numpy(), before.logits.numpy(), atol=1e-5)


# --- ELECTRA's two models and a T5, grown by the tasks that continue them ------------------------------------------


@pytest.fixture(scope="module")
def extended_wikitext_tokenizer(wikitext_tokenizer, wikitext_path, tmp_path_factory):
    """The session's WikiText Unigram tokenizer (ELECTRA's checkpoint's) extended by 40 words of WikiText."""
    import mlm_tpu

    return mlm_tpu.extend_tokenizer(str(tmp_path_factory.mktemp("electra-extended") / "tokenizer"),
                                    tokenizer=str(wikitext_tokenizer[0]), text_files=[str(wikitext_path)],
                                    num_new_pieces=40)


def test_electras_discriminator_and_generator_grow_each_by_the_rule_sharing_the_grown_embeddings(
        electra_checkpoint, extended_wikitext_tokenizer):
    """The discriminator's embeddings (which the generator reads and predicts through) and the generator's output bias
    gain a row per new piece, the mean of its pieces' rows; every old row as it was. The generator's new biases put
    each new piece, at a mask with no context, on the line of the old pieces' logits there against log(1 + frequency)
    on the extension's corpus (which records every base piece's: new_embeddings.prior_matched), said in the log."""
    import contextlib
    import io

    from mlm_tpu.electra.continued import continued_pretrainer
    from mlm_tpu.model_folder.new_embeddings import frequency_line
    from mlm_tpu.tasks import TrainingConfig
    from mlm_tpu.tokenizer.load import load_tokenizer
    from mlm_tpu.training.vocabulary_growth import vocabulary_growth

    run = str(electra_checkpoint["run"])
    extended = load_tokenizer(extended_wikitext_tokenizer)
    growth = vocabulary_growth(run, extended, None)
    old_size = len(electra_checkpoint["tokenizer"])
    assert len(growth) == 40 and min(growth) == old_size
    config = TrainingConfig("train", "out", task="electra", model_name_or_path=run)
    with contextlib.redirect_stderr(io.StringIO()) as log:
        model = continued_pretrainer(config, extended, 50.0, growth)
    for part in ("discriminator", "generator"):
        assert re.search(rf"the {part}'s vocabulary grows from {old_size:,} to {len(extended):,} .*mean-of-pieces",
                         log.getvalue()), log.getvalue()
        assert getattr(model, part).config.vocab_size == len(extended)
    assert "at a mask with no context, its logit is that of an old piece as frequent" in log.getvalue()
    assert model.generator.generator_lm_head.input_embeddings is model.discriminator.electra.embeddings
    weights = electra_checkpoint["weights"]
    old_rows = weights["discriminator/electra/embeddings/word_embeddings/weight:0"]
    old_bias = weights["generator/generator_lm_head/bias:0"]
    rows = model.discriminator.electra.embeddings.weight.numpy()
    bias = model.generator.generator_lm_head.bias.numpy()
    assert np.array_equal(rows[:old_size], old_rows) and np.array_equal(bias[:old_size], old_bias)
    for index, pieces in growth.items():
        np.testing.assert_allclose(rows[index], old_rows[pieces].mean(axis=0), atol=1e-6)
    row, position = growth.mask
    logits = model.generator(input_ids=np.array([row]), training=False).logits.numpy()[0, position]
    intercept, slope = frequency_line(logits[:old_size], growth.frequencies.base)
    new = sorted(growth)
    np.testing.assert_allclose(logits[new], intercept + slope * np.log1p([growth.frequencies.new[index]
                                                                          for index in new]), atol=1e-4)


@pytest.mark.slow
def test_electra_continued_with_an_extended_tokenizer_trains_and_saves_both_models_grown(
        electra_checkpoint, extended_wikitext_tokenizer, wikitext_path, tmp_path):
    """`train --task electra --model-name-or-path M --tokenizer EXTENDED` on shards of the extended tokenizer: both
    saved models hold the larger vocabulary."""
    from conftest import run_module, run_train

    shards = tmp_path / "shards"
    result = run_module("mlm_tpu.shard", "--tokenizer", extended_wikitext_tokenizer, "--text-files",
                        str(wikitext_path), "--limit", "60", "--max-length", "64", "--output-dir", str(shards))
    assert result.returncode == 0, result.stderr
    size = len(json.loads((Path(extended_wikitext_tokenizer) / "tokenizer.json").read_text())["model"]["vocab"])
    result = run_train("--task", "electra", "--model-name-or-path", electra_checkpoint["run"], "--tokenizer",
                       extended_wikitext_tokenizer, "--train-dataset", shards / "train", "--new-embeddings", "random",
                       "--per-replica-batch-size", 4, "--max-steps", 2, "--output-dir", tmp_path / "out")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr.count("vocabulary grows from") == 2 and "(--new-embeddings random)" in result.stderr
    for folder in (tmp_path / "out", tmp_path / "out" / "generator"):
        assert json.loads((folder / "config.json").read_text())["vocab_size"] == size


@pytest.mark.slow
def test_a_t5_continued_with_span_corruption_and_an_extended_tokenizer_grows_its_shared_embeddings_and_lm_head(
        wikitext_path, tmp_path):
    """A T5 1.1 with 28 rows to spare past its tokenizer, extended by 40 pieces: span corruption on shards of the
    extended tokenizer grows it to the tokenizer (the sentinels keep their ids), and its folder holds the size."""
    import mlm_tpu
    from conftest import run_train
    from test_t5_continued import T5_TOKENIZER, save_tensorflow_checkpoint, shard_with

    checkpoint = save_tensorflow_checkpoint("T5", tmp_path / "checkpoint")
    extended = mlm_tpu.extend_tokenizer(str(tmp_path / "extended"), tokenizer=str(T5_TOKENIZER),
                                        text_files=[str(wikitext_path)], num_new_pieces=40)
    shards = shard_with(extended, wikitext_path, tmp_path / "shards")
    result = run_train("--task", "span-corruption", "--model-name-or-path", checkpoint, "--tokenizer", extended,
                       "--train-dataset", shards / "train", "--per-replica-batch-size", 4, "--max-steps", 2,
                       "--output-dir", tmp_path / "out")
    assert result.returncode == 0, result.stderr[-3000:]
    before = json.loads((checkpoint / "config.json").read_text())["vocab_size"]
    grown = re.search(r"adds 40 pieces .*its vocabulary grows from ([0-9,]+) to ([0-9,]+) \((.*)\), each new row the "
                      r"mean of the rows of the pieces", result.stderr)
    assert grown, result.stderr[-3000:]
    assert int(grown.group(1).replace(",", "")) == before and "lm_head" in grown.group(3), grown.group(0)
    size = json.loads((tmp_path / "out" / "config.json").read_text())["vocab_size"]
    assert size == int(grown.group(2).replace(",", "")) > before


@pytest.mark.parametrize("task", ["electra", "span-corruption"])
def test_new_embeddings_without_a_checkpoint_is_refused_by_each_task_that_grows(task):
    """A model from scratch has its vocabulary fitted to --tokenizer: nothing to grow (checked before anything loads)."""
    from mlm_tpu.errors import UserError
    from mlm_tpu.tasks import TrainingConfig, make_task
    from mlm_tpu.training.checks import check_config

    config = TrainingConfig("train", "out", task=task, new_embeddings="mean")
    with pytest.raises(UserError, match=re.escape("--new-embeddings mean initialises the rows of the pieces an "
                                                  "extended --tokenizer adds to a checkpoint's; it needs "
                                                  "--model-name-or-path")):
        check_config(config, make_task(task))
