"""The dependency rule of DESIGN.md, checked on the source: base helpers <- corpus <- tokenizer <- shards <-
hand-written model families (modernbert) <- model_folder <- training <- product lines <- the registry of tasks <-
downstream <- api <- cli.

Every module of mlm_tpu has one place in LAYERS, and every import of one module by another (at the top, inside
functions, relative, and modules named in strings for importlib) is an arrow of the import graph. The graph has
no circles, and every arrow runs down (or within one unit): a stage never imports a product line, the registry,
the API or the command-line layer, and what a stage needs from a task reaches it through the plug-in or the shard
kind it is handed. The product lines among themselves: the masked LM and T5 stand side by side and import nothing
of each other; ELECTRA and the encoder line stand above them, side by side (both build on the masked LM: ELECTRA on
its masker, the encoder's from-scratch baseline on its shapes); delta-tuning wraps any of them.
"""

import ast
import functools
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, FrozenSet, Iterator, List, Optional, Set, Tuple

from conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "mlm_tpu"
# Lowest first. A layer holds units; a unit's modules may import each other (without circles) and anything in a
# lower layer, never a module of another unit of the same layer (a sideways arrow) or of a higher layer (an up arrow).
# A unit names modules, and with them the modules of the packages they name.
LAYERS: Tuple[Dict[str, Tuple[str, ...]], ...] = (
    {"base helpers": ("mlm_tpu.version", "mlm_tpu.errors", "mlm_tpu.console", "mlm_tpu.configuration",
                      "mlm_tpu.jsonfiles", "mlm_tpu.claim", "mlm_tpu.output_dir", "mlm_tpu.hub",
                      "mlm_tpu.cloud_storage")},
    {"corpus": ("mlm_tpu.corpus",)},
    {"tokenizer": ("mlm_tpu.tokenizer",)},
    {"shards": ("mlm_tpu.shards",)},
    {"model families": ("mlm_tpu.modernbert",)},  # hand-written families: the model folder's registry builds them
    {"model folder": ("mlm_tpu.model_folder",)},
    {"training": ("mlm_tpu.training",)},
    {"masked LM": ("mlm_tpu.mlm",), "T5": ("mlm_tpu.t5",)},
    {"ELECTRA": ("mlm_tpu.electra",), "encoder": ("mlm_tpu.encoder",)},
    {"sentence embedding": ("mlm_tpu.embedding",)},  # an encoder pooled into vectors, on the encoder line's helpers
    {"delta-tuning": ("mlm_tpu.delta",)},
    {"registry": ("mlm_tpu.tasks",)},
    {"downstream": ("mlm_tpu.downstream",)},
    {"api": ("mlm_tpu.api", "mlm_tpu")},  # `mlm_tpu` itself is the front door: the API lent on first use
    {"cli": ("mlm_tpu.cli", "mlm_tpu.__main__", "mlm_tpu.shard", "mlm_tpu.evaluate", "mlm_tpu.predict",
             "mlm_tpu.inspect", "mlm_tpu.loss_plot", "mlm_tpu.export", "mlm_tpu.demo", "mlm_tpu.launch")},
)
# `python -m mlm_tpu.tokenizer` and `python -m mlm_tpu.downstream`: the command-line layer, where Python wants them
ENTRY_POINTS = ("mlm_tpu.tokenizer.__main__", "mlm_tpu.downstream.__main__")
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


def names(prefix: str, module: str) -> bool:
    """Whether a unit's `prefix` names `module`: itself, or a module of the package it names (`mlm_tpu` only itself)."""
    return module == prefix or (prefix != "mlm_tpu" and module.startswith(prefix + "."))


def unit_of(module: str) -> Optional[Tuple[int, str]]:
    """(layer, unit) of a module: the unit whose prefix names it most closely; None if none does."""
    placed = [(len(prefix), rank, unit) for rank, units in enumerate(LAYERS) for unit, prefixes in units.items()
              for prefix in prefixes if names(prefix, module)]
    return max(placed)[1:] if placed else None


@functools.lru_cache(maxsize=None)
def import_graph() -> Dict[str, List[Tuple[int, str]]]:
    """Each module of mlm_tpu -> (line, module) of every other mlm_tpu module it imports; walked once for the tests
    that read it (not to be changed)."""
    graph = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = module_of(path)
        graph[module] = [(line, target) for line, target in
                         imports_of(path.read_text(encoding="utf-8"), module, path.name == "__init__.py")
                         if target != module]
    return graph


def circles(graph: Dict[str, List[Tuple[int, str]]]) -> List[List[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm): each holds a circle."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for _, target in graph.get(module, ()):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = [stack.pop()]
            while component[-1] != module:
                component.append(stack.pop())
            on_stack.difference_update(component)
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(found)


def wrong_arrows(graph: Dict[str, List[Tuple[int, str]]]) -> List[str]:
    """Every import that runs up to a higher layer, or sideways to another unit of the same layer."""
    wrong = []
    for module, targets in sorted(graph.items()):
        if module in ENTRY_POINTS:
            continue
        rank, unit = unit_of(module)
        for line, target in targets:
            target_rank, target_unit = unit_of(target)
            if target_rank > rank or (target_rank == rank and target_unit != unit):
                wrong.append(f"{module}:{line} ({unit}) imports {target} ({target_unit})")
    return wrong


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


def test_the_checker_finds_circles_and_arrows_that_run_up_or_sideways():
    graph = {"mlm_tpu.shards.a": [(1, "mlm_tpu.shards.b"), (2, "mlm_tpu.errors")],
             "mlm_tpu.shards.b": [(3, "mlm_tpu.shards.c")], "mlm_tpu.shards.c": [(4, "mlm_tpu.shards.a")],
             "mlm_tpu.errors": [], "mlm_tpu.training.task": [(5, "mlm_tpu.mlm.task")],
             "mlm_tpu.mlm.task": [(6, "mlm_tpu.t5.presets"), (7, "mlm_tpu.training.task")], "mlm_tpu.t5.presets": [],
             "mlm_tpu.tokenizer.__main__": [(8, "mlm_tpu.cli.main")], "mlm_tpu.cli.main": []}
    assert circles(graph) == [["mlm_tpu.mlm.task", "mlm_tpu.training.task"],
                              ["mlm_tpu.shards.a", "mlm_tpu.shards.b", "mlm_tpu.shards.c"]]
    assert wrong_arrows(graph) == ["mlm_tpu.mlm.task:6 (masked LM) imports mlm_tpu.t5.presets (T5)",
                                   "mlm_tpu.training.task:5 (training) imports mlm_tpu.mlm.task (masked LM)"]


def test_every_module_has_its_place_in_the_layers():
    graph = import_graph()
    assert len(graph) > 100 and "mlm_tpu.shards.sharding" in graph  # the walk found the package
    unplaced = [module for module in graph if unit_of(module) is None]
    assert not unplaced, f"give each module its place in LAYERS: {unplaced}"
    assert unit_of("mlm_tpu") == unit_of("mlm_tpu.api") != unit_of("mlm_tpu.anything")
    assert unit_of("mlm_tpu.shards.writer") < unit_of("mlm_tpu.training.trainer") < unit_of("mlm_tpu.mlm.task")


def test_the_import_graph_has_no_circles():
    found = circles(import_graph())
    assert not found, "import circles (move what both sides need below both):\n" + "\n".join(map(str, found))


def test_every_import_runs_down_the_layers():
    wrong = wrong_arrows(import_graph())
    assert not wrong, ("imports that run up the layers or sideways (hand it in through the task plug-in or the shard "
                       "kind, or move it down to a module both can import):\n" + "\n".join(wrong))


def test_the_entry_points_are_the_only_exceptions_and_import_only_the_command_line():
    graph = import_graph()
    for module in ENTRY_POINTS:
        assert {target for _, target in graph[module]} == {"mlm_tpu.cli.main"}, module


def missing_modules(paths) -> List[str]:
    """`file:line module` for each `import mlm_tpu.x` / `from mlm_tpu.x import ...` whose module does not exist: the
    graph above resolves such a name to its nearest parent package, so only this check sees it."""
    missing = []
    for path in paths:
        for node in ast.walk(parsed(path)):
            named = ([alias.name for alias in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and not node.level and node.module else [])
            missing += [f"{shown(path)}:{node.lineno} {name}" for name in named
                        if name.split(".")[0] == "mlm_tpu" and not is_module(name)]
    return missing


@functools.lru_cache(maxsize=None)
def parsed(path: Path) -> ast.Module:
    """A file's syntax tree, parsed once for the checks that read every file."""
    return ast.parse(path.read_text(encoding="utf-8"))


def shown(path: Path) -> str:
    """A file as a message names it: relative to the repository when it is in it."""
    return str(path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path)


def test_every_import_of_mlm_tpu_names_a_module_that_exists():
    """A module moved (shards/labelled.py -> encoder/labelled_rows.py) leaves no importer behind, in the package,
    its tests or its benchmarks: imports inside functions run only when called."""
    paths = [*PACKAGE.rglob("*.py"), *(REPO_ROOT / "tests").glob("*.py"), *(REPO_ROOT / "benchmarks").glob("*.py")]
    assert not missing_modules(paths), "imports of modules that do not exist:\n" + "\n".join(missing_modules(paths))


def top_level(statements) -> Iterator[ast.AST]:
    """The statements that run when a module is imported: its body, with the blocks of its ifs, trys, withs and
    loops, not the bodies of its functions and classes."""
    for node in statements:
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for field in ("body", "orelse", "finalbody", "handlers"):
                yield from top_level(getattr(node, field, ()))


@functools.lru_cache(maxsize=None)
def defined_names(module: str) -> Optional[FrozenSet[str]]:
    """The names `from module import name` finds, read from the source without running it: what its top level
    defines, assigns and imports, what its functions declare global, and, where it lends names through a
    module-level __getattr__ (mlm_tpu's API), the strings it lists; None when a star import from outside mlm_tpu
    makes them unknowable. Submodules are not among them (is_module sees those)."""
    relative = Path(*module.split("."))
    path = (REPO_ROOT / relative).with_suffix(".py")
    tree = parsed(path if path.is_file() else REPO_ROOT / relative / "__init__.py")
    found: Set[str] = {name for node in ast.walk(tree) if isinstance(node, ast.Global) for name in node.names}
    for node in top_level(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor, ast.With)):
            targets = [item.optional_vars for item in node.items if item.optional_vars] if isinstance(
                node, ast.With) else node.targets if isinstance(node, ast.Assign) else [node.target]
            found.update(name.id for target in targets for name in ast.walk(target) if isinstance(name, ast.Name))
        elif isinstance(node, ast.Import):
            found.update(alias.asname or alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name != "*":
                    found.add(alias.asname or alias.name)
                elif (node.module or "").split(".")[0] != "mlm_tpu" or node.level:
                    return None
                else:
                    starred = defined_names(node.module)
                    if starred is None:
                        return None
                    found.update(name for name in starred if not name.startswith("_"))
    if "__getattr__" in found:
        found.update(node.value for node in ast.walk(tree)
                     if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier())
    return frozenset(found)


def missing_names(paths) -> List[str]:
    """`file:line module.name` for each `from mlm_tpu.x import name` where the module x exists and neither defines,
    assigns nor imports `name` nor has a submodule of that name: the ImportError a renamed or moved function leaves
    in an importer that runs only when called (the graph and missing_modules see modules, not names)."""
    missing = []
    for path in paths:
        for node in ast.walk(parsed(path)):
            if not (isinstance(node, ast.ImportFrom) and not node.level and node.module
                    and node.module.split(".")[0] == "mlm_tpu" and is_module(node.module)):
                continue
            known = defined_names(node.module)
            missing += [f"{shown(path)}:{node.lineno} {node.module}.{alias.name}" for alias in node.names
                        if alias.name != "*" and known is not None and alias.name not in known
                        and not is_module(f"{node.module}.{alias.name}")]
    return missing


def test_the_name_checker_sees_a_name_its_module_does_not_have(tmp_path):
    importer = tmp_path / "importer.py"
    importer.write_text("""from mlm_tpu.errors import UserError, NoSuchError
from mlm_tpu import train_model, __version__, shards, not_in_the_api


def late():
    from mlm_tpu.shards.sharding import shard_corpus, shard_the_corpus
""", encoding="utf-8")
    assert missing_names([importer]) == [f"{importer}:1 mlm_tpu.errors.NoSuchError",
                                         f"{importer}:2 mlm_tpu.not_in_the_api",
                                         f"{importer}:6 mlm_tpu.shards.sharding.shard_the_corpus"]


def test_every_name_imported_from_mlm_tpu_is_in_its_module():
    """A function renamed or moved leaves no `from mlm_tpu.x import old_name` behind, in the package, its tests or its
    benchmarks: imports inside functions run only when called."""
    paths = [*PACKAGE.rglob("*.py"), *(REPO_ROOT / "tests").glob("*.py"), *(REPO_ROOT / "benchmarks").glob("*.py")]
    missing = missing_names(paths)
    assert not missing, "imports of names their module does not have:\n" + "\n".join(missing)


def test_importing_a_command_loads_no_tensorflow():
    """Each command module (mlm_tpu/cli) and the registry of tasks import without TensorFlow, as they did before the
    registry declared its heads with training/task.py's Head (whose type hints reached reading.py, and TensorFlow):
    the sharder, the tokenizer commands, --help and bad flags need none of it, and its start-up (seconds of CPU, in
    every such command and every test that runs one) had made the suite half again as long."""
    modules = sorted(module_of(path) for path in (PACKAGE / "cli").glob("*.py")) + ["mlm_tpu.tasks"]
    assert len(modules) > 10 and "mlm_tpu.cli.shard" in modules
    check = f"import sys\nfor m in {modules!r}:\n    __import__(m)\n    assert 'tensorflow' not in sys.modules, m\n"
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, cwd=REPO_ROOT, timeout=300,
                            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert result.returncode == 0, result.stderr[-2000:]
