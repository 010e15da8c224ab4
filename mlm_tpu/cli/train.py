"""`python train.py` (also `mlm-tpu train`): train a model on TFRecord shards, on a TPU, every GPU or the CPU.

--task says what to train (its help, made from each task's words in the registry, says what each is): a masked
LM (the default), ELECTRA or T5, pretrained from scratch or continued from a checkpoint (--model-name-or-path); or
T5 or any encoder fine-tuned (or trained from scratch) on labelled shards, scored on the validation shards each
epoch.

A run can be written down and replayed: --config FILE (JSON or YAML) takes its settings from the
file (the flags' names with underscores; see configs/), and flags given as well override it. The
training_args.json of every run is such a file. A preempted run resumes from its backup, exactly
where it stopped, when started again with the same command. Flags follow the 🤗 TPU
language-modeling example; dashes and underscores are both accepted.
"""

import argparse
from typing import Optional, Sequence

from mlm_tpu.cli.flags import ConfigFlags, add_flag, add_hardware_flags, add_settings, add_verbose_flag
from mlm_tpu.configuration import from_dict, merged, read_config_file
from mlm_tpu.console import import_tensorflow, log, quiet_libraries
from mlm_tpu.delta import METHODS
from mlm_tpu.shards.format import check_local_shards
from mlm_tpu.tasks import TASK_SETTINGS, TASKS, TrainingConfig, check_settings, task_from_head, task_help
from mlm_tpu.training.cluster import check_cluster
from mlm_tpu.training.recipes import RECIPES, with_recipe
from mlm_tpu.training.settings import MaskingSettings

FLAGS = ConfigFlags(TrainingConfig)
RUN_INFO_KEY = "run"  # what training_args.json records of the run beside its settings; not a setting


GROUPS = (  # the --help's groups after hardware (add_hardware_flags'), in order, with what each says of itself
    ("task", None), ("data", None), ("model and optimisation", None),
    ("delta-tuning", "Train a small delta on the frozen --model-name-or-path instead of every weight; the output "
     "folder holds the adapter as PEFT saves it (AdapterHub's format for bottleneck adapters). The encoder tasks take "
     "lora and ia3, and train the classifier's new head with the delta (saved whole, PEFT's modules_to_save)."),
    ("output", None))


def help_words() -> dict:
    """What the settings' help texts leave to the command: who the masking flags are for (the tasks whose settings
    hold them), the presets --model-config takes."""
    from mlm_tpu.electra.presets import PRESETS as ELECTRA_PRESETS
    from mlm_tpu.mlm.presets import PRESETS
    from mlm_tpu.t5.presets import PRESETS as T5_PRESETS

    owners = [task for task, settings in TASK_SETTINGS.items() if issubclass(settings, MaskingSettings)]
    return {"who": f"--task {' and '.join(owners)}", "probability_default": "0.15; ELECTRA-Large's paper run: 0.25",
            "recipes": ", ".join(RECIPES),
            "presets": f"{', '.join(PRESETS)}; base is roberta-base's shape, bert-* BERT's of Turc et al. "
                       "2019, and a config.json may be of any masked-LM family; for --task electra, the "
                       f"discriminator's: {', '.join(ELECTRA_PRESETS)}, the paper's shapes; for T5 tasks: "
                       f"{', '.join(T5_PRESETS)}"}


def build_parser(prog: str = "python train.py") -> argparse.ArgumentParser:
    """The flags: --config, --head and --verbose, and one per setting of TrainingConfig (its fields' metadata)."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flag(parser, "--config", default=None, metavar="FILE",
             help="Take the settings from this JSON or YAML file (a run's training_args.json, or one of configs/); "
                  "flags given as well override it.")
    words, choices = {**help_words(), "tasks": task_help()}, {"task": TASKS, "delta": METHODS}
    add_settings(FLAGS, add_hardware_flags(FLAGS, parser), TrainingConfig, "hardware", words, choices)
    for name, description in GROUPS:
        group = parser.add_argument_group(name, description)
        add_settings(FLAGS, group, TrainingConfig, name, words, choices)
        if name == "task":
            add_flag(group, "--head", choices=("mlm", "t5"), default=None,
                     help="The old spelling: mlm is --task mlm; t5 goes with --task classification or generation.")
    add_verbose_flag(parser)
    return parser


def build_config(args: argparse.Namespace) -> TrainingConfig:
    """The settings: TrainingConfig's defaults, then --recipe's (training/recipes.py), then --config's file, then the
    flags given."""
    file_values = read_config_file(args.config) if args.config else {}
    file_values.pop(RUN_INFO_KEY, None)
    if args.head:
        file_values["task"] = task_from_head(FLAGS.given(args).get("task", file_values.get("task")), args.head)
    values, recipe_lines = with_recipe(merged(file_values, FLAGS.given(args)))
    for line in recipe_lines:
        log(line)
    return from_dict(TrainingConfig, values, f"--config {args.config}" if args.config else "the flags")


def main(argv: Optional[Sequence[str]] = None, prog: str = "python train.py") -> None:
    args = build_parser(prog).parse_args(argv)
    config = build_config(args)
    check_cluster(config.hardware)  # TF_CONFIG, before TensorFlow loads
    check_settings(config)  # another task's or method's flag, said first as the trainer says it
    for flag, location in (*(("--train-dataset", name) for name in config.train_datasets),
                           ("--eval-dataset", config.eval_dataset)):
        if location:
            check_local_shards(location, flag)  # a typo's answer in a second, not after TensorFlow's start-up
    import_tensorflow(args.verbose)  # after the flags are checked: TensorFlow takes seconds to load
    quiet_libraries(args.verbose)
    from mlm_tpu.tasks import training_task
    from mlm_tpu.training.trainer import train

    train(config, training_task(config))
