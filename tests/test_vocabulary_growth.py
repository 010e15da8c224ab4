"""A checkpoint grown to an extended tokenizer (model_folder/new_embeddings.resized_model) in every family mlm_tpu
continues: text without a new id reads as before (hidden states and old-id logits within 1e-5), and each new row is
the mean of its pieces' rows. The trained runs of ELECTRA and T5 grown end to end are at the end (slow)."""

import json
import re

import numpy as np
import pytest

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
