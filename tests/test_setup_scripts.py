"""The README's two commands set up what they run, each on a fresh machine: `bash scripts/demo.sh` installs the
package and its [downstream] extra only (a newcomer's first run waits for no test or docs tool), `bash
scripts/test.sh` (CI's .ci/run, and docs.sh) the test and docs tools too, on top, once.

The scripts run for real (bash) in a copy of the scripts and the requirement files, with a Python whose venv's
`python` and `mkdocs` note what they are asked (each pip install, the demo, pytest, mkdocs) instead of doing it.
"""

import os
import shutil
import subprocess
from pathlib import Path

from conftest import REPO_ROOT

FILES = ("scripts", ".ci", "requirements.txt", "requirements-dev.txt", "requirements-reference.txt", "pyproject.toml")
NOTING = '#!/usr/bin/env bash\necho "$(basename "$0") $*" >> "$(dirname "$0")/../../calls.log"\n'
# the Python of a fresh machine: `-m venv DIR` makes DIR/bin with the noting python and mkdocs
FRESH_PYTHON = f"""#!/usr/bin/env bash
case "$1" in
  -c) exit 0 ;;
  --version) echo "Python 3.12.0" ;;
  -m) mkdir -p "$3/bin"
      for tool in python mkdocs; do printf '%s' '{NOTING}' > "$3/bin/$tool"; chmod +x "$3/bin/$tool"; done ;;
esac
"""
UPGRADE_PIP = "python -m pip install --quiet --upgrade pip"
REFERENCE = "python -m pip install --quiet --no-deps -r requirements-reference.txt"  # its folder, not PyTorch
PACKAGE = "python -m pip install --quiet -e .[downstream]"
FULL = "python -m pip install --quiet -r requirements-dev.txt -e .[downstream]"
PYTEST = "python -m pytest -n 2 --dist loadfile --durations=25"


def checkout(folder: Path) -> Path:
    for name in FILES:
        source = REPO_ROOT / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, folder / name)
    python = folder / "fresh-python3"
    python.write_text(FRESH_PYTHON)
    python.chmod(0o755)
    return folder


def run(repo: Path, *command: str) -> list:
    """What `bash command` asked of the venv's tools."""
    log = repo / "calls.log"
    before = len(log.read_text().splitlines()) if log.exists() else 0
    result = subprocess.run(["bash", *command], cwd=repo, capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHON": str(repo / "fresh-python3")})
    assert result.returncode == 0, result.stderr
    return log.read_text().splitlines()[before:] if log.exists() else []


def test_the_demo_installs_the_package_and_the_tests_add_their_tools_once(tmp_path):
    repo = checkout(tmp_path)
    assert run(repo, "scripts/demo.sh", "--task-rows", "8") == [UPGRADE_PIP, PACKAGE, REFERENCE,
                                                                 "python -m mlm_tpu.demo --task-rows 8"]
    assert (repo / ".venv" / "bin" / "python").is_file()  # made by the demo on the fresh machine
    assert run(repo, "scripts/demo.sh") == ["python -m mlm_tpu.demo"]
    assert run(repo, "scripts/test.sh", "-k", "demo") == [UPGRADE_PIP, FULL, REFERENCE, f"{PYTEST} -k demo"]
    assert run(repo, ".ci/run") == [PYTEST]
    assert run(repo, "scripts/docs.sh", "--build") == ["mkdocs build --strict"]
    assert run(repo, "scripts/demo.sh") == ["python -m mlm_tpu.demo"]

    with open(repo / "requirements-dev.txt", "a") as dev:
        dev.write("another-test-tool\n")
    assert run(repo, "scripts/demo.sh") == ["python -m mlm_tpu.demo"]  # not a tool the demo needs
    assert run(repo, "scripts/test.sh") == [UPGRADE_PIP, FULL, REFERENCE, PYTEST]
    with open(repo / "requirements.txt", "a") as package:
        package.write("another-dependency\n")
    assert run(repo, "scripts/demo.sh") == [UPGRADE_PIP, PACKAGE, REFERENCE, "python -m mlm_tpu.demo"]


def test_the_tests_first_install_everything_once_and_the_demo_then_nothing(tmp_path):
    repo = checkout(tmp_path)
    assert run(repo, ".ci/run") == [UPGRADE_PIP, FULL, REFERENCE, PYTEST]
    assert run(repo, "scripts/demo.sh") == ["python -m mlm_tpu.demo"]
    assert run(repo, "scripts/test.sh") == [PYTEST]


def test_setup_refuses_an_unknown_argument_in_one_line(tmp_path):
    repo = checkout(tmp_path)
    result = subprocess.run(["bash", "scripts/setup.sh", "--tests"], cwd=repo, capture_output=True, text=True,
                            timeout=60, env={**os.environ, "PYTHON": str(repo / "fresh-python3")})
    assert result.returncode == 2 and result.stderr.splitlines() == [
        "error: scripts/setup.sh takes --dev (the test and docs tools too) or nothing, not '--tests'"]
    assert not (repo / ".venv").exists()
