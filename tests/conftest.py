"""Shared fixtures: the real WikiText text from ../shared, and running our commands for real."""

import csv
import importlib.util
import io
import json
import os
import pickle
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import List, Optional, Union

import pytest
from filelock import FileLock

REPO_ROOT = Path(__file__).resolve().parent.parent
WIKITEXT_VALID = REPO_ROOT.parent / "shared" / "data" / "wikitext-2" / "valid.txt"


FILE_SECONDS: dict = {}  # test file -> seconds of its tests (setup, call, teardown), gathered where reports arrive


def pytest_runtest_logreport(report):
    test_file = report.nodeid.split("::")[0]
    FILE_SECONDS[test_file] = FILE_SECONDS.get(test_file, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    """The 15 test files that took longest: `--dist loadfile` runs a file in one worker, so its total bounds the
    run's wall time as much as the sum does."""
    if FILE_SECONDS:
        terminalreporter.section("slowest test files (seconds, all their tests)")
        for name, seconds in sorted(FILE_SECONDS.items(), key=lambda item: -item[1])[:15]:
            terminalreporter.write_line(f"{seconds:8.1f}  {name}")
        terminalreporter.write_line(f"{sum(FILE_SECONDS.values()):8.1f}  in all")


@pytest.fixture(scope="session", autouse=True)
def user_cache(tmp_path_factory) -> Path:
    """mlm_tpu's cache folder (--pack's counts) in the session's temporary folder, for every command the tests run,
    instead of the user's ~/.cache."""
    folder = tmp_path_factory.mktemp("mlm-tpu-cache")
    os.environ["MLM_TPU_CACHE"] = str(folder)
    return folder


def made_once(tmp_path_factory, name: str, make, *arguments):
    """What `make(folder, *arguments)` returns, made once for the whole run, in a folder `name` of the run's
    temporary folder: with `pytest -n 2` each worker process has its own session fixtures, and both trained the same
    models; the first worker to ask makes it, the other waits for it (a file lock) and reads what it returned."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    root = tmp_path_factory.getbasetemp().parent if worker else tmp_path_factory.getbasetemp()
    folder, made = root / f"made-once-{name}", root / f"made-once-{name}.pickle"
    with FileLock(str(root / f"made-once-{name}.lock"), timeout=1800):
        if not made.is_file():
            shutil.rmtree(folder, ignore_errors=True)  # a worker's try that failed
            folder.mkdir()
            made.write_bytes(pickle.dumps(make(folder, *arguments)))
        return pickle.loads(made.read_bytes())


@pytest.fixture(scope="session")
def wikitext_path() -> Path:
    if not WIKITEXT_VALID.is_file():
        pytest.skip(f"real text not found: {WIKITEXT_VALID} (the project's ../shared folder is absent)")
    return WIKITEXT_VALID


def pytorch_python() -> str:
    """A Python with torch and transformers: MLM_TPU_PYTORCH_PYTHON (say, a venv with transformers 5), or this one."""
    configured = os.environ.get("MLM_TPU_PYTORCH_PYTHON")
    if configured:
        return configured
    if importlib.util.find_spec("torch") is None:
        pytest.skip("PyTorch is not installed here (the project needs none); set MLM_TPU_PYTORCH_PYTHON to a Python "
                    "with torch and transformers 5 to run this check")
    return sys.executable


def run_module(module: str, *args: str, env_overrides=None, stdin: str = "") -> subprocess.CompletedProcess:
    """Run `python -m module args...` as a user would, offline, and capture what it prints."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO_ROOT), **(env_overrides or {})}
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
                          input=stdin, env=env, cwd=REPO_ROOT, timeout=600)


@pytest.fixture
def in_process(capsys, monkeypatch):
    """`in_process(command, *arguments)`: `mlm-tpu command arguments` (command None: bare `mlm-tpu`) run in this
    process as the console script runs it, offline; a CompletedProcess (exit code, what it printed). Bad input is
    checked the same way as in a process of its own (exit 2, one error line, nothing left behind) without a new
    process's seconds of TensorFlow start-up; runs that train, and those killed, have their own (run_train)."""
    import huggingface_hub.constants
    import transformers.utils.hub

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # read once, when the libraries are imported: a row naming what looks like a Hub model must not wait for the network
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(transformers.utils.hub, "_is_offline_mode", True)

    def run(command: Optional[str], *arguments, stdin: Union[str, bytes, None] = None) -> subprocess.CompletedProcess:
        from mlm_tpu.cli import run_command
        from mlm_tpu.cli.main import main

        argv = [str(argument) for argument in ((command,) if command else ()) + arguments]
        if stdin is not None:  # piped in, as a user's `echo ... |` gives it (bytes: in another encoding)
            stream = io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8") if isinstance(stdin, str) else stdin),
                                      encoding="utf-8")
            stream.isatty = lambda: False
            monkeypatch.setattr(sys, "stdin", stream)
        capsys.readouterr()
        try:
            run_command(main, argv)
            code = 0
        except SystemExit as stop:
            code = stop.code or 0
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(argv, code, out, err)

    return run


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
    def make(folder):
        output_dir = folder / "wikitext-unigram"
        result = run_module("mlm_tpu.tokenizer", "train", "--text-files", str(wikitext_path), "--vocab-size", "2000",
                            "--output-dir", str(output_dir))
        assert result.returncode == 0, result.stderr
        return output_dir, result

    return made_once(tmp_path_factory, "tokenizer", make)


MAX_LENGTH = 64


def run_train(*flags, **kwargs):
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1", **kwargs.pop("env", {})}
    return subprocess.run([sys.executable, str(REPO_ROOT / "train.py"), *map(str, flags)], capture_output=True,
                          text=True, env=env, cwd=REPO_ROOT, timeout=600, **kwargs)


def train_until_killed(flags, ready, stderr=subprocess.DEVNULL, timeout: float = 300) -> None:
    """Start `python train.py flags`, and kill it (-9, as a preemption does) as soon as `ready()` is true."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1"}
    process = subprocess.Popen([sys.executable, str(REPO_ROOT / "train.py"), *map(str, flags)], env=env,
                               stdout=subprocess.DEVNULL, stderr=stderr, cwd=REPO_ROOT)
    deadline = time.monotonic() + timeout
    while process.poll() is None and time.monotonic() < deadline and not ready():
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL, "training finished before it could be killed"


def backup_reached(output_dir: Path, step: int) -> bool:
    """Whether the trainer has written a backup at `step` or later (its step-N.json, written last, is there)."""
    backup = output_dir / "backup"
    return backup.is_dir() and any(int(name[5:-5]) >= step for name in os.listdir(backup)
                                   if name.startswith("step-") and name.endswith(".json"))


@pytest.fixture(scope="session")
def shards(tmp_path_factory, wikitext_tokenizer, wikitext_path):
    """Train and validation shards of WikiText-2 validation text, 64-token examples."""
    def make(output_dir):
        for split, limit in (("train", "600"), ("validation", "150")):
            result = run_module("mlm_tpu.shard", "--tokenizer", str(wikitext_tokenizer[0]), "--text-files",
                                str(wikitext_path), "--limit", limit, "--split", split, "--max-length",
                                str(MAX_LENGTH), "--shard-size", "200", "--output-dir", str(output_dir))
            assert result.returncode == 0, result.stderr
        return output_dir

    return made_once(tmp_path_factory, "train-shards", make)


@pytest.fixture(scope="session")
def trained_mlm(tmp_path_factory, shards, wikitext_tokenizer):
    """A tiny RoBERTa trained 3 epochs by the real `python train.py`, loss logged every 5 steps; (folder, run)."""
    def make(folder):
        output_dir = folder / "model"
        result = run_train("--train-dataset", shards / "train", "--eval-dataset", shards / "validation",
                           "--tokenizer", wikitext_tokenizer[0], "--max-length", MAX_LENGTH, "--model-config", "tiny",
                           "--learning-rate", "3e-3", "--output-dir", output_dir, "--per-replica-batch-size", 16,
                           "--num-epochs", 3, "--logging-steps", 5)
        assert result.returncode == 0, result.stderr[-3000:]
        return output_dir, result

    return made_once(tmp_path_factory, "trained", make)


# Text-to-text (T5): synthetic tasks a tiny model learns in a minute on the CPU, made from real WikiText words.
CLASSES = {"low": "sloppy", "good": "decent", "high": "excellent"}  # label -> the word in the input that gives it away
T5_MAX_LENGTH, T5_MAX_TARGET_LENGTH = 48, 4


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def quality_rows(words, count, seed):
    """Questions with a title and a body; the body holds the word that gives the label away."""
    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        label = rng.choice(sorted(CLASSES))
        body = rng.sample(words, rng.randint(4, 40))  # the longest inputs are cut to their head and tail
        body.insert(rng.randint(0, len(body)), CLASSES[label])
        rows.append({"title": " ".join(rng.sample(words, 4)), "body": " ".join(body), "label": label})
    return rows


def make_t5_data(folder: Path, wikitext_path: Path) -> SimpleNamespace:
    """The classification rows (quality-train/validation.jsonl) and a T5 tokenizer trained by the real command on
    WikiText and the task's text, in `folder` (also benchmarks/delta_tuning.py's)."""
    counts = Counter(w for w in wikitext_path.read_text(encoding="utf-8").split() if w.isalpha() and w.islower())
    words = sorted(word for word, _ in counts.most_common(400) if word not in CLASSES.values())
    splits = {"train": quality_rows(words, 600, seed=1), "validation": quality_rows(words, 150, seed=2)}
    for split, rows in splits.items():
        write_jsonl(folder / f"quality-{split}.jsonl", rows)
    corpus = folder / "tokenizer-corpus.txt"
    task_lines = [line for row in splits["train"] for line in (row["title"], row["body"])]
    labels = [label for label in CLASSES for _ in range(1000)]  # so that every label is one piece
    corpus.write_text(wikitext_path.read_text(encoding="utf-8") + "\n".join(task_lines + labels) + "\n",
                      encoding="utf-8")
    tokenizer_dir = folder / "t5-tokenizer"
    result = run_module("mlm_tpu.tokenizer", "train", "--template", "t5", "--text-files", str(corpus),
                        "--vocab-size", "3000", "--output-dir", str(tokenizer_dir))
    assert result.returncode == 0, result.stderr
    return SimpleNamespace(folder=folder, tokenizer=tokenizer_dir, words=words)


@pytest.fixture(scope="session")
def t5_data(tmp_path_factory, wikitext_path):
    """A T5 tokenizer (trained by the real command on WikiText and the task's text) and the classification rows."""
    return made_once(tmp_path_factory, "t5-data", make_t5_data, wikitext_path)


def shard_text2text(tokenizer, files, output_dir, split, *flags):
    result = run_module("mlm_tpu.shard", "--task", "text2text", "--tokenizer", str(tokenizer), "--text-files",
                        *map(str, files), "--split", split, "--output-dir", str(output_dir), *map(str, flags))
    assert result.returncode == 0, result.stderr
    return result


@pytest.fixture(scope="session")
def quality_shards(t5_data, tmp_path_factory):
    """The 3-class task as text-to-text shards: "quality: title\\nbody" -> low / high / none."""
    def make(output_dir):
        for split in ("train", "validation"):
            shard_text2text(t5_data.tokenizer, [t5_data.folder / f"quality-{split}.jsonl"], output_dir, split,
                            "--input-column", "title", "--input-column", "body", "--target-column", "label",
                            "--source-prefix", "quality:", "--max-length", T5_MAX_LENGTH, "--max-target-length",
                            T5_MAX_TARGET_LENGTH, "--shard-size", 200)
        return output_dir

    return made_once(tmp_path_factory, "quality-shards", make)


def write_copy_rows(path: Path, words: List[str], tokenizer, count: int, seed: int) -> Path:
    """A CSV of the copy task: a source of filler words around a two-word span (a word of one set, then one of
    another), the span as the target; words the tokenizer keeps whole."""
    from transformers import AutoTokenizer

    pieces = AutoTokenizer.from_pretrained(tokenizer)
    whole = [w for w in words if len(w) > 2 and len(pieces(w, add_special_tokens=False)["input_ids"]) == 1]
    first, second, filler = whole[:10], whole[10:20], whole[20:60]
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["source", "target"])
        for _ in range(count):
            chosen = rng.choices(filler, k=rng.randint(3, 7))
            span = [rng.choice(first), rng.choice(second)]
            at = rng.randint(0, len(chosen))
            writer.writerow([" ".join(chosen[:at] + span + chosen[at:]), " ".join(span)])
    return path


@pytest.fixture(scope="session")
def copy_shards(t5_data, tmp_path_factory):
    """A generation task from CSV files: copy the two-word span (a word of one set, then one of another) out of
    filler words."""
    def make(output_dir):
        for split, count, seed in (("train", 2000, 3), ("validation", 100, 4)):
            path = write_copy_rows(t5_data.folder / f"copy-{split}.csv", t5_data.words, t5_data.tokenizer, count, seed)
            shard_text2text(t5_data.tokenizer, [path], output_dir, split, "--input-column", "source",
                            "--target-column", "target", "--source-prefix", "copy:", "--max-length", 16,
                            "--max-target-length", 4, "--shard-size", 1000)
        return output_dir

    return made_once(tmp_path_factory, "copy-shards", make)


def t5_flags(shards, tokenizer, output_dir, task):
    return ["--head", "t5", "--task", task, "--train-dataset", shards / "train", "--eval-dataset",
            shards / "validation", "--tokenizer", tokenizer, "--model-config", "t5-tiny", "--learning-rate", "3e-3",
            "--per-replica-batch-size", 16, "--output-dir", output_dir]


def train_t5(folder: Path, shards, tokenizer, task: str, epochs: int):
    """A tiny T5 trained from scratch by the real `python train.py --head t5`; (folder, run)."""
    output_dir = folder / "model"
    result = run_train(*t5_flags(shards, tokenizer, output_dir, task), "--num-epochs", epochs)
    assert result.returncode == 0, result.stderr[-3000:]
    return output_dir, result


@pytest.fixture(scope="session")
def trained_classifier(tmp_path_factory, quality_shards, t5_data):
    """The 3-class task, learned from scratch."""
    return made_once(tmp_path_factory, "t5-classifier", train_t5, quality_shards, t5_data.tokenizer, "classification",
                     12)


@pytest.fixture(scope="session")
def trained_copier(tmp_path_factory, copy_shards, t5_data):
    """Copying spans, learned from scratch."""
    return made_once(tmp_path_factory, "t5-copier", train_t5, copy_shards, t5_data.tokenizer, "generation", 3)


# Short text-to-text examples (for --pack), with the T5 tokenizer of tests/fixtures/made-by-0.2.
MADE_BY_0_2 = Path(__file__).parent / "fixtures" / "made-by-0.2"
WORDS = ("the of and in to was is for on as with by he at from his an were are which this also be or had first one "
         "their its new after but who not they have her she two been other when there all during into school time "
         "may years more most only over city some world would where later up such used many can state about").split()


@pytest.fixture(scope="session")
def short_shards(tmp_path_factory):
    """80 text-to-text examples of 2 to 8 words in rows of 64 tokens, targets of 1 or 2 words in 16 tokens, sharded
    by the real command with the fixture's T5 tokenizer."""
    def make(folder):
        rng = random.Random(7)
        rows = [{"text": " ".join(rng.choices(WORDS, k=rng.randint(2, 8))),
                 "target": " ".join(rng.choices(WORDS, k=rng.randint(1, 2)))} for _ in range(80)]
        path = write_jsonl(folder / "short.jsonl", rows)
        shard_text2text(MADE_BY_0_2 / "t5-tokenizer", [path], folder / "shards", "train", "--input-column", "text",
                        "--target-column", "target", "--max-length", 64, "--max-target-length", 16, "--shard-size",
                        30)
        return folder / "shards" / "train"

    return made_once(tmp_path_factory, "short", make)


def global_batches(layout, host_dataset, steps: int) -> list:
    """Each step's global batch ({name: numpy array}) put together from every host's batches for each of its
    replicas, `host_dataset(host)` being that host's input pipeline (as distributed_dataset calls it)."""
    import numpy as np

    streams = [iter(host_dataset(host)) for host in range(layout.hosts)]
    found = []
    for _ in range(steps):
        parts = [next(stream) for stream in streams for _ in range(layout.replicas_per_host)]
        assert all(len(part["labels"]) == layout.rows_per_replica for part in parts)
        found.append({name: np.concatenate([part[name].numpy() for part in parts]) for name in parts[0]})
    return found


def assert_same_batches(found: list, expected: list) -> None:
    import numpy as np

    assert len(found) == len(expected)
    for one, other in zip(found, expected):
        assert one.keys() == other.keys()
        for name in one:
            np.testing.assert_array_equal(one[name], other[name], err_msg=name)
