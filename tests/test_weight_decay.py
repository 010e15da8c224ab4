"""Which weights weight decay leaves alone, per family (tiny presets, built for real) and per optimizer: every vector
(biases, the gains and shifts of norms, whatever the family names them), no matrix or embedding table."""

import re

import numpy as np
import pytest

VOCABULARY = 96


def tiny_model(family: str):
    """The family's tiny preset, built as a pretraining run builds it (vocabulary and length cut small)."""
    from transformers import ElectraConfig, T5Config, TFAutoModelForMaskedLM, TFT5ForConditionalGeneration

    from mlm_tpu.electra import presets as electra
    from mlm_tpu.electra.model import ElectraPretrainer
    from mlm_tpu.mlm.presets import PRESETS, masked_lm_config
    from mlm_tpu.modernbert.model import build
    from mlm_tpu.modernbert.presets import preset
    from mlm_tpu.t5.presets import PRESETS as T5_PRESETS

    if family in ("roberta", "bert"):
        shape = PRESETS["tiny" if family == "roberta" else "bert-tiny"]
        model = TFAutoModelForMaskedLM.from_config(masked_lm_config(vocab_size=VOCABULARY, max_position_embeddings=34,
                                                                    **shape))
    elif family == "electra":
        discriminator = ElectraConfig(vocab_size=VOCABULARY, max_position_embeddings=32,
                                      **electra.PRESETS["electra-tiny"])
        model = ElectraPretrainer.from_configs(electra.generator_config(discriminator, 0.5), discriminator)
    elif family == "t5":
        model = TFT5ForConditionalGeneration(T5Config(vocab_size=VOCABULARY, **T5_PRESETS["t5-tiny"]))
    else:
        model = build(preset("modernbert-tiny", vocab_size=VOCABULARY), "masked_lm")
    model.build_in_name_scope()
    return model


def exempt_weights(model, optimizer_name: str, no_decay=()):
    """The names of the weights one step of `optimizer_name` with weight decay and zero gradients leaves as they
    were (with zero gradients the Adam part of the update is 0: only the decay moves a weight)."""
    import tensorflow as tf

    from mlm_tpu.tasks import TrainingConfig
    from mlm_tpu.training.optimizers import make_optimizer, with_schedule_defaults

    config = with_schedule_defaults(TrainingConfig("s", "o", optimizer=optimizer_name, learning_rate=0.1,
                                                   warmup_steps=0, weight_decay_rate=0.1))
    optimizer = make_optimizer(config, 10, no_decay)
    before = [variable.numpy() for variable in model.trainable_variables]
    optimizer.apply_gradients((tf.zeros_like(variable), variable) for variable in model.trainable_variables)
    exempt = {variable.name for variable, start in zip(model.trainable_variables, before)
              if np.array_equal(variable.numpy(), start)}
    for variable, start in zip(model.trainable_variables, before):
        variable.assign(start)
    return exempt


# What each family calls its vectors: a weight whose name ends so is exempt, every other one decays.
VECTORS = {
    "roberta": r"((LayerNorm|layer_norm)/(gamma|beta)|bias):0$",
    "bert": r"((LayerNorm|layer_norm)/(gamma|beta)|bias):0$",
    "electra": r"((LayerNorm|layer_norm)/(gamma|beta)|bias):0$",
    "t5": r"layer_norm/weight:0$",
    "modernbert": r"(norm|attn_norm|mlp_norm|final_norm)/gamma:0$|head/norm/gamma:0$|bias:0$",
}


@pytest.fixture(scope="module", params=sorted(VECTORS))
def family_model(request):
    return request.param, tiny_model(request.param)


@pytest.mark.parametrize("optimizer_name", ["adamw", "stableadamw"])
def test_every_norm_and_bias_is_exempt_from_weight_decay_and_every_matrix_decays(family_model, optimizer_name):
    """ModernBERT's norms (`attn_norm`, `mlp_norm`, `final_norm`, ...) decayed under name substrings; by rank they are
    exempt, as in ModernBERT's trainer and Cramming, and T5's relative-position table (a matrix, named `..._bias`)
    decays as the other tables do."""
    family, model = family_model
    exempt = exempt_weights(model, optimizer_name)
    names = [variable.name for variable in model.trainable_variables]
    expected = {name for name in names if re.search(VECTORS[family], name)}
    assert exempt == expected, (sorted(exempt - expected), sorted(expected - exempt))
    assert exempt == {variable.name for variable in model.trainable_variables if variable.shape.rank <= 1}
    assert 0 < len(exempt) < len(names)
    if family == "modernbert":
        assert {"attn_norm", "mlp_norm", "final_norm"} <= {name.split("/")[-2] for name in exempt}


def test_the_tasks_own_names_stay_exempt_beside_the_rule():
    """A delta's weights named by the task (IA3's scales, virtual tokens) stay undecayed whatever their rank."""
    model = tiny_model("roberta")
    table = next(variable.name for variable in model.trainable_variables if "word_embeddings" in variable.name)
    assert table in exempt_weights(model, "adamw", no_decay=("word_embeddings",))
    assert table not in exempt_weights(model, "adamw")
