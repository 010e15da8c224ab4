"""DeBERTa-v3's replaced-token detection (`--task electra --model-config deberta-v3-*`) and its gradient-disentangled
embedding sharing (GDES).

Quick: the presets are microsoft/DeBERTa's rtd_*.json shapes; after a step E_G has moved by the generator's gradient
alone (as a generator-only step moves it, within 1e-6) and E_Δ by the discriminator's alone, where plain sharing
mixes the two; the saved discriminator holds E_G + E_Δ and loading the folders reads the same; bad input is one error
line, nothing written. Slow: a run killed (SIGKILL) and started again ends bit-identical to the uninterrupted run, and
its discriminator loads in transformers 5 as DebertaV2Model and DebertaV2ForSequenceClassification with every
encoder weight, its hidden states within 1e-4 of mlm_tpu's; a DeBERTa-v3 folder made by transformers 5 (PyTorch
weights only) is continued, its discriminator's hidden states before the first step within 1e-4 of transformers
5's."""

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import MAX_LENGTH, assert_user_error, pytorch_python
from test_electra import save_as_trained
from test_resume import resumed_at, step_losses, train_and_kill_after_backup

PYTORCH_SIDE = Path(__file__).parent / "deberta_pytorch.py"
TEXT = "The game was released in Japan and later in Europe ."


def tiny_pretrainer(sharing="gdes"):
    import mlm_tpu  # noqa: F401  (Keras 2 behind tf.keras, before TensorFlow loads)
    from transformers import DebertaV2Config

    from mlm_tpu.electra import deberta
    from mlm_tpu.electra.model import ElectraPretrainer

    config = DebertaV2Config(**{**deberta.PRESETS["deberta-v3-tiny"], "vocab_size": 2000,
                                "max_position_embeddings": MAX_LENGTH, "hidden_dropout_prob": 0.0,
                                "attention_probs_dropout_prob": 0.0})
    return ElectraPretrainer.from_models(deberta.new_generator(deberta.generator_config(config)),
                                         deberta.new_discriminator(config), 50.0, sharing)


def test_the_presets_are_the_rtd_configs_shapes_and_the_generator_half_their_depth():
    from mlm_tpu.electra.deberta import PRESETS, generator_config
    from transformers import DebertaV2Config

    shapes = {name: (preset["hidden_size"], preset["num_hidden_layers"], preset["num_attention_heads"],
                     preset["intermediate_size"]) for name, preset in PRESETS.items() if name != "deberta-v3-tiny"}
    assert shapes == {"deberta-v3-xsmall": (384, 12, 6, 1536), "deberta-v3-small": (768, 6, 12, 3072),
                      "deberta-v3-base": (768, 12, 12, 3072), "deberta-v3-large": (1024, 24, 16, 4096)}
    for preset in PRESETS.values():
        config = DebertaV2Config(**preset)
        assert (config.relative_attention, config.share_att_key, config.pos_att_type, config.position_biased_input,
                config.type_vocab_size, config.layer_norm_eps, config.norm_rel_ebd) == (
            True, True, ["p2c", "c2p"], False, 0, 1e-7, "layer_norm")
    assert PRESETS["deberta-v3-base"]["position_buckets"] == 256
    generators = {name: generator_config(DebertaV2Config(**preset)) for name, preset in PRESETS.items()}
    assert {name: (config.num_hidden_layers, config.hidden_size) for name, config in generators.items()} == {
        "deberta-v3-tiny": (1, 64), "deberta-v3-xsmall": (6, 384), "deberta-v3-small": (3, 768),
        "deberta-v3-base": (6, 768), "deberta-v3-large": (12, 1024)}


def test_the_deberta_v3_recipe_is_settings_the_trainer_takes_each_with_its_source():
    from mlm_tpu.cli.train import build_config, build_parser
    from mlm_tpu.configuration import check_ranges
    from mlm_tpu.tasks import check_settings
    from mlm_tpu.training.recipes import RECIPES

    config = build_config(build_parser().parse_args(["--train-dataset", "s", "--output-dir", "o", "--recipe",
                                                     "deberta-v3"]))
    check_ranges(config)
    check_settings(config)
    for key, value in RECIPES["deberta-v3"].settings.items():
        assert getattr(config, key) == value and RECIPES["deberta-v3"].source_of(key), key
    assert (config.task, config.embedding_sharing, config.learning_rate) == ("electra", "gdes", 1e-4)


def batch_of(seed=0):
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    labels = np.where(rng.random((4, 16)) < 0.3, rng.integers(5, 2000, (4, 16)), -100)
    return {"input_ids": tf.constant(np.where(labels >= 0, 4, rng.integers(5, 2000, (4, 16))), tf.int32),
            "attention_mask": tf.ones([4, 16], tf.int32), "labels": tf.constant(labels, tf.int32),
            "replacement_draws": tf.random.stateless_uniform([4, 16], seed=[3, seed])}


def tables_after_a_step(model, batch, terms):
    """(E_G, the discriminator's own table) after one SGD step (rate 1) on the sum of the loss's `terms` (0: the
    generator's, 1: λ x the discriminator's)."""
    import tensorflow as tf

    from mlm_tpu.electra.sharing import token_table

    generator_table, discriminator_table = token_table(model.generator), token_table(model.discriminator)
    before = [weight.numpy() for weight in (generator_table, discriminator_table)]
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.gather(model.on_batch(batch, training=True).loss, terms))
    gradients = tape.gradient(loss, [generator_table, discriminator_table])
    after = [value - (0 if gradient is None else tf.convert_to_tensor(gradient).numpy())
             for value, gradient in zip(before, gradients)]
    return after


def test_gdes_moves_the_generators_embeddings_by_its_gradient_alone_and_e_delta_by_the_discriminators():
    model, batch = tiny_pretrainer(), batch_of()
    from mlm_tpu.electra.sharing import token_table

    assert not np.any(token_table(model.discriminator).numpy())  # E_Δ starts at zero
    both = tables_after_a_step(model, batch, [0, 1])
    generator_only = tables_after_a_step(model, batch, [0])
    discriminator_only = tables_after_a_step(model, batch, [1])
    start = token_table(model.generator).numpy()
    assert np.abs(both[0] - start).max() > 1e-4  # the step moved E_G ...
    np.testing.assert_allclose(both[0], generator_only[0], atol=1e-6, rtol=0)  # ... as the generator's loss alone
    assert np.array_equal(discriminator_only[0], start)  # the RTD loss never reaches E_G
    assert np.abs(both[1]).max() > 1e-6 and not np.any(generator_only[1])  # E_Δ moved by the discriminator only
    np.testing.assert_allclose(both[1], discriminator_only[1], atol=1e-6, rtol=0)

    shared = tiny_pretrainer("shared")  # plain sharing: the discriminator's loss moves the one table too
    mixed, alone = tables_after_a_step(shared, batch, [0, 1])[0], tables_after_a_step(shared, batch, [0])[0]
    assert np.abs(mixed - alone).max() > 1e-4


def test_the_saved_discriminator_holds_e_g_plus_e_delta_and_loading_reads_the_same(wikitext_tokenizer, tmp_path):
    import tensorflow as tf
    from safetensors.numpy import load_file

    from mlm_tpu.electra.folders import load_electra_folders
    from mlm_tpu.electra.sharing import token_table
    from mlm_tpu.tokenizer.load import load_tokenizer

    model, tokenizer = tiny_pretrainer(), load_tokenizer(str(wikitext_tokenizer[0]))
    for weight in model.trainable_variables:  # a step's worth of change everywhere, E_Δ included
        weight.assign_add(tf.random.stateless_normal(weight.shape, seed=[1, len(weight.name)]) * 0.01)
    generator_table, delta = token_table(model.generator).numpy(), token_table(model.discriminator).numpy()
    save_as_trained(tmp_path / "run", model, tokenizer)
    assert np.array_equal(token_table(model.discriminator).numpy(), delta)  # E_Δ put back after saving
    saved = load_file(tmp_path / "run" / "model.safetensors")
    table = next(value for name, value in saved.items() if name.endswith("embeddings.word_embeddings.weight"))
    np.testing.assert_allclose(table, generator_table + delta, atol=1e-7, rtol=0)
    assert json.loads((tmp_path / "run" / "config.json").read_text())["architectures"] == ["DebertaV2Model"]
    assert json.loads((tmp_path / "run" / "generator" / "config.json").read_text())["architectures"] == [
        "DebertaV2ForMaskedLM"]
    assert (tmp_path / "run" / "replaced_token_head.safetensors").is_file()

    check_fine_tuning_starts_from_it(tmp_path / "run", model.discriminator.encoder)
    loaded, _ = load_electra_folders(str(tmp_path / "run"))
    batch = batch_of(1)
    expected, found = (pretrainer.on_batch(batch, training=False) for pretrainer in (model, loaded))
    np.testing.assert_allclose(found.logits.numpy(), expected.logits.numpy(), atol=1e-5)
    np.testing.assert_allclose(found.loss.numpy(), expected.loss.numpy(), rtol=1e-5)


def check_fine_tuning_starts_from_it(folder, encoder):
    """`--task sequence-classification --model-name-or-path <folder>`: the encoder line's checks take the saved
    discriminator, and every weight of its encoder is the saved one (merged embeddings included), the head alone new."""
    from transformers import AutoConfig

    from mlm_tpu.model_folder.configs import read_model_config
    from mlm_tpu.model_folder.loading import load_with_new_head
    from mlm_tpu.tasks import make_task

    task = make_task("sequence-classification")
    task.check_base(read_model_config(str(folder), "--model-name-or-path"), f"--model-name-or-path {folder}")
    model, new = load_with_new_head(str(folder), task.head_class, AutoConfig.from_pretrained(folder, num_labels=3),
                                    "--model-name-or-path")
    assert new and all(name.startswith(("classifier.", "pooler.")) for name in new), new
    saved = {weight.name.split("/", 1)[1]: weight.numpy() for weight in encoder.weights}
    loaded = {weight.name.split("/", 1)[1]: weight.numpy() for weight in model.deberta.weights}
    assert loaded.keys() == saved.keys() and len(loaded) > 10
    embeddings = "deberta/embeddings/word_embeddings/weight:0"
    assert all(np.array_equal(loaded[name], saved[name]) for name in saved if name != embeddings)


# --- bad input: one line each, nothing written ---

@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """The configs of DeBERTa-v2 folders (what the refusals read, before any weight): a discriminator of 2 layers,
    generators too deep, of another width and of another vocabulary, and a DeBERTa v1 model."""
    from transformers import DebertaConfig, DebertaV2Config

    from mlm_tpu.electra.deberta import PRESETS

    root = tmp_path_factory.mktemp("deberta-folders")
    base = {**PRESETS["deberta-v3-tiny"], "vocab_size": 2000, "max_position_embeddings": MAX_LENGTH}
    for name, settings in {"discriminator": base, "deeper": {**base, "num_hidden_layers": 3},
                           "wider": {**base, "hidden_size": 128, "intermediate_size": 512},
                           "vocabulary": {**base, "vocab_size": 2008}}.items():
        DebertaV2Config(**settings, architectures=["DebertaV2ForMaskedLM"]).save_pretrained(root / name)
    DebertaConfig(vocab_size=2000, architectures=["DebertaForMaskedLM"]).save_pretrained(root / "v1")
    return root


def refused(in_process, shards, tmp_path, *flags):
    output_dir = tmp_path / "out"
    result = in_process("train", "--task", "electra", "--train-dataset", shards / "train", "--max-steps", 1,
                        "--output-dir", output_dir, *flags)
    error = assert_user_error(result)
    assert not output_dir.exists(), error
    return error


@pytest.mark.parametrize("case, flags, phrase", [
    ("deeper", ("--generator-name-or-path", "deeper"), "has 3 layers, the discriminator 2"),
    ("wider", ("--generator-name-or-path", "wider"), "has hidden_size 128, the discriminator 64"),
    ("vocabulary", ("--generator-name-or-path", "vocabulary"), "has vocab_size 2008, the discriminator 2000"),
    ("v1", (), "is a DeBERTa v1 model (model type deberta)"),
])
def test_a_pair_that_cannot_train_as_deberta_v3_is_refused(in_process, shards, wikitext_tokenizer, folders, tmp_path,
                                                           case, flags, phrase):
    discriminator = folders / ("v1" if case == "v1" else "discriminator")
    flags = [str(folders / flag) if flag in ("deeper", "wider", "vocabulary") else flag for flag in flags]
    assert phrase in refused(in_process, shards, tmp_path, "--model-name-or-path", discriminator, "--tokenizer",
                             wikitext_tokenizer[0], *flags)


def test_gdes_on_electra_is_refused(in_process, shards, tmp_path):
    error = refused(in_process, shards, tmp_path, "--model-config", "electra-tiny", "--embedding-sharing", "gdes")
    assert "--embedding-sharing gdes is DeBERTa-v3's" in error


# --- end to end: trained for real ---

DEBERTA_RUN = dict(task="electra", max_length=MAX_LENGTH, model_config="deberta-v3-tiny", learning_rate=3e-3,
                   per_replica_batch_size=16, max_steps=8, steps_per_execution=2, backup_steps=4, logging_steps=1)


@pytest.fixture(scope="module")
def deberta_runs(shards, wikitext_tokenizer, tmp_path_factory):
    """The uninterrupted run, and a run killed (`python train.py`, SIGKILL) after its backup of step 4, then started
    again; their parent folder."""
    import contextlib
    import io

    import mlm_tpu

    folder, tokenizer = tmp_path_factory.mktemp("deberta"), wikitext_tokenizer[0]
    flags = [item for name, value in DEBERTA_RUN.items() for item in (f"--{name.replace('_', '-')}", value)]
    train_and_kill_after_backup([*flags, "--train-dataset", shards / "validation", "--tokenizer", tokenizer,
                                 "--output-dir", folder / "resumed"], 4, folder / "killed.log")
    import huggingface_hub.constants

    for run in ("resumed", "uninterrupted"):
        with contextlib.redirect_stderr(io.StringIO()) as log, pytest.MonkeyPatch.context() as patch:
            patch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # a preset's name is no Hub model
            mlm_tpu.train_model(str(shards / "validation"), str(folder / run), tokenizer=str(tokenizer), **DEBERTA_RUN)
        if run == "resumed":
            assert resumed_at(log.getvalue()) >= 4, log.getvalue()[-3000:]
    return folder


@pytest.mark.slow  # trains (the module's runs)
def test_a_deberta_v3_run_killed_and_started_again_ends_bit_identical(deberta_runs):
    from safetensors.numpy import load_file

    for file in ("model.safetensors", "generator/model.safetensors", "replaced_token_head.safetensors"):
        expected, got = (load_file(deberta_runs / run / file) for run in ("uninterrupted", "resumed"))
        assert expected.keys() == got.keys() and len(expected) >= 6
        assert all(np.array_equal(value, got[name]) for name, value in expected.items()), file
    assert step_losses(deberta_runs / "resumed") == step_losses(deberta_runs / "uninterrupted")


def tensorflow_hidden_states(folder: Path, path: Path) -> None:
    """mlm_tpu's DeBERTa encoder of `folder` on TEXT: inputs and hidden states saved to `path` for the PyTorch side."""
    from transformers import TFDebertaV2Model

    from mlm_tpu.model_folder.loading import load_pretrained

    model, tokenizer = load_pretrained(str(folder), TFDebertaV2Model)
    inputs = tokenizer([TEXT], return_tensors="np")
    hidden = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"]).last_hidden_state
    np.savez(path, input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"], hidden=hidden.numpy())


def pytorch_side(*arguments) -> dict:
    result = subprocess.run([pytorch_python(), str(PYTORCH_SIDE), *map(str, arguments)], capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if lines else {}


@pytest.mark.slow  # trains (the module's runs)
def test_the_discriminator_loads_in_transformers_5_with_every_encoder_weight(deberta_runs, tmp_path):
    folder = deberta_runs / "uninterrupted"
    tensorflow_hidden_states(folder, tmp_path / "inputs.npz")
    found = pytorch_side("check", folder, tmp_path / "inputs.npz")
    assert found["missing"]["DebertaV2Model"] == [], found
    assert all(name.startswith(("classifier.", "pooler.")) for name in
               found["missing"]["DebertaV2ForSequenceClassification"]), found  # the new head alone
    assert found["max_abs_diff"] < 1e-4, found


@pytest.mark.slow  # a folder made by transformers 5, continued
def test_a_transformers_5_deberta_v3_folder_continues_from_its_own_hidden_states(wikitext_tokenizer, tmp_path):
    from types import SimpleNamespace

    from mlm_tpu.electra.deberta_continued import continued_deberta_pretrainer
    from mlm_tpu.electra.sharing import discriminator_inputs
    from mlm_tpu.tokenizer.load import load_tokenizer

    pytorch_side("make", tmp_path / "v3", wikitext_tokenizer[0])
    assert not (tmp_path / "v3" / "tf_model.h5").exists()  # PyTorch weights only, as the Hub's checkpoints
    tokenizer = load_tokenizer(str(tmp_path / "v3"))
    config = SimpleNamespace(model_name_or_path=str(tmp_path / "v3"), generator_name_or_path=None,
                             config_overrides=None)
    model = continued_deberta_pretrainer(config, tokenizer, 50.0, "gdes")
    inputs = tokenizer([TEXT], return_tensors="np")
    read = discriminator_inputs("gdes", model.generator, model.discriminator, inputs["input_ids"])
    hidden = model.discriminator(**read, attention_mask=inputs["attention_mask"]).last_hidden_state
    np.savez(tmp_path / "inputs.npz", input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"],
             hidden=hidden.numpy())
    found = pytorch_side("check", tmp_path / "v3", tmp_path / "inputs.npz")
    assert found["max_abs_diff"] < 1e-4, found
