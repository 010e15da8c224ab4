"""The dependency rule of DESIGN.md, checked on the source: base helpers <- corpus <- tokenizer <- shards <-
model_folder <- training <- product lines (mlm/, t5/) <- tasks.py, api <- cli.

Every stage module may import only the base helpers and the stages at or below its own; so no stage
imports a product line, the registry of plug-ins (tasks.py), the API or the command-line layer: what a
stage needs from a task reaches it through the plug-in it is handed. Every import counts: at the top,
inside functions, relative, and modules named in strings for importlib.
"""

import ast
import re
from pathlib import Path
from typing import List, Optional, Tuple

import pytest

from conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "mlm_tpu"
# Helpers every layer may use. A new one belongs here only if it imports nothing but these.
BASE_HELPERS = ("mlm_tpu", "mlm_tpu.errors", "mlm_tpu.console", "mlm_tpu.configuration", "mlm_tpu.jsonfiles",
                "mlm_tpu.claim", "mlm_tpu.output_dir", "mlm_tpu.hub")
STAGES = ("mlm_tpu.corpus", "mlm_tpu.tokenizer", "mlm_tpu.shards", "mlm_tpu.model_folder", "mlm_tpu.training")
ENTRY_POINT = "__main__.py"  # `python -m` entry points: part of the command-line layer wherever Python wants them
FRONT_DOOR = PACKAGE / "__init__.py"  # `mlm_tpu`: __version__ for everyone, and the API lent on first use (not checked)
MODULE_PATH = re.compile(r"^mlm_tpu(\.\w+)+$")


def module_of(path: Path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    relative = Path(*name.split("."))
    return (REPO_ROOT / relative).with_suffix(".py").is_file() or (REPO_ROOT / relative / "__init__.py").is_file()


def resolve(name: str) -> str:
    """The module a dotted import target lives in (`mlm_tpu.errors.UserError` -> `mlm_tpu.errors`)."""
    while "." in name and not is_module(name):
        name = name.rsplit(".", 1)[0]
    return name


def imports_of(source: str, module: str, is_package: bool = False) -> List[Tuple[int, str]]:
    """(line, module) of every mlm_tpu module `source` imports: import statements anywhere, relative ones
    resolved, importlib.import_module/__import__ calls and module paths written as strings."""
    package = module if is_package else module.rsplit(".", 1)[0]
    found = []
    tree = ast.parse(source)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                  and node.body and isinstance(node.body[0], ast.Expr)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            if MODULE_PATH.match(node.value):  # importlib.import_module("mlm_tpu.x"), or a table of such names
                found.append((node.lineno, node.value))
    return sorted({(line, resolve(name)) for line, name in found if name.split(".")[0] == "mlm_tpu"})


def level_of(module: str) -> Optional[int]:
    """-1 for a base helper, a stage's rank (corpus 0 ... training 4), None above the stages."""
    if module in BASE_HELPERS:
        return -1
    for rank, stage in enumerate(STAGES):
        if module == stage or module.startswith(stage + "."):
            return rank
    return None


def checked_modules() -> List[Tuple[Path, str, int]]:
    modules = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = module_of(path)
        level = level_of(module)
        if level is not None and path.name != ENTRY_POINT and path != FRONT_DOOR:
            modules.append((path, module, level))
    return modules


def test_the_checker_sees_every_kind_of_import():
    source = '''"""mlm_tpu.cli, in a docstring, is prose."""
import mlm_tpu.t5.presets
from mlm_tpu.errors import UserError
from . import masking
from ..tasks import make_task


def late():
    """Imports inside functions count."""
    from mlm_tpu.mlm.task import MaskedLmTask
    import importlib
    return importlib.import_module("mlm_tpu.cli.main")


PLUG_INS = {"mlm": ("mlm_tpu.mlm.task", "MaskedLmTask")}
'''
    assert imports_of(source, "mlm_tpu.shards.inspection") == [
        (2, "mlm_tpu.t5.presets"), (3, "mlm_tpu.errors"), (4, "mlm_tpu.shards"), (5, "mlm_tpu.tasks"),
        (10, "mlm_tpu.mlm.task"), (12, "mlm_tpu.cli.main"), (15, "mlm_tpu.mlm.task")]
    assert imports_of("from . import pipeline\n", "mlm_tpu.shards", is_package=True) == [(1, "mlm_tpu.shards.pipeline")]


def test_every_stage_imports_only_base_helpers_and_the_stages_below_it():
    modules = checked_modules()
    for stage in STAGES:  # the walk found each stage's code, so an empty pass cannot hide a broken walk
        assert any(module == stage or module.startswith(stage + ".") for _, module, _ in modules), stage
    violations = []
    for path, module, level in modules:
        for line, target in imports_of(path.read_text(encoding="utf-8"), module, path.name == "__init__.py"):
            target_level = level_of(target)
            if target_level is None or target_level > level:
                where = "a base helper" if level < 0 else STAGES[level]
                violations.append(f"{path.relative_to(REPO_ROOT)}:{line}: {where} imports {target}")
    assert not violations, ("stages must not import what is above them (hand it in through the task plug-in, or "
                            "move it down to a neutral module):\n" + "\n".join(violations))


@pytest.mark.parametrize("forbidden", ["mlm_tpu.mlm", "mlm_tpu.t5", "mlm_tpu.cli", "mlm_tpu.tasks", "mlm_tpu.api"])
def test_the_rule_forbids_product_lines_the_registry_the_api_and_the_cli(forbidden):
    assert level_of(forbidden) is None and level_of(forbidden + ".anything") is None
