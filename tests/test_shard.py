"""`python -m mlm_tpu.shard` to a local folder: contents, names, manifest, determinism, restarts, bad input."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from transformers import AutoTokenizer

from conftest import REPO_ROOT, assert_user_error, run_module
from mlm_tpu.output_dir import crc32c_base64

REFERENCE_COUNT_REGEX = r"-\d+-(\d+)\.tfrecord"  # what the reference training script sums


def shard(tokenizer_dir, output_dir, *flags, **kwargs):
    return run_module("mlm_tpu.shard", "--tokenizer", str(tokenizer_dir), "--output-dir", str(output_dir), *flags,
                      **kwargs)


def all_files(folder):
    """Every file under `folder` (hidden ones too), relative path -> bytes."""
    return {os.path.relpath(os.path.join(root, name), folder): open(os.path.join(root, name), "rb").read()
            for root, _, names in os.walk(folder) for name in names}


@pytest.fixture(scope="module")
def sharded(tmp_path_factory, wikitext_tokenizer, wikitext_path):
    output_dir = tmp_path_factory.mktemp("shards") / "wikitext"
    result = shard(wikitext_tokenizer[0], output_dir, "--text-files", str(wikitext_path), "--max-length", "128",
                   "--shard-size", "100")
    assert result.returncode == 0, result.stderr
    return output_dir, result


def expected_token_stream(tokenizer_dir, wikitext_path):
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    documents = [line.strip() for line in wikitext_path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return documents, np.concatenate(tokenizer(documents)["input_ids"])


def test_records_decode_with_the_reference_schema_and_hold_the_whole_token_stream(
        sharded, wikitext_tokenizer, wikitext_path):
    import tensorflow as tf

    split_dir = sharded[0] / "train"
    files = sorted(tf.io.gfile.glob(str(split_dir / "*.tfrecord")))
    counted = sum(int(re.search(REFERENCE_COUNT_REGEX, name).group(1)) for name in files)
    schema = {"input_ids": tf.io.FixedLenFeature([128], tf.int64),
              "attention_mask": tf.io.FixedLenFeature([128], tf.int64)}
    records = list(tf.data.TFRecordDataset(files).map(lambda r: tf.io.parse_single_example(r, schema))
                   .as_numpy_iterator())
    assert counted == len(records) > 100

    documents, stream = expected_token_stream(wikitext_tokenizer[0], wikitext_path)
    assert len(records) == len(stream) // 128  # only the final remainder is dropped
    expected = stream[:len(records) * 128].reshape(-1, 128)
    assert np.array_equal(np.stack([r["input_ids"] for r in records]), expected)
    assert all((r["attention_mask"] == 1).all() for r in records)
    assert (stream == 0).sum() == len(documents)  # every document kept its [CLS]


def test_names_counts_and_manifest(sharded, wikitext_tokenizer, wikitext_path):
    output_dir, result = sharded
    split_dir = output_dir / "train"
    manifest = json.loads((split_dir / "manifest.json").read_text())
    documents, stream = expected_token_stream(wikitext_tokenizer[0], wikitext_path)
    names = sorted(n for n in os.listdir(split_dir) if n.endswith(".tfrecord"))
    assert sorted(os.listdir(split_dir)) == sorted(names + ["manifest.json"])  # no progress or temp file left
    assert [entry["name"] for entry in manifest["shards"]] == names
    assert names[0] == "dataset-00000-100.tfrecord" and all(e["count"] == 100 for e in manifest["shards"][:-1])
    for entry in manifest["shards"]:
        data = (split_dir / entry["name"]).read_bytes()
        assert entry["bytes"] == len(data) and entry["crc32c"] == crc32c_base64(data)
        assert entry["name"].endswith(f"-{entry['count']}.tfrecord")
    assert manifest["records"] == sum(e["count"] for e in manifest["shards"]) == len(stream) // 128
    assert manifest["tokens"] == manifest["records"] * 128
    assert (manifest["documents"], manifest["corpus_tokens"]) == (len(documents), len(stream))
    assert manifest["dropped_tokens"] == len(stream) % 128
    assert manifest["settings"]["max_length"] == 128 and manifest["settings"]["split"] == "train"
    assert len(manifest["settings"]["tokenizer_fingerprint"]) == 16
    assert f"{manifest['dropped_tokens']:,} dropped at the end" in result.stderr
    assert f"in {len(names)} shards" in result.stderr


def test_same_input_and_flags_give_byte_identical_shards(sharded, wikitext_tokenizer, wikitext_path, tmp_path):
    result = shard(wikitext_tokenizer[0], tmp_path / "again", "--text-files", str(wikitext_path),
                   "--max-length", "128", "--shard-size", "100", "--num-workers", "1")
    assert result.returncode == 0, result.stderr
    assert all_files(tmp_path / "again") == all_files(sharded[0])


def test_a_finished_split_is_kept_other_settings_are_refused_and_overwrite_replaces(
        wikitext_tokenizer, tmp_path):
    tokenizer, out = wikitext_tokenizer[0], tmp_path / "out"
    flags = ["--builtin-corpus", "pydoc-topics", "--limit", "300", "--max-length", "64", "--shard-size", "50"]
    assert shard(tokenizer, out, *flags).returncode == 0
    before = all_files(out)
    again = shard(tokenizer, out, *flags)
    assert again.returncode == 0 and "already complete" in again.stderr
    assert all_files(out) == before
    other = [f if f != "64" else "32" for f in flags]
    assert_user_error(shard(tokenizer, out, *other), "other settings", "max_length", "--overwrite")
    assert all_files(out) == before
    replaced = shard(tokenizer, out, *other, "--overwrite")
    assert replaced.returncode == 0, replaced.stderr
    manifest = json.loads((out / "train" / "manifest.json").read_text())
    assert manifest["settings"]["max_length"] == 32
    assert sorted(n for n in os.listdir(out / "train") if n.endswith(".tfrecord")) == \
        [entry["name"] for entry in manifest["shards"]]  # no shard of the old run is left


def test_foreign_shards_in_the_output_are_not_mixed_in(wikitext_tokenizer, tmp_path):
    (tmp_path / "out" / "train").mkdir(parents=True)
    (tmp_path / "out" / "train" / "other-0-10.tfrecord").write_bytes(b"")
    result = shard(wikitext_tokenizer[0], tmp_path / "out", "--builtin-corpus", "pydoc-topics", "--limit", "50")
    assert_user_error(result, "other-0-10.tfrecord", "mlm_tpu did not write", "even with --overwrite")


@pytest.mark.slow
def test_killed_run_rerun_with_the_same_command_ends_identical_to_a_clean_run(wikitext_tokenizer, wikitext_path,
                                                                             tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(wikitext_path.read_text(encoding="utf-8") * 3, encoding="utf-8")
    flags = ["--text-files", str(corpus), "--max-length", "64", "--shard-size", "5", "--batch-size", "200"]
    clean = shard(wikitext_tokenizer[0], tmp_path / "clean", *flags)
    assert clean.returncode == 0, clean.stderr

    interrupted = tmp_path / "interrupted"
    command = [sys.executable, "-m", "mlm_tpu.shard", "--tokenizer", str(wikitext_tokenizer[0]),
               "--output-dir", str(interrupted), *flags]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1"}
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    progress = interrupted / "train" / ".dataset-progress.json"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if json.loads(progress.read_text())["shards"] >= 100:
                break
        except (OSError, ValueError):
            pass
        time.sleep(0.005)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    assert not (interrupted / "train" / "manifest.json").exists()
    written = len([n for n in os.listdir(interrupted / "train") if n.endswith(".tfrecord")])
    assert 100 <= written < len(json.loads((tmp_path / "clean" / "train" / "manifest.json").read_text())["shards"])

    rerun = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert "Resuming:" in rerun.stderr and "already written and verified" in rerun.stderr
    assert all_files(interrupted) == all_files(tmp_path / "clean")


# Runs `python -m mlm_tpu.shard ARGS` with its claim made at one instant shared with another job: the process says
# it is ready (BARRIER.ready.PID), the test writes the instant to BARRIER once both are, and the claim waits for it,
# plus DELAY seconds. From then on each call that makes, lists, reads or removes files takes LATENCY seconds more, as
# on a network file system or a loaded machine: what one job does to the folder meets the other's steps.
CLAIM_TOGETHER = """import functools, os, runpy, sys, time
import mlm_tpu.claim
acquire, barrier, delay, latency = mlm_tpu.claim.Claim.acquire, *sys.argv[1:4]
del sys.argv[1:4]
def slow(call):
    @functools.wraps(call)
    def after_a_while(*args, **kwargs):
        time.sleep(float(latency))
        return call(*args, **kwargs)
    return after_a_while
def acquire_together(self):
    open(f"{barrier}.ready.{os.getpid()}", "w").close()
    deadline = time.monotonic() + 300
    while not os.path.exists(barrier) and time.monotonic() < deadline:
        time.sleep(0.001)
    start = float(open(barrier).read()) + float(delay)
    while time.time() < start:
        pass
    for name in ("open", "stat", "listdir", "remove", "link", "replace"):
        setattr(os, name, slow(getattr(os, name)))
    acquire(self)
mlm_tpu.claim.Claim.acquire = acquire_together
runpy.run_module("mlm_tpu.shard", run_name="__main__", alter_sys=True)
"""
RACES = int(os.environ.get("MLM_TPU_SHARD_RACES", "5"))  # 20 for the thorough run the docstring below counts on


def _start_together(jobs, barrier, latency, timeout=120):
    """Start each (command, delay) so that its claim is made `delay` seconds after a shared instant, each of its file
    calls then `latency` seconds slow; the processes."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1"}
    processes = [subprocess.Popen([sys.executable, "-c", CLAIM_TOGETHER, str(barrier), repr(delay), repr(latency),
                                   *command],
                                  env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                 for command, delay in jobs]
    deadline = time.monotonic() + timeout
    while len(list(barrier.parent.glob(f"{barrier.name}.ready.*"))) < len(jobs) and time.monotonic() < deadline \
            and all(process.poll() is None for process in processes):
        time.sleep(0.01)
    barrier.with_suffix(".next").write_text(repr(time.time() + 0.05))
    os.replace(barrier.with_suffix(".next"), barrier)
    return processes


@pytest.mark.slow
def test_two_sharders_started_together_with_other_settings_one_wins_and_the_folder_is_a_clean_run(
        wikitext_path, tmp_path):
    """Issue 37: of two jobs claiming one split at once, with different --max-length, exactly one writes it (exit 0)
    and the other stops with one line (exit 2): refused by the winner's claim, or, once the winner has finished,
    by its finished split of other settings; no traceback, and the folder holds exactly what a clean run of the winner
    writes, nothing of the loser's. The second claim comes 14 to 33 ms after the first (each file call 5 ms slow), the
    first by turns: the old code's winner deleted the loser's claim being created, and died of it, in about 1 race of
    20 (in each of three runs). By default RACES = 5 races, spread over the same delays, catch it in about 1 run of 4
    (1 - 0.95^5 = 23%): test_a_job_clears_the_temporary_files_... shows the cause every time, deterministically, and
    this test checks that real racing jobs end as one clean run; MLM_TPU_SHARD_RACES=20 runs the thorough 20 (about
    2 runs of 3 catch the old bug: 1 - 0.95^20 = 64%). A race costs two sharders' start-up (about 2.5 s of CPU each,
    since the sharder loads no TensorFlow; 9 s each before)."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(wikitext_path.read_text(encoding="utf-8").splitlines(keepends=True)[:300]),
                      encoding="utf-8")

    def flags(max_length, output_dir):
        return ["--tokenizer", str(REPO_ROOT / "tests" / "fixtures" / "unigram-0.4" / "mlm"), "--text-files",
                str(corpus), "--max-length", max_length, "--shard-size", "20", "--output-dir", str(output_dir)]

    lengths = ("64", "32")
    clean = {}
    for max_length in lengths:
        result = run_module("mlm_tpu.shard", *flags(max_length, tmp_path / f"clean-{max_length}"))
        assert result.returncode == 0, result.stderr
        clean[max_length] = all_files(tmp_path / f"clean-{max_length}")
    refusals = ("is being written by another sharding job", "holds a finished split made with other settings")
    for race in range(RACES):
        folder = tmp_path / f"race-{race}"
        delays = [0.0, 0.014 + race * 0.019 / max(RACES - 1, 1)][::1 if race % 2 else -1]
        processes = _start_together([(flags(max_length, folder), delay) for max_length, delay in zip(lengths, delays)],
                                    tmp_path / f"barrier-{race}", latency=0.005)
        stderrs = [process.communicate(timeout=300)[1] for process in processes]
        results = [subprocess.CompletedProcess(process.args, process.returncode, "", stderr)
                   for process, stderr in zip(processes, stderrs)]
        said = f"race {race}: " + "\n".join(result.stderr[-2000:] for result in results)
        assert all("Traceback" not in result.stderr for result in results), said
        codes = [result.returncode for result in results]
        assert sorted(codes) == [0, 2], said
        error = assert_user_error(results[codes.index(2)])
        assert any(refusal in error for refusal in refusals), said
        winner = lengths[codes.index(0)]
        assert all_files(folder) == clean[winner], f"race {race}: not what a clean run of --max-length {winner} writes"


def test_sharding_never_loads_tensorflow(wikitext_tokenizer, tmp_path):
    """The sharder writes its TFRecords itself: TensorFlow (seconds of start-up, tens of them on a loaded machine, in
    every sharding job and every test that shards) is no part of it; the registry of tasks it reads reached
    TensorFlow through the training stage's type hints."""
    hide = tmp_path / "hide-tensorflow"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text("import sys\nsys.modules['tensorflow'] = None  # import fails\n")
    result = shard(wikitext_tokenizer[0], tmp_path / "out", "--builtin-corpus", "pydoc-topics", "--limit", "50",
                   env_overrides={"PYTHONPATH": f"{hide}{os.pathsep}{REPO_ROOT}"})
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "out" / "train" / "manifest.json").read_text())["records"] > 0


def test_max_length_not_a_multiple_of_8_warns(wikitext_tokenizer, tmp_path):
    result = shard(wikitext_tokenizer[0], tmp_path / "out", "--builtin-corpus", "pydoc-topics", "--limit", "100",
                   "--max-length", "100")
    assert result.returncode == 0, result.stderr
    assert "warning: --max-length 100 is not a multiple of 8" in result.stderr


def test_reference_underscore_flags_are_accepted(wikitext_tokenizer, tmp_path):
    result = run_module("mlm_tpu.shard", "--tokenizer_name_or_path", str(wikitext_tokenizer[0]), "--builtin_corpus",
                        "pydoc-topics", "--limit", "100", "--max_length", "64", "--shard_size", "7",
                        "--output_dir", str(tmp_path / "out"), "--split", "validation", "--prefix", "pydoc")
    assert result.returncode == 0, result.stderr
    names = sorted(os.listdir(tmp_path / "out" / "validation"))
    assert "pydoc-00000-7.tfrecord" in names and "manifest.json" in names


BAD_INPUTS = {
    "missing tokenizer dir": (["--tokenizer", "/nonexistent/tokenizer"], ["--tokenizer", "not a tokenizer folder"]),
    "folder that holds no tokenizer": (["--tokenizer", "{tmp}"], ["holds no tokenizer", "tokenizer train"]),
    "max length below 8": (["--max-length", "4"], ["--max-length", "at least 8"]),
    "max length above the tokenizer's": (["--max-length", "1024"], ["1024", "more than the tokenizer allows (512)"]),
    "shard size below 1": (["--shard-size", "0"], ["--shard-size"]),
    "empty corpus": (["--text-files", "{tmp}/blank.txt"], ["no text"]),
    "corpus smaller than one example": (["--text-files", "{tmp}/short.txt"], ["fewer than one example"]),
    "output that cannot be written": (["--output-dir", "{tmp}/blank.txt/out"], ["cannot write", "not a folder"]),
}


@pytest.mark.parametrize("name", list(BAD_INPUTS))
def test_bad_input_is_one_clear_line_and_nothing_is_left_behind(name, wikitext_tokenizer, tmp_path, in_process):
    (tmp_path / "blank.txt").write_text("\n\n", encoding="utf-8")
    (tmp_path / "short.txt").write_text("Only a few words here.\n", encoding="utf-8")
    overrides, phrases = BAD_INPUTS[name]
    flags = {"--tokenizer": str(wikitext_tokenizer[0]), "--output-dir": str(tmp_path / "out"),
             "--builtin-corpus": "pydoc-topics", "--max-length": "64"}
    for flag, value in zip(overrides[::2], overrides[1::2]):
        if flag == "--text-files":
            del flags["--builtin-corpus"]
        flags[flag] = value.format(tmp=tmp_path)
    result = in_process("shard", *[part for pair in flags.items() for part in pair])
    assert_user_error(result, *phrases)
    leftovers = [os.path.join(root, n) for root, _, names in os.walk(tmp_path / "out") for n in names]
    assert leftovers == []


def test_help_lists_every_flag():
    result = run_module("mlm_tpu.shard", "--help")
    for flag in ["--tokenizer", "--dataset", "--text-files", "--split", "--limit", "--max-length", "--shard-size",
                 "--output-dir", "--prefix", "--num-workers", "--batch-size", "--overwrite", "--storage-retry-seconds",
                 "--runner", "--text-part-bytes", "--direct_num_workers", "--sdk_container_image"]:
        assert flag in result.stdout, flag


def test_a_job_clears_the_temporary_files_of_killed_jobs_and_never_one_a_live_job_writes(tmp_path):
    """A job starting on a split deletes the half-written files killed jobs left (a killed job's claim among them),
    by the writer its name gives; another job's claim being created, or a retried bundle's shard, is that live
    job's to move or remove: deleting it broke the other job's write (issue 37's FileNotFoundError)."""
    import socket

    from mlm_tpu.claim import STALE_SECONDS
    from mlm_tpu.shards.format import WRITER_RECORD
    from mlm_tpu.shards.storage import LocalStorage
    from mlm_tpu.shards.writer import ShardWriter

    host = socket.gethostname()
    gone = subprocess.Popen([sys.executable, "-c", ""])
    gone.wait(timeout=60)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        split = tmp_path / "split"
        split.mkdir()
        killed = [f".{WRITER_RECORD}.{gone.pid}@{host}.k2x9.partial", ".dataset-00000-10.tfrecord.a1.partial",
                  f".dataset-00001-10.tfrecord.{os.getpid()}@{host}.old1.partial",  # this process's number, before it
                  ".dataset-00002-10.tfrecord.7@another-host.old2.partial"]  # not refreshed for STALE_SECONDS
        writing = [f".{WRITER_RECORD}.{live.pid}@{host}.w3z1.partial", f".{WRITER_RECORD}.7@another-host.w4.partial"]
        for name in killed + writing:
            (split / name).write_bytes(b"{")
        for name in killed[2:]:
            old = time.time() - 2 * STALE_SECONDS
            os.utime(split / name, (old, old))
        storage = LocalStorage(str(split))
        assert sorted(storage.left_temporaries(storage.sizes())) == sorted(killed)
        ShardWriter(storage, "dataset", 10, {"input_ids": 8}, {}).resume_point(overwrite=False)
        assert sorted(os.listdir(split)) == sorted(writing)
    finally:
        live.kill()
        live.wait(timeout=60)
