"""--recipe NAME (training/recipes.py): each recipe is settings the trainer takes, each with its source; the flags
override it and the log marks what they override; `--recipe dapt` is the DAPT/TAPT script's optimizer and
training_args.json records it; a run's training_args.json replays without the recipe's table."""

import json

import numpy as np
import pytest

from conftest import assert_user_error

DAPT = {"optimizer": "adamw", "lr_schedule": "linear", "adam_beta1": 0.9, "adam_beta2": 0.98, "adam_epsilon": 1e-6,
        "weight_decay_rate": 0.01, "max_grad_norm": 1.0, "warmup_ratio": 0.06, "warmup_steps": None,
        "learning_rate": 5e-4, "max_steps": 12_500}


def config_of(*flags):
    from mlm_tpu.cli.train import build_config, build_parser

    return build_config(build_parser().parse_args(["--train-dataset", "s", "--output-dir", "o", *map(str, flags)]))


@pytest.mark.parametrize("name", ["bert", "roberta", "dapt", "tapt", "electra", "t5", "cramming", "modernbert",
                                  "modernbert-context-extension", "modernbert-decay"])
def test_each_recipe_is_settings_the_trainer_takes_each_with_its_source(name):
    from mlm_tpu.configuration import check_ranges
    from mlm_tpu.tasks import check_settings
    from mlm_tpu.training.optimizers import with_schedule_defaults
    from mlm_tpu.training.recipes import RECIPES

    recipe = RECIPES[name]
    config = with_schedule_defaults(config_of("--recipe", name))
    check_ranges(config)
    check_settings(config)
    for key, value in recipe.settings.items():
        assert getattr(config, key) == value, key
        assert recipe.source_of(key)  # a source for every value
    batch = config.per_replica_batch_size * config.gradient_accumulation_steps
    assert batch in (256, 8192, 2048, 128, 4608, 576)


def test_recipe_dapt_is_the_dapt_scripts_optimizer_and_flags_override_it(caplog):
    config = config_of("--recipe", "dapt", "--max-steps", 100)
    assert {key: getattr(config, key) for key in DAPT} == {**DAPT, "max_steps": 100}
    assert config.per_replica_batch_size * config.gradient_accumulation_steps == 2048
    lines = caplog.text.splitlines()
    assert any("--adam-beta2 0.98" in line and "overridden" not in line for line in lines)
    assert any("--max-steps 12500  (overridden: 100)" in line for line in lines), caplog.text


def test_modernberts_token_settings_are_counted_in_tokens_seen_through_its_batch_warmup():
    """ModernBERT's yaml states its warm-up (3B tokens) and duration (1,719B) in tokens seen, while its batch grows
    from 768 to 4,608 rows over the first 50B: at the full batch, 636 steps were 0.5B tokens seen and 364,306 steps
    1,669B. The trainer's own plan of the recipe's batch warm-up (rows of 1,024 tokens) reaches each at its step."""
    from mlm_tpu.training.batch_warmup import plan_warmup

    config = config_of("--recipe", "modernbert")
    warmup = plan_warmup(config, 4608, 16, 1024)

    def seen(steps):
        return warmup.examples(0, steps) * 1024

    assert seen(config.warmup_steps - 1) < 3_000_000_000 <= seen(config.warmup_steps)
    assert seen(config.max_steps - 1) < 1_719_000_000_000 <= seen(config.max_steps)
    assert (config.warmup_steps, config.max_steps) == (3_815, 374_901)
    assert seen(warmup.end - 1) < 50_000_000_000 <= seen(warmup.end)


@pytest.mark.parametrize("peak", [8e-4, 4e-4, 2e-3])
def test_modernberts_fully_decoupled_decay_is_relative_to_the_peak_the_run_uses(peak, caplog):
    """optimi's decouple_lr multiplies a weight by 1 - (rate / peak) x 1e-5, the peak being the run's: at the peak
    rate a step decays it by 1e-5 whatever --learning-rate gives (not by 1e-5 x peak / 8e-4)."""
    import tensorflow as tf

    from mlm_tpu.training.optimizers import make_optimizer, with_schedule_defaults

    config = with_schedule_defaults(config_of("--recipe", "modernbert", "--learning-rate", peak, "--warmup-steps", 0))
    assert config.weight_decay_rate == pytest.approx(1e-5 / peak)
    weight = tf.Variable(tf.ones([2, 2]))
    make_optimizer(config, 10).apply_gradients([(tf.zeros([2, 2]), weight)])  # zero gradients: only the decay acts
    np.testing.assert_allclose(weight.numpy(), 1 - 1e-5, atol=1e-7)
    if peak != 8e-4:
        assert f"--weight-decay-rate {1e-5 / peak:g} (fully decoupled: 1e-05 / the peak --learning-rate {peak:g})" \
            in caplog.text
    given = config_of("--recipe", "modernbert", "--learning-rate", peak, "--weight-decay-rate", 0.5)
    assert given.weight_decay_rate == 0.5  # what the user gives wins


def test_modernberts_first_phase_builds_its_shape_at_a_rotary_base_of_10000_from_scratch_only(caplog):
    """The pretraining yaml's model: ModernBERT-base with rotary_emb_base 10,000. A user's overrides join the
    recipe's, theirs winning name by name; a run continuing a checkpoint keeps the checkpoint's shape and bases, and
    the log says what was not applied."""
    scratch = config_of("--recipe", "modernbert")
    assert (scratch.model_config, scratch.config_overrides) == ("modernbert-base", "global_rope_theta=10000")
    tiny = config_of("--recipe", "modernbert", "--model-config", "modernbert-tiny", "--config-overrides",
                     "intermediate_size=144,global_rope_theta=20000")
    assert (tiny.model_config, tiny.config_overrides) == ("modernbert-tiny",
                                                          "global_rope_theta=20000,intermediate_size=144")
    continued = config_of("--recipe", "modernbert", "--model-name-or-path", "ModernBERT-base")
    assert (continued.model_config, continued.config_overrides) == (None, None)
    assert "not applied to --model-name-or-path ModernBERT-base, which keeps its own (from scratch only): " \
           "--model-config modernbert-base, --config-overrides global_rope_theta=10000" in caplog.text


@pytest.mark.parametrize("name, tokens", [("modernbert-context-extension", 250_000_000_000),
                                          ("modernbert-decay", 50_000_000_000)])
def test_modernberts_phases_at_8192_tokens_see_their_published_tokens_and_follow_the_peak(name, tokens):
    """250B then 50B tokens at 576 rows of 8,192 (no batch warm-up); the decay ends at 0.001 x the peak, the one the
    run uses; both raise the positions and the global rotary base on the checkpoint they continue."""
    from mlm_tpu.training.optimizers import schedule_of, with_schedule_defaults

    config = with_schedule_defaults(config_of("--recipe", name, "--model-name-or-path", "runs/pretrained"))
    rows = config.per_replica_batch_size * config.gradient_accumulation_steps
    assert (rows, config.max_length, config.warmup_steps) == (576, 8192, 0)
    assert (config.max_steps - 1) * rows * 8192 < tokens <= config.max_steps * rows * 8192
    assert config.config_overrides == "max_position_embeddings=8192,global_rope_theta=160000"
    for peak in (3e-4, 1e-4):
        config = with_schedule_defaults(config_of("--recipe", name, "--learning-rate", peak, "--max-steps", 100))
        schedule = schedule_of(config, 100)
        rates = [float(schedule(step)) for step in (0, 50, 100)]
        if name == "modernbert-decay":
            floor = 0.001 * peak  # float32 rates
            assert rates == pytest.approx([peak, floor + (peak - floor) * (1 - 0.5 ** 0.5), floor], rel=1e-4)
        else:
            assert rates == pytest.approx([peak] * 3, rel=1e-6)
        assert config.weight_decay_rate == pytest.approx(1e-5 / peak)


def test_training_args_replays_without_the_recipes_table(tmp_path, monkeypatch):
    """A run's training_args.json holds every resolved value: replayed after the table changed, it is the same run."""
    from dataclasses import asdict

    from mlm_tpu.configuration import to_dict
    from mlm_tpu.training import recipes

    config = config_of("--recipe", "dapt")
    (tmp_path / "training_args.json").write_text(json.dumps(to_dict(config)))
    changed = recipes.Recipe("changed", {**recipes.RECIPES["dapt"].settings, "learning_rate": 1.0, "max_steps": 3},
                             recipes.RECIPES["dapt"].sources)
    monkeypatch.setitem(recipes.RECIPES, "dapt", changed)
    replayed = config_of("--config", tmp_path / "training_args.json")
    assert asdict(replayed) == asdict(config)


@pytest.mark.slow
def test_a_run_with_recipe_dapt_records_its_values_in_training_args(in_process, shards, wikitext_tokenizer,
                                                                    tmp_path):
    output_dir = tmp_path / "dapt"
    result = in_process("train", "--recipe", "dapt", "--train-dataset", shards / "train", "--tokenizer",
                        wikitext_tokenizer[0], "--model-config", "tiny", "--max-steps", 2,
                        "--per-replica-batch-size", 4, "--gradient-accumulation-steps", 2,
                        "--output-dir", output_dir)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Recipe dapt" in result.stderr and "--max-steps 12500  (overridden: 2)" in result.stderr
    recorded = json.loads((output_dir / "training_args.json").read_text())
    assert {key: recorded[key] for key in DAPT} == {**DAPT, "max_steps": 2}
    assert recorded["recipe"] == "dapt"


def test_an_unknown_recipe_is_one_line(in_process, tmp_path):
    result = in_process("train", "--recipe", "bort", "--train-dataset", tmp_path, "--output-dir", tmp_path / "o")
    assert_user_error(result, "--recipe bort: no such recipe; the recipes are bert, roberta, dapt, tapt")


def test_the_recipes_page_shows_every_value_of_the_table():
    """docs/guides/recipes.md's tables were written from RECIPES: each value is on its page, under its recipe."""
    from conftest import REPO_ROOT
    from mlm_tpu.training.recipes import RECIPES

    page = (REPO_ROOT / "docs" / "guides" / "recipes.md").read_text(encoding="utf-8")
    sections = page.split("\n### ")[1:]
    for name, recipe in RECIPES.items():
        section = next(text for text in sections if text.startswith(f"{name}: "))
        for key, value in recipe.settings.items():
            shown = ("none (no clipping)" if value is None else f"{value:g}" if isinstance(value, float)
                     else f"{value:,}" if isinstance(value, int) else value)
            assert f"| `--{key.replace('_', '-')}` | {shown} |" in section, (name, key)
