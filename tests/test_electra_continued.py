"""`--task electra --model-name-or-path`: ELECTRA continued from a folder --task electra saved (the discriminator,
generator/ inside), or from a discriminator and a generator given apart (--generator-name-or-path), as
google/electra-small-discriminator and google/electra-small-generator are published.

The checkpoint is a tiny ELECTRA whose heads are set apart from any fresh model's (the discriminator calls every token
replaced, the generator favours one piece), so a run that did not load them would not start at its loss. The quick
tests load it in this process: every weight is the checkpoint's, the generator reads the discriminator's embeddings
(the log says when its own differed), and bad input is one line each with nothing written. The slow ones train for
real: a continued run's validation, one step at a negligible learning rate, is `evaluate`'s on the checkpoint."""

import contextlib
import io
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from conftest import MAX_LENGTH, assert_user_error
from test_electra import save_as_trained

REPLACED_BIAS = 4.0  # the discriminator's head calls every token replaced: a binary cross-entropy near 4, not ln 2
FAVOURED_PIECE, FAVOURED_BIAS = 7, 6.0  # the generator's head favours one piece


@pytest.fixture(scope="module")
def checkpoint(wikitext_tokenizer, tmp_path_factory):
    """SimpleNamespace-like dict: `run`, the folder --task electra saves; `discriminator` (PyTorch weights only) and
    `generator` (TensorFlow and PyTorch weights), the same models given apart; `weights`, every weight by name."""
    import mlm_tpu  # noqa: F401  (Keras 2 behind tf.keras, before TensorFlow loads)
    from transformers import ElectraConfig

    from mlm_tpu.electra.model import ElectraPretrainer
    from mlm_tpu.electra.presets import generator_config
    from mlm_tpu.tokenizer.load import load_tokenizer

    tokenizer = load_tokenizer(str(wikitext_tokenizer[0]))
    discriminator = ElectraConfig(vocab_size=len(tokenizer), embedding_size=16, hidden_size=32, num_hidden_layers=1,
                                  num_attention_heads=2, intermediate_size=64, max_position_embeddings=MAX_LENGTH)
    model = ElectraPretrainer.from_configs(generator_config(discriminator, 0.5), discriminator, 50.0)
    model.discriminator.discriminator_predictions.dense_prediction.bias.assign([REPLACED_BIAS])
    bias = model.generator.generator_lm_head.bias
    bias.assign(np.eye(1, bias.shape[0], FAVOURED_PIECE, dtype=np.float32)[0] * FAVOURED_BIAS)
    folder = tmp_path_factory.mktemp("electra-checkpoint")
    save_as_trained(folder / "run", model, tokenizer)
    shutil.copytree(folder / "run", folder / "discriminator", ignore=shutil.ignore_patterns("generator", "tf_model.h5"))
    shutil.copytree(folder / "run" / "generator", folder / "generator")
    weights = {name: weight.numpy() for name, weight in named_weights(model).items()}
    return dict(folder=folder, run=folder / "run", discriminator=folder / "discriminator",
                generator=folder / "generator", weights=weights, tokenizer=tokenizer)


def named_weights(model):
    """Each weight of an ElectraPretrainer by its model and name below the model's scope (the shared embeddings, once
    each, under the discriminator)."""
    return {f"{part}/{weight.name.split('/', 1)[1]}": weight for part in ("discriminator", "generator")
            for weight in getattr(model, part).weights
            if part == "discriminator" or "embeddings/" not in weight.name}


def continued(checkpoint, **settings):
    """(ElectraPretrainer, log) continued_pretrainer builds for these TrainingConfig settings."""
    from mlm_tpu.electra.continued import continued_pretrainer
    from mlm_tpu.tasks import TrainingConfig

    config = TrainingConfig("train", "out", task="electra", **settings)
    with contextlib.redirect_stderr(io.StringIO()) as log:
        model = continued_pretrainer(config, checkpoint["tokenizer"], 50.0)
    return model, log.getvalue()


@pytest.mark.parametrize("given", ["run", "apart"])
def test_every_weight_is_the_checkpoints_and_the_generator_reads_the_discriminators_embeddings(checkpoint, given):
    """The folder --task electra saved (TensorFlow weights), or the pair given apart (a PyTorch-only discriminator)."""
    settings = (dict(model_name_or_path=str(checkpoint["run"])) if given == "run" else
                dict(model_name_or_path=str(checkpoint["discriminator"]),
                     generator_name_or_path=str(checkpoint["generator"])))
    model, log = continued(checkpoint, **settings)
    loaded = named_weights(model)
    assert loaded.keys() == checkpoint["weights"].keys() and len(loaded) > 30
    assert all(np.array_equal(weight.numpy(), checkpoint["weights"][name]) for name, weight in loaded.items())
    assert model.generator.electra.embeddings is model.discriminator.electra.embeddings
    assert model.generator.generator_lm_head.input_embeddings is model.discriminator.electra.embeddings
    assert "its replaced-token head" in log and "the generator reads the discriminator's embeddings (its own were " \
                                                  "the same)" in log, log


def test_a_generator_whose_embeddings_differ_reads_the_discriminators_and_the_log_says_by_how_much(checkpoint,
                                                                                                    tmp_path):
    from safetensors.numpy import load_file, save_file

    generator = tmp_path / "generator"
    shutil.copytree(checkpoint["generator"], generator, ignore=shutil.ignore_patterns("tf_model.h5"))
    weights = load_file(generator / "model.safetensors")
    weights["electra.embeddings.word_embeddings.weight"] += 0.25
    save_file(weights, generator / "model.safetensors", metadata={"format": "pt"})
    model, log = continued(checkpoint, model_name_or_path=str(checkpoint["discriminator"]),
                           generator_name_or_path=str(generator))
    assert "its own, replaced, differed by up to 0.25" in log, log
    shared = checkpoint["weights"]["discriminator/electra/embeddings/word_embeddings/weight:0"]
    assert np.array_equal(model.generator.generator_lm_head.input_embeddings.weight.numpy(), shared)


# --- bad input: one line each, nothing written ---

def refused(in_process, shards, checkpoint, tmp_path, *flags, task="electra"):
    """The error line of `train.py --task TASK flags` on the checkpoint's shards; its --output-dir stays unmade."""
    output_dir = tmp_path / "out"
    result = in_process("train", "--task", task, "--train-dataset", shards / "train", "--max-steps", 1, "--output-dir",
                       output_dir, *flags)
    error = assert_user_error(result)
    assert not output_dir.exists(), error
    return error


def test_generator_name_or_path_is_refused_without_task_electra(shards, checkpoint, tmp_path, in_process):
    error = refused(in_process, shards, checkpoint, tmp_path, "--model-name-or-path", checkpoint["generator"],
                    "--generator-name-or-path", checkpoint["generator"], task="mlm")
    assert "--generator-name-or-path is a setting of --task electra, not of --task mlm" in error


def test_a_roberta_given_to_task_electra_is_refused_saying_to_continue_it_with_task_mlm(shards, checkpoint,
                                                                                        tmp_path, in_process):
    from transformers import RobertaConfig

    RobertaConfig(vocab_size=len(checkpoint["tokenizer"]), architectures=["RobertaForMaskedLM"]).save_pretrained(
        tmp_path / "roberta")
    error = refused(in_process, shards, checkpoint, tmp_path, "--model-name-or-path", tmp_path / "roberta")
    assert "is a roberta model: continue it with --task mlm" in error


@pytest.mark.parametrize("case", ["another vocabulary", "not a masked LM"])
def test_a_generator_that_cannot_go_beside_the_discriminator_is_refused(shards, checkpoint, tmp_path, case,
                                                                        in_process):
    from transformers import ElectraConfig

    other = tmp_path / "other-vocabulary"
    config = ElectraConfig.from_pretrained(checkpoint["generator"])
    config.vocab_size += 100
    config.save_pretrained(other)
    generator, expected = {
        "another vocabulary": (other, f"has vocab_size {config.vocab_size}, the discriminator {config.vocab_size - 100}"
                                      ": the two share one embeddings layer"),
        "not a masked LM": (checkpoint["discriminator"], "holds ElectraForPreTraining, not an ELECTRA generator"),
    }[case]
    assert expected in refused(in_process, shards, checkpoint, tmp_path, "--model-name-or-path",
                               checkpoint["discriminator"], "--generator-name-or-path", generator)


@pytest.mark.parametrize("case", ["no generator", "generator as M", "generator without M", "model config",
                                  "generator size ratio"])
def test_settings_that_cannot_continue_electra_are_refused_before_anything_loads(checkpoint, case):
    """What the run's checks and its model's building refuse, here in this process (the commands' one line is the
    subprocess tests' above)."""
    from mlm_tpu.errors import UserError
    from mlm_tpu.tasks import TrainingConfig, make_task
    from mlm_tpu.training.checks import check_config

    discriminator = dict(model_name_or_path=str(checkpoint["discriminator"]))
    generator = dict(generator_name_or_path=str(checkpoint["generator"]))
    settings, expected = {
        "no generator": (discriminator, "has no generator/ folder (it was not saved by --task electra); give its "
                                        "generator with --generator-name-or-path"),
        "generator as M": (dict(model_name_or_path=str(checkpoint["generator"])),
                           "is an ELECTRA generator (ElectraForMaskedLM); give the discriminator"),
        "generator without M": (generator, "--generator-name-or-path continues a generator beside the discriminator "
                                           "of --model-name-or-path"),
        "model config": ({**discriminator, **generator, "model_config": "electra-tiny"}, "drop --model-config"),
        "generator size ratio": ({**discriminator, **generator, "generator_size_ratio": 0.5},
                                 "drop --generator-size-ratio"),
    }[case]
    config = TrainingConfig("train", "out", task="electra", **settings)
    with pytest.raises(UserError, match=re.escape(expected)):
        check_config(config, make_task("electra"))
        continued(checkpoint, **settings)


# --- end to end: a continued run starts at the checkpoint's loss ---

SCORES = ("generator_loss", "generator_accuracy", "discriminator_loss", "discriminator_accuracy")


def validated(**settings):
    """The TrainingResult's validation scores of one step at a learning rate too small to move a float32 weight."""
    import mlm_tpu

    with contextlib.redirect_stderr(io.StringIO()) as log:
        result = mlm_tpu.train_model(task="electra", max_steps=1, learning_rate=1e-15, per_replica_batch_size=8,
                                     **settings)
    return result.epochs[-1]["validation"], log.getvalue()


@pytest.mark.slow  # trains twice, evaluates once
def test_a_continued_run_starts_at_the_checkpoints_loss(checkpoint, shards, tmp_path):
    import mlm_tpu

    evaluated = mlm_tpu.evaluate_model(str(checkpoint["run"]), str(shards / "validation")).scores
    # the checkpoint's: most tokens are original, each costing about softplus(4) = 4.02 (the replaced ones about 0),
    # give or take what the random weights add; far from a fresh model's ln 2
    assert evaluated["discriminator_loss"] > REPLACED_BIAS / 2
    data = dict(train_dataset=str(shards / "train"), eval_dataset=str(shards / "validation"))
    for settings in (dict(model_name_or_path=str(checkpoint["run"])),
                     dict(model_name_or_path=str(checkpoint["discriminator"]),
                          generator_name_or_path=str(checkpoint["generator"]))):
        scores, log = validated(output_dir=str(tmp_path / str(len(settings))), **data, **settings)
        assert "ELECTRA: continuing the discriminator of" in log, log[-2000:]
        assert {name: scores[name] for name in SCORES} == pytest.approx(
            {name: evaluated[name] for name in SCORES}, rel=1e-4), log[-2000:]
    saved = Path(tmp_path / "2")
    assert (saved / "generator" / "model.safetensors").is_file() and (saved / "model.safetensors").is_file()
    assert f"ELECTRA discriminator continued from {checkpoint['discriminator']}" in (saved / "README.md").read_text()
