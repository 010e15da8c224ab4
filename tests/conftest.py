"""Shared fixtures: the real WikiText text from ../shared, and running our commands for real."""

import os
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
WIKITEXT_VALID = REPO_ROOT.parent / "shared" / "data" / "wikitext-2" / "valid.txt"


@pytest.fixture(scope="session")
def wikitext_path() -> Path:
    if not WIKITEXT_VALID.is_file():
        pytest.skip(f"real text not found: {WIKITEXT_VALID} (the project's ../shared folder is absent)")
    return WIKITEXT_VALID


def run_module(module: str, *args: str, env_overrides=None, stdin: str = "") -> subprocess.CompletedProcess:
    """Run `python -m module args...` as a user would, offline, and capture what it prints."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO_ROOT), **(env_overrides or {})}
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
                          input=stdin, env=env, cwd=REPO_ROOT, timeout=600)


def assert_user_error(result: subprocess.CompletedProcess, *phrases: str) -> str:
    """The command failed the way bad input must: exit 2, no traceback, one `error:` line naming it."""
    assert result.returncode == 2, f"exit {result.returncode}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    assert "Traceback" not in result.stderr, result.stderr
    error_lines: List[str] = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(error_lines) == 1, result.stderr
    for phrase in phrases:
        assert phrase in error_lines[0], f"{phrase!r} not in {error_lines[0]!r}"
    return error_lines[0]


@pytest.fixture(scope="session")
def wikitext_tokenizer(tmp_path_factory, wikitext_path):
    """A 2,000-piece tokenizer trained on WikiText-2 validation by the real command; (folder, run)."""
    output_dir = tmp_path_factory.mktemp("tokenizer") / "wikitext-unigram"
    result = run_module("mlm_tpu.tokenizer", "train", "--text-files", str(wikitext_path), "--vocab-size", "2000",
                        "--output-dir", str(output_dir))
    assert result.returncode == 0, result.stderr
    return output_dir, result


MAX_LENGTH = 64


def run_train(*flags, **kwargs):
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1", **kwargs.pop("env", {})}
    return subprocess.run([sys.executable, str(REPO_ROOT / "train.py"), *map(str, flags)], capture_output=True,
                          text=True, env=env, cwd=REPO_ROOT, timeout=600, **kwargs)


@pytest.fixture(scope="session")
def shards(tmp_path_factory, wikitext_tokenizer, wikitext_path):
    """Train and validation shards of WikiText-2 validation text, 64-token examples."""
    output_dir = tmp_path_factory.mktemp("train-shards")
    for split, limit in (("train", "600"), ("validation", "150")):
        result = run_module("mlm_tpu.shard", "--tokenizer", str(wikitext_tokenizer[0]), "--text-files",
                            str(wikitext_path), "--limit", limit, "--split", split, "--max-length", str(MAX_LENGTH),
                            "--shard-size", "200", "--output-dir", str(output_dir))
        assert result.returncode == 0, result.stderr
    return output_dir


@pytest.fixture(scope="session")
def trained_mlm(tmp_path_factory, shards, wikitext_tokenizer):
    """A tiny RoBERTa trained 3 epochs by the real `python train.py`, loss logged every 5 steps; (folder, run)."""
    output_dir = tmp_path_factory.mktemp("trained") / "model"
    result = run_train("--train-dataset", shards / "train", "--eval-dataset", shards / "validation", "--tokenizer",
                       wikitext_tokenizer[0], "--max-length", MAX_LENGTH, "--model-config", "tiny", "--learning-rate",
                       "3e-3", "--output-dir", output_dir, "--per-replica-batch-size", 16, "--num-epochs", 3,
                       "--logging-steps", 5)
    assert result.returncode == 0, result.stderr[-3000:]
    return output_dir, result
