"""Typed settings: dataclasses built from dicts (config files, command-line flags) and checked in one place.

Every command's settings are a dataclass whose defaults are the only defaults there are. A field
made with `setting(...)` also says its allowed range, and `check_ranges` refuses a value outside
it (NaN included) in one line that names the flag, so no command checks numbers by hand.
`from_dict` builds a dataclass from plain values (nested dataclasses from nested dicts) and names
any key it does not know; `to_dict` is its inverse; `read_config_file` reads JSON or YAML.
"""

import dataclasses
import difflib
import json
import math
import os
import typing
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

from mlm_tpu.errors import UserError


def setting(default: Any = dataclasses.MISSING, *, low: Optional[float] = None, high: Optional[float] = None,
            low_open: bool = False, high_open: bool = False, flag: Optional[str] = None,
            changes_result: bool = True, help: Optional[str] = None, group: Optional[str] = None,
            names: Tuple[str, ...] = (), **options: Any) -> Any:
    """A dataclass field whose value must lie in [low, high] (open ends with `low_open`/`high_open`).

    `flag` is the command-line spelling used in messages (default: `--` and the name with dashes).
    `changes_result=False` says that a training run resumed with another value is still the same run
    (training/run_settings.py), as for logging or backup intervals. A field with `help` is also a flag of
    the commands that generate theirs (cli/flags.py's `add_settings`): in the `group` of their --help,
    spelled `flag` and `names`, with argparse's `options` (type, nargs, choices, metavar, action).
    """
    metadata = {"low": low, "high": high, "low_open": low_open, "high_open": high_open, "flag": flag,
                "changes_result": changes_result, "help": help, "group": group, "names": names, "options": options}
    return dataclasses.field(default=default, metadata=metadata)


def comma_separated(text: str) -> Tuple[str, ...]:
    """A flag's value of comma-separated names ("q,v"), as a tuple."""
    return tuple(text.split(","))


def flag_of(field: dataclasses.Field) -> str:
    return field.metadata.get("flag") or "--" + field.name.replace("_", "-")


def key_of(field: dataclasses.Field) -> str:
    """The name a setting goes by in a run's config (and its file): its flag's, with underscores (LoraSettings'
    `rank` is `lora_rank`)."""
    return flag_of(field)[2:].replace("-", "_")


def joined_dataclass(name: str, base: type, parts: Sequence[type], doc: str) -> type:
    """The dataclass `base` with the fields of each dataclass of `parts` added after its own, each under its key
    (key_of), once however many parts share it: a run's one flat config of settings declared in many places."""
    added, seen = [], {field.name for field in dataclasses.fields(base)}
    for part in parts:
        hints = typing.get_type_hints(part)
        for field in dataclasses.fields(part):
            if key_of(field) not in seen:
                seen.add(key_of(field))
                added.append((key_of(field), hints[field.name],
                               dataclasses.field(default=field.default, metadata=field.metadata)))
    return dataclasses.make_dataclass(name, added, bases=(base,), namespace={"__doc__": doc,
                                                                           "__module__": base.__module__})


def settings_given(config: Any, settings: type) -> Dict[str, Any]:
    """{key: value} of the fields of the dataclass `settings` that `config` (a joined dataclass holding them) sets to
    other than their defaults."""
    return {key_of(field): getattr(config, key_of(field)) for field in dataclasses.fields(settings)
            if getattr(config, key_of(field)) != field.default}


def settings_of(config: Any, settings: type) -> Any:
    """The dataclass `settings` with the values `config` (a joined dataclass holding its fields, or any object with
    them as attributes) holds for its fields."""
    return settings(**{field.name: getattr(config, key_of(field)) for field in dataclasses.fields(settings)})


def refuse_others_settings(config: Any, owners: Mapping[str, type], chosen: Optional[str], flag: str,
                           nothing: str = "") -> None:
    """Refuse a setting given (not at its default) that belongs to no `owners[chosen]`, in one line naming whose it
    is: `owners` maps each choice of `flag` (--task, --delta) to its settings dataclass; `nothing` says what no choice
    is (where None is one)."""
    def keys(settings: type) -> set:
        return {key_of(field) for field in dataclasses.fields(settings)}

    own = keys(owners[chosen]) if chosen in owners else set()
    for settings in owners.values():
        for key in [key for key in settings_given(config, settings) if key not in own]:
            given = "--" + key.replace("_", "-")
            users = [user for user, other in owners.items() if key in keys(other)]
            now = f"{flag} {chosen}" if chosen else nothing
            raise UserError(f"{given} is a setting of {' and '.join(f'{flag} {user}' for user in users)}, not of "
                            f"{now}; drop {given}" + ("" if chosen else f", or add {flag} {users[0]}"))


def _range_words(meta: Mapping[str, Any]) -> str:
    parts = []
    if meta.get("low") is not None:
        parts.append(("above " if meta.get("low_open") else "at least ") + _number(meta["low"]))
    if meta.get("high") is not None:
        parts.append(("below " if meta.get("high_open") else "at most ") + _number(meta["high"]))
    return " and ".join(parts)


def _number(value: float) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


def _in_range(value: float, meta: Mapping[str, Any]) -> bool:
    low, high = meta.get("low"), meta.get("high")
    if isinstance(value, float) and not math.isfinite(value):
        return False
    if low is not None and not (value > low if meta.get("low_open") else value >= low):
        return False
    if high is not None and not (value < high if meta.get("high_open") else value <= high):
        return False
    return True


def check_ranges(config: Any) -> None:
    """Refuse the first number outside its field's range, naming its flag and what is allowed."""
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if dataclasses.is_dataclass(value):
            check_ranges(value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and (
                field.metadata.get("low") is not None or field.metadata.get("high") is not None):
            if not _in_range(value, field.metadata):
                raise UserError(f"{flag_of(field)} must be {_range_words(field.metadata)}, not {value}")


def _describe_type(annotation: Any) -> str:
    origin, arguments = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Union:
        return " or ".join(_describe_type(a) for a in arguments if a is not type(None))
    if origin in (tuple, list):
        return f"a list of {_describe_type(arguments[0])}s"
    return {str: "text", int: "a whole number", float: "a number", bool: "true or false"}.get(annotation,
                                                                                              str(annotation))


def _convert(value: Any, annotation: Any, where: str) -> Any:
    """`value` as the field's type, or a clear error; numbers written as text (YAML's 1e-4) are accepted."""
    origin, arguments = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Union:
        if value is None and type(None) in arguments:
            return None
        inner = [a for a in arguments if a is not type(None)]
        for alternative in inner[:-1]:  # the first type the value is (str before a list of str, say)
            try:
                return _convert(value, alternative, where)
            except UserError:
                pass
        return _convert(value, inner[-1], where)
    if origin in (tuple, list):
        if isinstance(value, str) or not isinstance(value, (list, tuple)):
            raise UserError(f"{where} must be {_describe_type(annotation)}, not {value!r}")
        return tuple(_convert(item, arguments[0], where) for item in value)
    if annotation is bool:
        if isinstance(value, bool):
            return value
    elif annotation is int:
        if isinstance(value, str):
            try:
                value = float(value) if any(c in value for c in ".eE") else int(value)
            except ValueError:
                pass
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif annotation is float:
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                pass
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif annotation is str:
        if isinstance(value, str):
            return value
    else:
        return value
    raise UserError(f"{where} must be {_describe_type(annotation)}, not {value!r}")


def from_dict(cls: type, values: Mapping[str, Any], source: str) -> Any:
    """An instance of the dataclass `cls` from `values`; nested dataclasses come from nested dicts.

    `source` says where the values came from (a file name, "the flags") for messages. A key the
    dataclass does not know, a value of the wrong type, or a required setting left out is one
    clear error.
    """
    if not isinstance(values, Mapping):
        raise UserError(f"{source} must hold a mapping of settings (key: value), not {type(values).__name__}")
    fields = {field.name: field for field in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    unknown = [key for key in values if key not in fields]
    if unknown:
        close = difflib.get_close_matches(str(unknown[0]), fields, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise UserError(f"{source}: unknown setting '{unknown[0]}'{hint}; the settings are the command's flags "
                        f"written with underscores: {', '.join(sorted(fields))}")
    arguments = {}
    for name, field in fields.items():
        if name not in values:
            if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
                raise UserError(f"{flag_of(field)} is required (give it as a flag, or as '{name}' in a config file)")
            continue
        value = values[name]
        if dataclasses.is_dataclass(hints[name]):
            arguments[name] = from_dict(hints[name], value or {}, f"{source} [{name}]")
        else:
            arguments[name] = _convert(value, hints[name], f"{source}: '{name}' ({flag_of(field)})")
    return cls(**arguments)



def from_keywords(cls: type, settings: Mapping[str, Any]) -> Any:
    """An instance of the dataclass `cls` from flat keyword settings (the API's, named as the flags): a key naming a
    field of a nested config goes into it."""
    values: Dict[str, Any] = {}
    own = {field.name for field in dataclasses.fields(cls)}
    nested = {field.name: field.default_factory().__dict__.keys() for field in dataclasses.fields(cls)
              if field.default_factory is not dataclasses.MISSING and dataclasses.is_dataclass(field.default_factory)}
    for key, value in settings.items():
        parent = next((name for name, keys in nested.items() if key in keys), None)
        if parent and key not in own:
            values.setdefault(parent, {})[key] = value
        else:
            values[key] = value
    return from_dict(cls, values, "the keyword arguments")

def to_dict(config: Any) -> Dict[str, Any]:
    """The settings as plain JSON-ready values, nested as the dataclasses are; tuples become lists."""
    return json.loads(json.dumps(dataclasses.asdict(config)))


def merged(base: Mapping[str, Any], override: Mapping[str, Any]) -> Dict[str, Any]:
    """`base` with `override`'s values on top, merging nested mappings key by key."""
    result = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(result.get(key), Mapping):
            result[key] = merged(result[key], value)
        else:
            result[key] = value
    return result


def read_config_file(path: str) -> Dict[str, Any]:
    """A JSON (.json) or YAML (.yaml, .yml) file of settings, as a dict; a missing or malformed file is one line."""
    if not os.path.isfile(path):
        raise UserError(f"--config {path}: no such file; give a JSON or YAML file of settings "
                        "(a run's training_args.json is one)")
    try:
        with open(path, encoding="utf-8") as stream:
            text = stream.read()
    except (OSError, UnicodeDecodeError) as error:
        raise UserError(f"--config {path}: cannot read it ({error})") from None
    if path.endswith((".yaml", ".yml")):
        import yaml

        try:
            values = yaml.safe_load(text)
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            where = f" (line {mark.line + 1})" if mark else ""
            raise UserError(f"--config {path} is not valid YAML{where}: {getattr(error, 'problem', error)}") from None
    else:
        try:
            values = json.loads(text)
        except json.JSONDecodeError as error:
            raise UserError(f"--config {path} is not valid JSON (line {error.lineno}): {error.msg}") from None
    if not isinstance(values, dict):
        raise UserError(f"--config {path} must hold a mapping of settings (key: value), not "
                        f"{type(values).__name__}")
    return values
