"""The delta-tuning methods, each registered by its own folder's `__init__.py` as PEFT's tuners register themselves
(`register_peft_method`): its --delta word, its settings (a dataclass of fields made with `setting()`: the flags
of `train --delta <name>`) and the module of its model (whose METHOD is its DeltaMethod class, imported only when
used). No TensorFlow here: flags are checked before it loads."""

import importlib
from dataclasses import dataclass
from typing import Dict

from mlm_tpu.errors import UserError


@dataclass(frozen=True)
class DeltaRegistration:
    name: str  # the --delta word
    settings: type  # the dataclass of its settings (its config.py)
    model: str  # the module whose METHOD is its DeltaMethod class (its model.py)


REGISTERED: Dict[str, DeltaRegistration] = {}  # in the order the methods registered: that of --help


def register_delta_method(name: str, settings: type, model: str) -> None:
    """Make `--delta name` a method: called once by each method folder's __init__.py."""
    if name in REGISTERED:
        raise ValueError(f"--delta {name} is registered twice")
    REGISTERED[name] = DeltaRegistration(name, settings, model)


def method_class(name: str):
    """The DeltaMethod class of `--delta name` (its module imported only when used)."""
    if name not in REGISTERED:
        raise UserError(f"--delta must be one of {', '.join(REGISTERED)}, not '{name}'")
    return importlib.import_module(REGISTERED[name].model).METHOD


def registration_of(method_class_: type) -> DeltaRegistration:
    """The registration of a DeltaMethod class: the one whose model module defines it."""
    return next(registered for registered in REGISTERED.values() if registered.model == method_class_.__module__)
