"""`--recipe NAME`: the settings of a published pretraining recipe, under what the user gives.

A recipe is a table of settings (the flags' names with underscores), each with the source it comes from. It is
resolved on the plain values of a run before its config is built: the dataclass defaults, then the recipe's values,
then a config file's, then the flags' (what the user gives always wins). training_args.json records every resolved
value, so `--config` replays a run without this table (its `recipe` is kept as a record: every value in the file
overrides it). docs/guides/recipes.md is the table in words, with each value's source.

The batch: a recipe's global batch B is given as --per-replica-batch-size 16 x --gradient-accumulation-steps B / 16,
the batch on one replica; on R replicas the global batch is R times that unless the accumulation is divided by R
(the log at start says the global batch). No TensorFlow here: a recipe is resolved before it loads.

A setting a recipe states in tokens (ModernBERT's warm-up and duration) is counted in tokens seen, as its trainer
counts them: through the batch-size warm-up's smaller batches, at the published batch and row length
(tokens_to_steps). A fully decoupled weight decay (optimi's decouple_lr, the decay relative to the peak rate run) is
resolved against the run's --learning-rate (Recipe.decoupled_weight_decay).
"""

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from mlm_tpu.errors import UserError
from mlm_tpu.training.batch_warmup import warmup_schedule

MICRO_BATCH = 16  # the per-replica batch a recipe's global batch is accumulated from


@dataclass(frozen=True)
class Recipe:
    """A published recipe: what it is, its settings and where each comes from (a source per group of settings)."""

    title: str
    settings: Dict[str, Any]
    sources: Tuple[Tuple[Tuple[str, ...], str], ...]  # (the settings, the source that gives them)
    # optimi's decouple_lr decay: each step multiplies a weight by 1 - (rate / peak) x it, so weight_decay_rate (x
    # rate) is it / the peak the run uses, whatever --learning-rate gives
    decoupled_weight_decay: Optional[float] = None
    # settings of the model a recipe builds from scratch (its shape, its rotary base): a run that continues a
    # checkpoint (--model-name-or-path) keeps the checkpoint's own
    scratch_settings: Dict[str, Any] = field(default_factory=dict)

    def source_of(self, name: str) -> str:
        return next(source for names, source in self.sources if name in names)


def batch_of(size: int) -> Dict[str, int]:
    """A global batch of `size` rows as a recipe sets it: MICRO_BATCH per replica, accumulated on one replica."""
    return {"per_replica_batch_size": MICRO_BATCH, "gradient_accumulation_steps": size // MICRO_BATCH}


BATCH = ("per_replica_batch_size", "gradient_accumulation_steps")
BERT_PAPER = "Devlin et al. 2019 (arXiv:1810.04805), appendix A.2"
BERT_CODE = "google-research/bert, optimization.py (AdamWeightDecayOptimizer, clip_by_global_norm)"
DAPT_SCRIPT = ("allenai/dont-stop-pretraining, scripts/run_language_modeling.py and ADAPTIVE_PRETRAINING.md "
               "(Gururangan et al. 2020)")
DAPT_PAPER = ("Gururangan et al. 2020 (arXiv:2004.10964), appendix, the table of hyperparameters for domain- and "
              "task-adaptive pretraining")
DAPT_OPTIMIZER = {"optimizer": "adamw", "lr_schedule": "linear", "adam_beta1": 0.9, "adam_beta2": 0.98,
                  "adam_epsilon": 1e-6, "weight_decay_rate": 0.01, "max_grad_norm": 1.0, "task": "mlm",
                  "mlm_probability": 0.15}
DAPT_WARMUP = {"warmup_ratio": 0.06}  # the paper's; the released script's default is no warm-up
MODERNBERT_YAML = "AnswerDotAI/ModernBERT, yamls/modernbert/modernbert-base-pretrain.yaml"
MODERNBERT_PEAK = 8e-4
MODERNBERT_WEIGHT_DECAY = 1e-5  # fully decoupled
MODERNBERT_ROW_TOKENS, MODERNBERT_BATCH = 1024, 4608
MODERNBERT_BATCH_WARMUP = {"batch_size_warmup_min_size": 768, "batch_size_warmup_tokens": 50_000_000_000}


MODERNBERT_EXTENSION_YAML = "AnswerDotAI/ModernBERT, yamls/modernbert/modernbert-base-context-extension.yaml"
MODERNBERT_DECAY_YAML = "AnswerDotAI/ModernBERT, yamls/modernbert/modernbert-base-learning-rate-decay.yaml"
MODERNBERT_PAPER = "Warner et al. 2024 (arXiv:2412.13663)"
MODERNBERT_LONG_PEAK = 3e-4
MODERNBERT_LONG_ROW_TOKENS, MODERNBERT_LONG_BATCH = 8192, 576
MODERNBERT_LONG_CONFIG = "max_position_embeddings=8192,global_rope_theta=160000"


def tokens_to_steps(tokens: int, batch: int, row_tokens: int, batch_warmup: Mapping[str, int]) -> int:
    """The steps in which a run of global batch `batch` and rows of `row_tokens` tokens sees `tokens` tokens, its
    batch-size warm-up's smaller batches counted as they are."""
    warmup = warmup_schedule(batch_warmup["batch_size_warmup_min_size"], batch, row_tokens,
                             batch_warmup["batch_size_warmup_tokens"])
    return warmup.steps_to_see(math.ceil(tokens / row_tokens))


def modernbert_steps(tokens: int) -> int:
    """Steps of ModernBERT's published run (batch 4,608 rows of 1,024 tokens, its batch warm-up) to see `tokens`."""
    return tokens_to_steps(tokens, MODERNBERT_BATCH, MODERNBERT_ROW_TOKENS, MODERNBERT_BATCH_WARMUP)


def modernbert_long_phase(title: str, tokens: int, schedule: Dict[str, Any], schedule_source: str) -> Recipe:
    """One of ModernBERT's two phases at 8,192 tokens (context extension, then the decay): the same optimizer, batch
    and rotary bases, each continuing the run before it; `tokens` seen at the published batch (no batch warm-up)."""
    steps = math.ceil(tokens / (MODERNBERT_LONG_BATCH * MODERNBERT_LONG_ROW_TOKENS))
    optimizer = {"task": "mlm", "optimizer": "stableadamw", "learning_rate": MODERNBERT_LONG_PEAK, "adam_beta1": 0.9,
                 "adam_beta2": 0.98, "adam_epsilon": 1e-6, "max_grad_norm": None, "mlm_probability": 0.3,
                 "eval_mlm_probability": 0.15,
                 "weight_decay_rate": MODERNBERT_WEIGHT_DECAY / MODERNBERT_LONG_PEAK}
    yamls = f"{MODERNBERT_EXTENSION_YAML} and {MODERNBERT_DECAY_YAML.rsplit('/', 1)[1]}"
    return Recipe(title, {
        **optimizer, "max_length": MODERNBERT_LONG_ROW_TOKENS, "config_overrides": MODERNBERT_LONG_CONFIG,
        **schedule, "warmup_steps": 0, "max_steps": steps, **batch_of(MODERNBERT_LONG_BATCH)}, (
        ((*optimizer,), f"{yamls} (as ClimateModernBERT/ClimateModernBERT's continue_pretrain/ copies them, whose "
                        "durations are their own): decoupled_stableadamw lr 3e-4, betas (0.9, 0.98), eps 1e-6, "
                        "weight_decay 1e-5 fully decoupled (1e-5 / --learning-rate here: 0.0333 at 3e-4), no gradient "
                        "clipping, mlm_probability 0.3, validation at 0.15"),
        (("max_length", "config_overrides"),
         f"{yamls}: max_seq_len 8192, rotary_emb_base 160000.0 (the global layers'; "
         "local_attn_rotary_emb_base stays 10000.0), loaded from the run before (load_path, reset_time: true)"),
        (tuple(schedule), schedule_source),
        (("warmup_steps", "max_steps", *BATCH),
         f"{MODERNBERT_PAPER}, section 2.2.3 and table 3: {tokens / 1e9:g}B tokens at a global batch of 576 rows of "
         f"8,192 tokens: {steps:,} steps, no warm-up (t_warmup 0)"),
    ), decoupled_weight_decay=MODERNBERT_WEIGHT_DECAY)


RECIPES: Dict[str, Recipe] = {
    "bert": Recipe(
        "BERT-Base's pretraining", {
            "task": "mlm", "optimizer": "adamw", "lr_schedule": "linear", "learning_rate": 1e-4, "adam_beta1": 0.9,
            "adam_beta2": 0.999, "weight_decay_rate": 0.01, "warmup_steps": 10_000, "max_steps": 1_000_000,
            "mlm_probability": 0.15, **batch_of(256), "adam_epsilon": 1e-6, "max_grad_norm": 1.0},
        ((("task", "optimizer", "lr_schedule", "learning_rate", "adam_beta1", "adam_beta2", "weight_decay_rate",
           "warmup_steps", "max_steps", "mlm_probability", *BATCH),
          f"{BERT_PAPER}: batch 256, 1,000,000 steps, Adam lr 1e-4, beta (0.9, 0.999), weight decay 0.01, 10,000 "
          "warm-up steps then linear decay, 15% masked"),
         (("adam_epsilon", "max_grad_norm"), f"{BERT_CODE}: epsilon 1e-6, the global norm clipped at 1.0"))),
    "roberta": Recipe(
        "RoBERTa-base's pretraining", {
            "task": "mlm", "optimizer": "adamw", "lr_schedule": "linear", "learning_rate": 6e-4, "adam_beta1": 0.9,
            "adam_beta2": 0.98, "adam_epsilon": 1e-6, "weight_decay_rate": 0.01, "warmup_steps": 24_000,
            "max_steps": 500_000, "max_grad_norm": None, "mlm_probability": 0.15, **batch_of(8192)},
        ((("task", "optimizer", "lr_schedule", "learning_rate", "adam_beta1", "adam_beta2", "adam_epsilon",
           "weight_decay_rate", "warmup_steps", "max_steps", "max_grad_norm", "mlm_probability", *BATCH),
          "Liu et al. 2019 (arXiv:1907.11692), table 9 (BASE): batch 8k, 500k steps, peak lr 6e-4, 24k warm-up "
          "steps, linear decay, Adam beta (0.9, 0.98), epsilon 1e-6, weight decay 0.01, gradient clipping 0.0 (off); "
          "15% masked, dynamically"),)),
    "dapt": Recipe(
        "domain-adaptive pretraining (DAPT) of RoBERTa", {
            **DAPT_OPTIMIZER, **DAPT_WARMUP, "learning_rate": 5e-4, **batch_of(2048), "max_steps": 12_500},
        (((*DAPT_OPTIMIZER, "learning_rate", *BATCH, "max_steps"),
          f"{DAPT_SCRIPT}: RoBERTa's beta (0.9, 0.98), epsilon 1e-6, weight decay 0.01, max_grad_norm 1.0, "
          "the 🤗 script's linear decay, 15% masked; DAPT: lr 5e-4, batch 2,048, 12,500 steps"),
         (tuple(DAPT_WARMUP), f"{DAPT_PAPER}: warm-up proportion 0.06 (the released script's default is none: the "
                              "paper is followed)"))),
    "tapt": Recipe(
        "task-adaptive pretraining (TAPT) of RoBERTa", {
            **DAPT_OPTIMIZER, **DAPT_WARMUP, "learning_rate": 1e-4, **batch_of(256), "num_epochs": 100},
        (((*DAPT_OPTIMIZER, "learning_rate", *BATCH, "num_epochs"),
          f"{DAPT_SCRIPT}: DAPT's optimizer; TAPT: lr 1e-4, batch 256, 100 epochs"),
         (tuple(DAPT_WARMUP), f"{DAPT_PAPER}: warm-up proportion 0.06, as DAPT's"))),
    "electra": Recipe(
        "ELECTRA-Base's pretraining", {
            "task": "electra", "optimizer": "adamw", "lr_schedule": "linear", "learning_rate": 2e-4,
            "adam_beta1": 0.9, "adam_beta2": 0.999, "adam_epsilon": 1e-6, "weight_decay_rate": 0.01,
            "warmup_steps": 10_000, "max_steps": 766_000, "mlm_probability": 0.15, **batch_of(256),
            "max_grad_norm": 1.0},
        ((("task", "optimizer", "lr_schedule", "learning_rate", "adam_beta1", "adam_beta2", "adam_epsilon",
           "weight_decay_rate", "warmup_steps", "max_steps", "mlm_probability", *BATCH),
          "Clark et al. 2020 (arXiv:2003.10555), table 6 (Base): lr 2e-4, Adam epsilon 1e-6, beta (0.9, 0.999), "
          "weight decay 0.01, 10,000 warm-up steps, linear decay, batch 256, 766K steps, 15% masked"),
         (("max_grad_norm",), "google-research/electra, model/optimization.py: the global norm clipped at 1.0"))),
    "deberta-v3": Recipe(
        "DeBERTa-v3-base's pretraining (replaced-token detection, GDES)", {
            "task": "electra", "embedding_sharing": "gdes", "discriminator_weight": 50.0, "optimizer": "adamw",
            "lr_schedule": "linear", "learning_rate": 1e-4, "warmup_steps": 10_000, "max_steps": 1_000_000,
            **batch_of(256), "adam_beta1": 0.9, "adam_beta2": 0.999, "adam_epsilon": 1e-6, "weight_decay_rate": 0.01,
            "max_grad_norm": 1.0, "mlm_probability": 0.15},
        ((("task", "embedding_sharing", "discriminator_weight", "mlm_probability"),
          "He, Gao, Chen 2023 (arXiv:2111.09543), sections 2.2 and 3: RTD with the generator's MLM loss + lambda 50 x "
          "the discriminator's, gradient-disentangled embedding sharing, 15% masked"),
         (("optimizer", "lr_schedule", "learning_rate", "warmup_steps", "max_steps", *BATCH),
          "microsoft/DeBERTa, experiments/language_model/rtd.sh (deberta-v3-base): lr 1e-4, warm-up 10,000, batch "
          "256, 1,000,000 training steps, warmup_linear"),
         (("adam_beta1", "adam_beta2", "adam_epsilon", "weight_decay_rate", "max_grad_norm"),
          "microsoft/DeBERTa, DeBERTa/optims/args.py: Adam beta (0.9, 0.999), epsilon 1e-6, weight decay 0.01, the "
          "global norm clipped at 1"))),
    "t5": Recipe(
        "T5's pretraining (span corruption)", {
            "task": "span-corruption", "optimizer": "adafactor", "lr_schedule": "rsqrt", "warmup_steps": 10_000,
            "max_steps": 2 ** 19, **batch_of(128)},
        ((("task", "optimizer", "lr_schedule", "warmup_steps", "max_steps", *BATCH),
          "Raffel et al. 2020 (arXiv:1910.10683), section 3.1.2: 2^19 steps of batch 128, AdaFactor, the rate "
          "1/sqrt(max(step, 10^4)); the corruption itself (15%, mean span 3) is the shards' (`shard --task "
          "span-corruption`)"),)),
    "cramming": Recipe(
        "Cramming's BERT in a day (bert-o4)", {
            "task": "mlm", "optimizer": "adamw", "learning_rate": 1e-3, "adam_beta1": 0.9, "adam_beta2": 0.98,
            "adam_epsilon": 1e-12, "weight_decay_rate": 0.01, "warmup_steps": 0, "max_grad_norm": 0.5,
            "mlm_probability": 0.25, **batch_of(8192), "lr_schedule": "wsd", "decay_ratio": 0.25,
            "decay_shape": "linear"},
        ((("task", "optimizer", "learning_rate", "adam_beta1", "adam_beta2", "adam_epsilon", "weight_decay_rate",
           "warmup_steps", "max_grad_norm", "mlm_probability", *BATCH),
          "JonasGeiping/cramming, cramming/config/train/bert-o4.yaml and optim/adam.yaml (Geiping & Goldstein "
          "2022): AdamW lr 1e-3, beta (0.9, 0.98), eps 1e-12, weight decay 0.01, warmup_steps 0, gradient_clipping "
          "0.5, mlm_probability 0.25, batch_size 8192"),
         (("lr_schedule", "decay_ratio", "decay_shape"),
          "bert-o4.yaml's scheduler budget-triangle2 (cramming/backend/optimizers/schedulers.py: falloff 0.25, on "
          "the wall clock): its linear fall to 0 over the last 25%; the rise before it (from 25% of the peak) is "
          "held at the peak here"))),
    "modernbert": Recipe(
        "ModernBERT-base's pretraining phase", {
            "task": "mlm", "optimizer": "stableadamw", "learning_rate": MODERNBERT_PEAK, "adam_beta1": 0.9,
            "adam_beta2": 0.98, "adam_epsilon": 1e-6, "weight_decay_rate": MODERNBERT_WEIGHT_DECAY / MODERNBERT_PEAK,
            "max_grad_norm": None, "lr_schedule": "constant", "warmup_steps": modernbert_steps(3_000_000_000),
            "max_steps": modernbert_steps(1_719_000_000_000), "decay_shape": "1-sqrt", "mlm_probability": 0.3,
            "eval_mlm_probability": 0.15, **batch_of(MODERNBERT_BATCH), **MODERNBERT_BATCH_WARMUP},
        ((("task", "optimizer", "learning_rate", "adam_beta1", "adam_beta2", "adam_epsilon", "max_grad_norm",
           "mlm_probability", "eval_mlm_probability"),
          f"{MODERNBERT_YAML}: decoupled_stableadamw lr 8e-4, betas (0.9, 0.98), eps 1e-6, no gradient clipping, "
          "mlm_probability 0.3, validation at 0.15"),
         (("weight_decay_rate",),
          f"{MODERNBERT_YAML}: weight_decay 1e-5, fully decoupled (optimi's decouple_lr: x rate / peak, the peak "
          "being the run's), so 1e-5 / --learning-rate in this optimizer's convention (x rate): 0.0125 at 8e-4"),
         (("lr_schedule", "warmup_steps", "max_steps"),
          f"{MODERNBERT_YAML}: warmup_stable_decay, t_warmup 3B tokens, t_decay 0 (no decay in this phase), "
          "max_duration 1,719B tokens, all in tokens seen: rows of 1,024 tokens in the batches of the batch-size "
          "warm-up (768 rising to 4,608 over its first 50B tokens, 21,194 steps), then 4,608: 3,815 and 374,901 "
          "steps"),
         (("decay_shape",), "AnswerDotAI/ModernBERT, yamls/modernbert/modernbert-base-learning-rate-decay.yaml: "
                            "the later decay phase, one_minus_sqrt"),
         (BATCH, "Warner et al. 2024 (arXiv:2412.13663), table 3: global batch 4,608 at 1,024 tokens"),
         (("batch_size_warmup_min_size", "batch_size_warmup_tokens"),
          f"{MODERNBERT_YAML}: batch_size_warmup_min_size ${{device_train_microbatch_size}} (96 on each of 8 GPUs, "
          "768 in all), batch_size_warmup_tokens 50_000_000_000tok"),
         (("model_config", "config_overrides"),
          f"{MODERNBERT_YAML}: ModernBERT-base's shape (22 layers of 768, 12 heads), max_seq_len 1024, "
          "rotary_emb_base 10000.0 on every layer (the released checkpoints' 160,000 is the context extension's)")),
        decoupled_weight_decay=MODERNBERT_WEIGHT_DECAY,
        scratch_settings={"model_config": "modernbert-base", "config_overrides": "global_rope_theta=10000"}),
    "modernbert-context-extension": modernbert_long_phase(
        "ModernBERT-base's context extension to 8,192 tokens", 250_000_000_000, {"lr_schedule": "constant"},
        f"{MODERNBERT_EXTENSION_YAML}: constant_with_warmup, t_warmup 0"),
    "modernbert-decay": modernbert_long_phase(
        "ModernBERT-base's decay phase at 8,192 tokens", 50_000_000_000,
        {"lr_schedule": "wsd", "decay_ratio": 1.0, "decay_shape": "1-sqrt",
         "min_learning_rate": MODERNBERT_LONG_PEAK * 0.001},
        f"{MODERNBERT_DECAY_YAML}: one_minus_sqrt over the whole phase (t_decay = t_max), alpha_f 0.001 (it ends at "
        "0.001 x the peak: 3e-7)"),
}


def recipe_named(name: str) -> Recipe:
    if name not in RECIPES:
        raise UserError(f"--recipe {name}: no such recipe; the recipes are {', '.join(RECIPES)} (docs: Recipes)")
    return RECIPES[name]


def flag_and_value(key: str, value: Any) -> str:
    shown = "none" if value is None else f"{value:g}" if isinstance(value, float) else value
    return f"--{key.replace('_', '-')} {shown}"


def merged_overrides(recipes: str, given: Optional[str]) -> str:
    """The recipe's --config-overrides with the user's on top, setting by setting ("name=value,...")."""
    pairs = dict(pair.split("=", 1) for pair in recipes.split(","))
    pairs.update(pair.split("=", 1) if "=" in pair else (pair, "") for pair in filter(None, (given or "").split(",")))
    return ",".join(f"{name}={value}" if value else name for name, value in pairs.items())


def with_recipe(values: Mapping[str, Any]) -> Tuple[Dict[str, Any], List[str]]:
    """(`values` over their recipe's settings, the log's lines: the recipe's values, those the values override
    marked); `values` unchanged when they name no recipe. A recipe's --config-overrides join the user's (theirs win
    setting by setting); its scratch settings apply only to a model built from scratch."""
    name = values.get("recipe")
    if not name:
        return dict(values), []
    recipe = recipe_named(name)
    lines = [f"Recipe {name}: {recipe.title} (docs: Recipes)"]
    continuing = values.get("model_name_or_path")
    settings = {**recipe.settings, **({} if continuing else recipe.scratch_settings)}
    resolved = {**settings, **values}
    if "config_overrides" in settings:
        resolved["config_overrides"] = merged_overrides(settings["config_overrides"], values.get("config_overrides"))
    for key, value in settings.items():
        overridden = f"  (overridden: {resolved[key]})" if resolved[key] != value else ""
        lines.append(f"  {flag_and_value(key, value)}{overridden}")
    if continuing and recipe.scratch_settings:
        kept = ", ".join(flag_and_value(key, value) for key, value in recipe.scratch_settings.items())
        lines.append(f"  not applied to --model-name-or-path {continuing}, which keeps its own (from scratch only): "
                     f"{kept}")
    peak = resolved.get("learning_rate")
    if peak and peak != recipe.settings["learning_rate"]:
        if recipe.decoupled_weight_decay and "weight_decay_rate" not in values:
            resolved["weight_decay_rate"] = recipe.decoupled_weight_decay / peak
            lines.append(f"  --weight-decay-rate {resolved['weight_decay_rate']:g} (fully decoupled: "
                         f"{recipe.decoupled_weight_decay:g} / the peak --learning-rate {peak:g})")
        if recipe.settings.get("min_learning_rate") and "min_learning_rate" not in values:
            share = recipe.settings["min_learning_rate"] / recipe.settings["learning_rate"]
            resolved["min_learning_rate"] = peak * share
            lines.append(f"  --min-learning-rate {resolved['min_learning_rate']:g} (the same share of the peak "
                         f"--learning-rate {peak:g})")
    return resolved, lines
