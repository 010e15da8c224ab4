"""Run the `>>>` examples of a module's docstrings the way a reader pastes them: in source order, each going on in the
namespace the ones before it left (as in one notebook). `python tests/doc_examples.py MODULE` exits 1 if one fails
or the module has none; tests/test_docs.py runs it for every module of mlm_tpu that has examples."""

import doctest
import importlib
import sys
from pathlib import Path
from typing import List

PACKAGE = Path(__file__).resolve().parent.parent / "mlm_tpu"


def modules_with_examples() -> List[str]:
    """Every module of mlm_tpu whose source holds a `>>>` example."""
    return sorted(".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
                  for path in PACKAGE.rglob("*.py") if ">>> " in path.read_text(encoding="utf-8"))


def run_examples(module_name: str) -> doctest.TestResults:
    module = importlib.import_module(module_name)
    tests = sorted((test for test in doctest.DocTestFinder().find(module) if test.examples), key=lambda t: t.lineno)
    namespace = dict(vars(module))
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in tests:
        test.globs = namespace
        runner.run(test, clear_globs=False)
    return runner.summarize(verbose=False)


if __name__ == "__main__":
    results = run_examples(sys.argv[1])
    print(f"{sys.argv[1]}: {results.attempted} examples, {results.failed} failed")
    sys.exit(1 if results.failed or not results.attempted else 0)
