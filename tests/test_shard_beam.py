"""`shard --runner`: the sharder as an Apache Beam pipeline (FnApiRunner here, 1 and 2 worker processes) writes
exactly the files the local sharder writes, for every task, from several files (one with lines far longer than a
document, one empty), cut into line-aligned parts; a shard written twice is the same shard; an interrupted job
finishes on a re-run; train.py trains on the result; gs:// in and out; and the bad inputs Beam adds are one line."""

import json
import os
import socket
import subprocess
import sys
import threading
from collections import defaultdict

import pytest

from conftest import REPO_ROOT, assert_user_error, quality_rows, run_module, run_train, write_jsonl
from gcs_emulator import GcsEmulator, free_port
from test_shard import all_files

FN_API = ["--runner", "FnApiRunner", "--direct_running_mode", "multi_processing"]
PART_BYTES = "40000"  # small parts: every .txt file here is read as several


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, wikitext_path, t5_data):
    """Text files (two WikiText pieces, one file of 180,000-character lines, an empty one) and text-to-text files."""
    folder = tmp_path_factory.mktemp("beam-corpus")
    lines = wikitext_path.read_text(encoding="utf-8").splitlines(keepends=True)
    words = "".join(lines).split()
    long_lines = [" ".join(words[start:start + 30_000]) for start in (0, 50_000)]  # each cut into 2 documents
    texts = {"a.txt": "".join(lines[:400]), "long.txt": "a short line first\n" + "\n".join(long_lines) + "\n\nend\n",
             "empty.txt": "", "b.txt": "".join(lines[400:800])}
    for name, text in texts.items():
        (folder / name).write_text(text, encoding="utf-8")
    rows = quality_rows(t5_data.words, 500, seed=7)
    rows[3]["body"] = " ".join(t5_data.words * 40)  # an input far longer than --max-length: head and tail kept
    write_jsonl(folder / "rows-a.jsonl", rows[:300])
    write_jsonl(folder / "rows-empty.jsonl", [])
    write_jsonl(folder / "rows-b.jsonl", rows[300:])
    return folder


def task_flags(task, corpus, wikitext_tokenizer, t5_data):
    text_files = ["--text-files", *(str(corpus / name) for name in ("a.txt", "long.txt", "empty.txt", "b.txt"))]
    return {
        "mlm": ["--tokenizer", str(wikitext_tokenizer[0]), *text_files, "--max-length", "64", "--shard-size", "100"],
        "span-corruption": ["--task", "span-corruption", "--tokenizer", str(t5_data.tokenizer), *text_files,
                            "--max-length", "64", "--shard-size", "60", "--limit", "500"],  # the limit falls in b.txt
        "text2text": ["--task", "text2text", "--tokenizer", str(t5_data.tokenizer), "--text-files",
                      *(str(corpus / name) for name in ("rows-a.jsonl", "rows-empty.jsonl", "rows-b.jsonl")),
                      "--input-column", "title", "--input-column", "body", "--target-column", "label",
                      "--source-prefix", "quality:", "--max-length", "32", "--max-target-length", "4",
                      "--shard-size", "64"],
    }[task]


@pytest.fixture(scope="module")
def local_split(tmp_path_factory, corpus, wikitext_tokenizer, t5_data):
    """The local sharder's split for a task (made once per task)."""
    made = {}

    def split(task):
        if task not in made:
            output = tmp_path_factory.mktemp(f"local-{task}")
            result = run_module("mlm_tpu.shard", *task_flags(task, corpus, wikitext_tokenizer, t5_data),
                                "--output-dir", str(output))
            assert result.returncode == 0, result.stderr
            made[task] = output / "train"
        return made[task]
    return split


def shard_with_beam(flags, output, workers, **kwargs):
    return run_module("mlm_tpu.shard", *flags, "--output-dir", str(output), *FN_API, "--direct_num_workers",
                      str(workers), "--text-part-bytes", PART_BYTES, **kwargs)


@pytest.fixture(scope="module")
def beam_mlm(tmp_path_factory, corpus, wikitext_tokenizer, t5_data):
    """The masked-LM split made by Beam with 2 workers: (output folder, the flags that made it)."""
    output = tmp_path_factory.mktemp("beam-mlm")
    flags = task_flags("mlm", corpus, wikitext_tokenizer, t5_data)
    result = shard_with_beam(flags, output, 2)
    assert result.returncode == 0, result.stderr
    return output, flags


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("task", ["mlm", "span-corruption", "text2text"])
def test_beam_writes_the_local_sharders_files_byte_for_byte(task, workers, corpus, wikitext_tokenizer, t5_data,
                                                           local_split, beam_mlm, tmp_path, monkeypatch, capfd):
    if task == "mlm" and workers == 2:
        output = beam_mlm[0]  # made by the command in a process of its own
    else:  # the command's main in this process (its imports done once): the worker processes are Beam's own
        from mlm_tpu.cli.shard import main

        monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))  # what the workers import mlm_tpu from
        main([*task_flags(task, corpus, wikitext_tokenizer, t5_data), "--output-dir", str(tmp_path), *FN_API,
              "--direct_num_workers", str(workers), "--text-part-bytes", PART_BYTES])
        stderr = capfd.readouterr().err
        assert "as an Apache Beam pipeline on FnApiRunner" in stderr
        assert "sdk_worker" not in stderr  # the worker processes' start-up logs are not on the terminal
        output = tmp_path
    expected = all_files(local_split(task))
    assert len([name for name in expected if name.endswith(".tfrecord")]) > 5
    assert all_files(output / "train") == expected  # names, counts, bytes, the manifest; nothing else left behind


@pytest.mark.slow
def test_an_interrupted_beam_job_finishes_on_a_rerun_and_a_finished_split_is_left_alone(beam_mlm, local_split,
                                                                                        tmp_path):
    """What a job killed after writing some shards leaves (the progress file, shards missing or cut short, a temporary
    file, the dead job's writer record), finished by the same command."""
    source, flags = beam_mlm
    split = tmp_path / "train"
    split.mkdir()
    for name, data in all_files(source / "train").items():
        (split / name).write_bytes(data)
    manifest = json.loads((split / "manifest.json").read_text())
    (split / "manifest.json").unlink()
    (split / ".dataset-progress.json").write_text(json.dumps({"settings": manifest["settings"], "shards": 0,
                                                              "counters": None}))
    shards = sorted(split.glob("*.tfrecord"))
    shards[3].unlink()
    shards[5].write_bytes(shards[5].read_bytes()[:1000])
    (split / f".{shards[7].name}.x1y2.partial").write_bytes(b"half a shard")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (split / ".writer.json").write_text(json.dumps({"host": socket.gethostname(), "pid": int(gone.stdout),
                                                    "started": "2025-01-01T00:00:00", "updated": 0}))

    rerun = shard_with_beam(flags, tmp_path, 2)
    assert rerun.returncode == 0, rerun.stderr
    assert "Taking over" in rerun.stderr
    assert all_files(split) == all_files(local_split("mlm"))

    written = {path.name: path.stat().st_mtime_ns for path in split.iterdir()}
    again = shard_with_beam(flags, tmp_path, 2)
    assert again.returncode == 0, again.stderr
    assert "already complete" in again.stderr
    assert {path.name: path.stat().st_mtime_ns for path in split.iterdir()} == written


def test_a_shard_written_twice_is_the_same_shard(wikitext_tokenizer, wikitext_path, tmp_path):
    """Runners retry failed bundles, and may run a slow one twice: each attempt of a shard writes the whole file
    under its name at once, so a retry (with its pieces in another order, over a killed attempt's temporary file)
    and two attempts at the same time leave the shard the local sharder writes."""
    from mlm_tpu.api import shard_corpus
    from mlm_tpu.corpus import Corpus, CorpusSource
    from mlm_tpu.shards.beam_pipeline import CutAtShards, EncodePart, WriteShard, unit_offsets
    from mlm_tpu.shards.config import ShardingConfig
    from mlm_tpu.shards.sharding import check_config
    from mlm_tpu.tasks import shard_kinds

    text = tmp_path / "text.txt"
    text.write_text("".join(wikitext_path.read_text(encoding="utf-8").splitlines(keepends=True)[:300]))
    local = shard_corpus(str(wikitext_tokenizer[0]), str(tmp_path / "local"), text_files=[str(text)], max_length=64,
                         shard_size=100)
    config, kind = check_config(ShardingConfig(str(wikitext_tokenizer[0]), str(tmp_path / "beam"), max_length=64,
                                               shard_size=100, num_workers=1,
                                               corpus=CorpusSource(text_files=(str(text),))), shard_kinds())
    corpus = Corpus(config.corpus)
    encode = EncodePart(config, kind, corpus)
    encode.setup()
    elements = [element for index, part in enumerate(corpus.parts(20_000)) for element in encode.process((index, part))]
    offsets = unit_offsets([(key, counters["units"]) for key, (counters, _) in elements])
    pieces = defaultdict(list)
    for element in elements:
        for shard, piece in CutAtShards(6400).process(element, offsets):
            pieces[shard].append(piece)
    assert len(pieces[1]) > 1  # the shard is made of several elements' pieces

    write = WriteShard(config, kind, corpus, 6400)
    write.setup()
    name = local["shards"][1]["name"]
    expected = (tmp_path / "local" / "train" / name).read_bytes()
    first = list(write.process((1, pieces[1])))
    (tmp_path / "beam" / "train" / f".{name}.killed.partial").write_bytes(expected[:500])
    retried = list(write.process((1, list(reversed(pieces[1])))))
    assert first == retried == [(1, local["shards"][1])]
    assert (tmp_path / "beam" / "train" / name).read_bytes() == expected

    results = []
    attempts = [threading.Thread(target=lambda: results.append(list(write.process((1, pieces[1]))))) for _ in range(2)]
    for attempt in attempts:
        attempt.start()
    for attempt in attempts:
        attempt.join(timeout=60)
    assert results == [first, first]
    assert (tmp_path / "beam" / "train" / name).read_bytes() == expected
    assert sorted(os.listdir(tmp_path / "beam" / "train")) == [f".{name}.killed.partial", name]


@pytest.mark.slow
def test_train_py_trains_on_shards_beam_wrote(beam_mlm, wikitext_tokenizer, tmp_path):
    output, _ = beam_mlm
    result = run_train("--train-dataset", output / "train", "--tokenizer", wikitext_tokenizer[0], "--max-length", 64,
                       "--model-config", "tiny", "--per-replica-batch-size", 16, "--max-steps", 4, "--output-dir",
                       tmp_path / "model")
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "model" / "tf_model.h5").is_file()


@pytest.mark.slow
def test_tokenizer_corpus_and_shards_on_gcs(corpus, wikitext_tokenizer, t5_data, local_split, tmp_path):
    """What a Dataflow job does: workers read the tokenizer and the corpus from gs:// and write the shards there."""
    with GcsEmulator(tmp_path / "gcs") as server:
        client = server.client()
        bucket = client.create_bucket("corpus")
        for path in wikitext_tokenizer[0].iterdir():
            bucket.blob(f"tokenizer/{path.name}").upload_from_filename(str(path))
        flags = task_flags("mlm", corpus, wikitext_tokenizer, t5_data)
        files = flags[flags.index("--text-files") + 1:flags.index("--max-length")]
        for path in files:
            bucket.blob(f"text/{os.path.basename(path)}").upload_from_filename(path)
        result = run_module("mlm_tpu.shard", "--tokenizer", "gs://corpus/tokenizer", "--text-files",
                            *(f"gs://corpus/text/{os.path.basename(path)}" for path in files), "--max-length", "64",
                            "--shard-size", "100", "--output-dir", "gs://corpus/shards", *FN_API,
                            "--direct_num_workers", "2", "--text-part-bytes", PART_BYTES,
                            env_overrides={"STORAGE_EMULATOR_HOST": server.endpoint})
        assert result.returncode == 0, result.stderr
        written = {blob.name[len("shards/train/"):]: blob.download_as_bytes()
                   for blob in client.list_blobs("corpus", prefix="shards/train/")}
    expected = all_files(local_split("mlm"))
    assert sorted(written) == sorted(expected)
    manifests = [json.loads(files.pop("manifest.json")) for files in (written, expected)]
    assert written == expected
    for manifest in manifests:
        manifest["settings"].pop("corpus")  # the files' names, gs:// or local
    assert manifests[0] == manifests[1]


def worker_processes(group: int) -> list:
    """The pids of Beam's SDK worker processes in process group `group` (Linux' /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as stream:
                command = stream.read()
            if b"sdk_worker_main" in command and os.getpgid(int(entry)) == group:
                found.append(int(entry))
        except (ValueError, OSError):
            continue
    return found


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="finds Beam's worker processes through Linux' /proc")
def test_ctrl_c_while_local_workers_shard_is_one_line_and_exit_130(wikitext_path, wikitext_tokenizer, tmp_path):
    """Ctrl-C as a terminal sends it (SIGINT to the command's whole process group, its 2 worker processes included)
    once the workers run: one `interrupted:` line saying to run the command again, exit 130, and none of the
    tracebacks of Beam's threads whose workers died."""
    import signal
    import time

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(wikitext_path.read_text(encoding="utf-8") * 16, encoding="utf-8")  # minutes of work
    command = [sys.executable, "-m", "mlm_tpu.shard", "--tokenizer", str(wikitext_tokenizer[0]), "--text-files",
               str(corpus), "--max-length", "64", "--output-dir", str(tmp_path / "out"), *FN_API,
               "--direct_num_workers", "2"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT,
                               env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, start_new_session=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 120
        while len(worker_processes(process.pid)) < 2 and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1)  # the workers at work
        assert process.poll() is None, process.communicate()[1]
        os.killpg(process.pid, signal.SIGINT)
        stderr = process.communicate(timeout=60)[1]
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and "Worker subprocess exited" not in stderr, stderr
    assert stderr.splitlines()[-1].startswith("interrupted: ") and "run the same command again" in stderr, stderr


def test_without_apache_beam_runner_is_one_line_naming_the_extra(wikitext_tokenizer, tmp_path):
    hide = tmp_path / "hide-beam"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text("import sys\nsys.modules['apache_beam'] = None  # import fails\n")
    result = run_module("mlm_tpu.shard", "--tokenizer", str(wikitext_tokenizer[0]), "--builtin-corpus",
                        "pydoc-topics", "--output-dir", str(tmp_path / "out"), *FN_API,
                        env_overrides={"PYTHONPATH": f"{hide}{os.pathsep}{REPO_ROOT}"})
    assert_user_error(result, "--runner", "Apache Beam", "pip install 'mlm_tpu[beam]'")
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_unreachable_gcs_output_is_one_line_before_the_pipeline_starts(wikitext_tokenizer):
    result = run_module("mlm_tpu.shard", "--tokenizer", str(wikitext_tokenizer[0]), "--builtin-corpus",
                        "pydoc-topics", "--output-dir", "gs://corpus/x", "--storage-retry-seconds", "3", *FN_API,
                        env_overrides={"STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{free_port()}"})
    assert_user_error(result, "gs://corpus", "unreachable", "after retries")
    assert "Apache Beam pipeline" not in result.stderr


def test_compact_bytes_take_the_narrowest_type():
    import numpy as np

    from mlm_tpu.shards.compact import compact, expand

    cases = {"uint16": np.array([[0, 65535], [7, 3]]), "uint8": np.ones((2, 5), dtype=np.int64),
             "int16": np.array([5, -100, 32000]), "int32": np.array([0, 65536]), "int64": np.array([-1, 2**40])}
    for name, array in cases.items():
        packed = compact(array)
        assert np.dtype(packed[0]) == np.dtype(name)
        assert len(packed[2]) == array.size * np.dtype(name).itemsize
        assert np.array_equal(expand(packed), array)


def test_runners_are_told_apart_by_the_names_beam_takes():
    """Only the local runners' workers read this machine's files, whatever spelling Beam accepts for a runner."""
    from mlm_tpu.shards.beam_job import is_local_runner

    for local in ("FnApiRunner", "fnapi", "DirectRunner", "direct", "PrismRunner",
                  "apache_beam.runners.portability.fn_api_runner.FnApiRunner"):
        assert is_local_runner(local), local
    for remote in ("DataflowRunner", "dataflow", "FlinkRunner", "flink", "SparkRunner", "PortableRunner"):
        assert not is_local_runner(remote), remote


@pytest.mark.slow
def test_beam_writes_the_local_sharders_labelled_splits_byte_for_byte(wikitext_tokenizer, tmp_path, monkeypatch,
                                                                      capfd):
    """Sentence pairs with scores (float32 labels, the labels found by the first pass) from two files, by 2
    workers: the local sharder's files."""
    import random

    from mlm_tpu.cli.shard import main

    rng = random.Random(5)
    words = "the cat sat on a mat while rain fell over old town bridges".split()
    rows = [{"a": " ".join(rng.choices(words, k=rng.randint(2, 40))), "b": " ".join(rng.choices(words, k=5)),
             "score": round(rng.uniform(0, 5), 2)} for _ in range(300)]
    files = [str(write_jsonl(tmp_path / "a.jsonl", rows[:120])), str(write_jsonl(tmp_path / "b.jsonl", rows[120:]))]
    flags = ["--task", "sequence-classification", "--tokenizer", str(wikitext_tokenizer[0]), "--text-files", *files,
             "--input-column", "a", "--pair-column", "b", "--target-column", "score", "--max-length", "24",
             "--shard-size", "50"]
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))
    main([*flags, "--output-dir", str(tmp_path / "local")])
    main([*flags, "--output-dir", str(tmp_path / "beam"), *FN_API, "--direct_num_workers", "2"])
    assert "as an Apache Beam pipeline on FnApiRunner" in capfd.readouterr().err
    expected = all_files(tmp_path / "local" / "train")
    assert json.loads(expected["manifest.json"])["features"]["labels"] == {"dtype": "float32", "length": 1}
    assert all_files(tmp_path / "beam" / "train") == expected
