"""Flags that fill a typed config, and the flag groups several commands share (corpus, hardware, masking,
--verbose).

A flag added through `ConfigFlags` sets one field of the command's config dataclass. Its argparse
default is "not given", so after parsing we know exactly what the user typed: those values go on
top of a config file's (train.py --config), which go on top of the dataclass defaults, the only
defaults there are (`--help` shows them from there).
"""

import argparse
import dataclasses
import typing
from typing import Any, Dict, Optional

from mlm_tpu.configuration import flag_of, from_dict, merged

PREFIX = "config."  # argparse dests of config flags: "config." + the field's dotted path


def add_flag(parser, name: str, *more_names: str, underscored_too: bool = True, **kwargs) -> argparse.Action:
    """Add `--some-flag`, also accepting the 🤗 example scripts' spelling `--some_flag` (unless not `underscored_too`:
    where that spelling belongs to someone else); a required flag's help says so."""
    names = [name, *more_names]
    if kwargs.get("required") and kwargs.get("help") and "required" not in kwargs["help"].lower():
        kwargs["help"] += " (required)"
    underscored = ["--" + n[2:].replace("-", "_") for n in names
                   if n.startswith("--") and "-" in n[2:] and underscored_too]
    kwargs.setdefault("dest", name.lstrip("-").replace("-", "_"))
    return parser.add_argument(*names, *[u for u in underscored if u not in names], **kwargs)


def _default_of(config_class: type, path: str) -> Any:
    value: Any = config_class
    for name in path.split("."):
        field = {f.name: f for f in dataclasses.fields(value)}[name]
        if field.default_factory is not dataclasses.MISSING:
            value = field.default_factory()
            if dataclasses.is_dataclass(value):
                value = type(value)
        else:
            value = field.default
    return value


class ConfigFlags:
    """The flags of one command that set fields of `config_class` (nested fields by dotted path)."""

    def __init__(self, config_class: type):
        self.config_class = config_class

    def add(self, group, name: str, *more_names: str, field: Optional[str] = None, **kwargs) -> argparse.Action:
        """Add a flag for `field` (default: the flag's name with underscores); its help ends with the default, or
        with "(required)" when the field has none."""
        path = field or name[2:].replace("-", "_")
        default = _default_of(self.config_class, path)  # also checks that the field exists
        help_text = kwargs.get("help", "")
        if default is dataclasses.MISSING:
            if help_text and "required" not in help_text.lower():
                kwargs["help"] = f"{help_text} (required)"
        elif help_text and "default" not in help_text.lower() and default not in (None, False, (), ""):
            kwargs["help"] = f"{help_text} (default: {default})"
        if kwargs.get("action") in (None, "append") and "choices" not in kwargs:
            kwargs.setdefault("metavar", path.split(".")[-1].upper())
        return add_flag(group, name, *more_names, dest=PREFIX + path, default=argparse.SUPPRESS, **kwargs)

    @staticmethod
    def given(namespace: argparse.Namespace) -> Dict[str, Any]:
        """What the command line set, as a nested dict of config values."""
        values: Dict[str, Any] = {}
        for dest, value in vars(namespace).items():
            if dest.startswith(PREFIX):
                *parents, name = dest[len(PREFIX):].split(".")
                target = values
                for parent in parents:
                    target = target.setdefault(parent, {})
                target[name] = tuple(value) if isinstance(value, list) else value
        return values

    def build(self, namespace: argparse.Namespace, base: Optional[Dict[str, Any]] = None,
              source: str = "the flags") -> Any:
        """The config: the dataclass defaults, then `base` (a config file's values, say), then the flags given."""
        return from_dict(self.config_class, merged(base or {}, self.given(namespace)), source)


def add_settings(flags: ConfigFlags, group, config_class: type, group_name: str, words: Optional[Dict[str, str]] = None,
                 choices: Optional[Dict[str, tuple]] = None, prefix: str = "") -> None:
    """A flag for each field of `config_class` (nested dataclasses' too) that says it belongs to `group_name` of the
    --help (`setting(group=...)`), in the fields' order: its flag and `names`, its argparse options (`choices` the
    command knows, by field name: what the task and method registries hold), its `help` filled in with `words`
    ({who} and those the command gives)."""
    hints = typing.get_type_hints(config_class)
    for field in dataclasses.fields(config_class):
        if dataclasses.is_dataclass(hints[field.name]):
            add_settings(flags, group, hints[field.name], group_name, words, choices, f"{prefix}{field.name}.")
        elif field.metadata.get("group") == group_name and field.metadata.get("help"):
            options = {**_options_of(hints[field.name], field.default), **field.metadata["options"]}
            if field.name in (choices or {}):
                options["choices"] = choices[field.name]
            help_text = field.metadata["help"].format_map(words or {})
            flags.add(group, flag_of(field), *field.metadata["names"], field=prefix + field.name, help=help_text,
                      **options)


def _options_of(annotation, default) -> Dict[str, Any]:
    """argparse's options for a setting of this type (those its metadata gives win): a number's type, a switch for
    a bool (--x and --no-x where its default is None: on, off or decided by the run)."""
    kind = next((a for a in typing.get_args(annotation) if a is not type(None)), annotation)
    if kind is bool:
        return {"action": "store_true"} if default is False else {"action": argparse.BooleanOptionalAction}
    return {"type": kind} if kind in (int, float) else {}


def add_verbose_flag(parser: argparse.ArgumentParser) -> None:
    add_flag(parser, "--verbose", action="store_true",
             help="Also show what TensorFlow and 🤗 Transformers print themselves (start-up lines, notices).")


def add_corpus_flags(flags: ConfigFlags, parser: argparse.ArgumentParser, prefix: str = "corpus.") -> None:
    """The corpus flags every command that reads text shares (they fill a `CorpusSource`)."""
    from mlm_tpu.corpus import BUILTIN_CORPORA, DEFAULT_DATASET, DEFAULT_DATASET_CONFIG

    group = parser.add_argument_group(
        "corpus", "Where the text comes from: a 🤗 dataset (the default, wikitext-103), local files, "
        "or a built-in offline corpus. Give at most one of --dataset, --text-files, --builtin-corpus.")
    flags.add(group, "--dataset", "--dataset-name", field=prefix + "dataset",
              help=f"🤗 dataset name or local dataset folder, streamed (default: {DEFAULT_DATASET} "
                   "when no other source is given).")
    flags.add(group, "--dataset-config", field=prefix + "dataset_config",
              help=f"Configuration of --dataset (default with wikitext: {DEFAULT_DATASET_CONFIG}).")
    flags.add(group, "--split", field=prefix + "split",
              help="Split to read from --dataset or --builtin-corpus (train, validation, test; default: train); "
                   "commands that write data also name their output after it.")
    flags.add(group, "--text-files", nargs="+", metavar="PATH", field=prefix + "text_files",
              help="Files, folders or globs (quote them), local or gs://: .txt (one document per line, blank "
                   "lines skipped), .jsonl/.json, .csv and .parquet (text in --text-column); all but .parquet "
                   "may be gzipped (.json.gz, as C4's files).")
    flags.add(group, "--text-column", field=prefix + "text_column",
              help="Column holding the text in .jsonl/.json/.csv/.parquet files and datasets (default: text).")
    flags.add(group, "--builtin-corpus", choices=sorted(BUILTIN_CORPORA), field=prefix + "builtin_corpus",
              help="Offline corpus shipped with Python itself: 'pydoc-topics' is the standard "
                   "library's help pages (~0.5 MB of English prose, no download); its --split validation "
                   "and test are every 20th document (90%% stays in train).")
    flags.add(group, "--limit", type=int, metavar="N", field=prefix + "limit",
              help="Read at most N documents (default: all).")


def add_masking_flags(flags: ConfigFlags, parser, who: str, probability_default: str = "0.15") -> None:
    """--mlm-probability, --masking, --mask-replace-prob and --random-replace-prob (training/settings.py's
    MaskingSettings), for evaluation and inspection; `who` says where they apply ("Masked LM"),
    `probability_default` what --mlm-probability's help says of its default."""
    from mlm_tpu.training.settings import MaskingSettings

    add_settings(flags, parser, MaskingSettings, "task", {"who": who, "probability_default": probability_default})


def add_hardware_flags(flags: ConfigFlags, parser: argparse.ArgumentParser, prefix: str = "hardware.") -> Any:
    """--tpu, --tpu-zone, --gcp-project, --bf16, --cpu-replicas and --deterministic, shared by training and
    evaluation (they fill a `HardwareConfig`); returns the group, for commands that add to it."""
    group = parser.add_argument_group("hardware")
    flags.add(group, "--tpu", "--tpu-name", nargs="?", const="local", metavar="NAME", field=prefix + "tpu",
              help="Run on a TPU: bare --tpu is this TPU VM (or Colab's TPU), NAME a TPU node. Without it: "
                   "every GPU if there are any, else the CPU.")
    flags.add(group, "--tpu-zone", field=prefix + "tpu_zone", help="Zone of the TPU node NAME.")
    flags.add(group, "--gcp-project", field=prefix + "gcp_project", help="Google Cloud project of the TPU node NAME.")
    flags.add(group, "--bf16", "--bfloat16", action=argparse.BooleanOptionalAction, field=prefix + "bf16",
              help="bfloat16 mixed precision (default: on with --tpu, off otherwise).")
    flags.add(group, "--cpu-replicas", type=int, field=prefix + "cpu_replicas",
              help="Split the CPU into N replicas under MirroredStrategy (to try the multi-replica path "
                   "without accelerators; default: 1).")
    flags.add(group, "--deterministic", action=argparse.BooleanOptionalAction, field=prefix + "deterministic",
              help="TensorFlow's deterministic kernels (tf.config.experimental.enable_op_determinism), so a run "
                   "and its resumption compute the same bits (default: on, except on TPUs, which need no switch).")
    return group
