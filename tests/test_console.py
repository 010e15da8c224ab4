"""The console command `mlm-tpu` (pyproject's [project.scripts]) in the project's environment, and the README's
worked Python example, run for real (the docstrings' examples run in test_docs.py)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT, assert_user_error

MLM_TPU = Path(sys.executable).parent / "mlm-tpu"
COMMANDS = ("tokenizer", "shard", "train", "evaluate", "predict", "inspect", "plot", "export", "demo")


def run_console(*args: str, cwd=REPO_ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run([str(MLM_TPU), *map(str, args)], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=600)


def test_mlm_tpu_is_installed_and_lists_its_commands():
    assert MLM_TPU.is_file(), f"{MLM_TPU} missing: scripts/setup.sh installs the package with its console scripts"
    result = run_console("--help")
    assert result.returncode == 0 and all(command in result.stdout for command in COMMANDS)
    assert run_console("frobnicate").returncode == 2


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_has_the_flags_of_its_python_m_twin(command):
    result = run_console(command, *(["train"] if command == "tokenizer" else []), "--help")
    assert result.returncode == 0, result.stderr
    assert f"mlm-tpu {command}" in result.stdout
    twin = {"tokenizer": "--vocab-size", "shard": "--shard-size", "train": "--steps-per-execution",
            "evaluate": "--eval-dataset", "predict": "--top-k", "inspect": "--num-examples", "plot": "RUN_DIR", "export": "--hub-model-id",
            "demo": "--num-epochs"}[command]
    assert twin in result.stdout


HELP_PAGES = {  # every command's --help (sub-commands included), and the flags that have no default
    "tokenizer train": ("--output-dir",), "tokenizer encode": ("--tokenizer",), "shard": ("--tokenizer", "--output-dir"),
    "train": ("--train-dataset", "--output-dir"), "evaluate": ("--model", "--eval-dataset"),
    "predict fill-mask": ("--model",), "predict text2text": ("--model",), "inspect": ("--dataset", "--tokenizer"),
    "plot": (), "export": ("--model",), "demo": (),
}


@pytest.mark.parametrize("page", HELP_PAGES)
def test_help_says_required_where_a_flag_has_no_default(page, capsys):
    from mlm_tpu.cli.main import main

    with pytest.raises(SystemExit) as stop:
        main([*page.split(), "--help"])
    assert stop.value.code == 0
    text = capsys.readouterr().out
    assert "object at 0x" not in text and "MISSING" not in text, text
    entries = re.split(r"\n(?=  -)", text)  # one entry per flag: its names, then its help
    for flag in HELP_PAGES[page]:
        entry = next(entry for entry in entries if entry.lstrip().startswith(flag + " "))
        assert "(required)" in " ".join(entry.split()), entry


def test_a_console_command_does_the_work_and_bad_input_is_one_line(tmp_path):
    result = run_console("tokenizer", "train", "--builtin-corpus", "pydoc-topics", "--limit", "300", "--vocab-size",
                         "300", "--output-dir", tmp_path / "tok")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "tok" / "tokenizer.json").is_file()
    assert_user_error(run_console("shard", "--tokenizer", tmp_path / "tok", "--builtin-corpus", "pydoc-topics",
                                  "--output-dir", tmp_path / "shards", "--shard-size", "0"),
                      "--shard-size must be at least 1")


def run_python(code: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=cwd, timeout=600)


@pytest.mark.slow
def test_the_readme_python_example_runs(tmp_path):
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    example = re.search(r"## From Python\n.*?```python\n(.*?)```", readme, re.S).group(1)
    result = run_python(example, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "runs" / "api" / "model" / "tf_model.h5").is_file()
    assert "masked_accuracy" in result.stdout
