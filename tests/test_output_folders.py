"""The rule of output folders (output_dir.py): what mlm_tpu wrote is recorded, a file it did not write is never
replaced, folders of earlier versions are recognised, and a save killed at any moment leaves every file as recorded.
Each command's refusals are rows of tests/test_bad_inputs.py; this file holds the record itself and the demo."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO_ROOT, run_module
from mlm_tpu.errors import UserError
from mlm_tpu.output_dir import RECORD, Record, check_output_dir, staged_output_dir, write_file

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "made-by-0.2"


def save(folder: Path, files: dict, folders=()) -> None:
    with staged_output_dir(str(folder), folders) as staging:
        for name, data in files.items():
            Path(staging, name).write_bytes(data)


def test_a_save_is_recorded_and_a_file_changed_since_is_no_longer_mlm_tpus(tmp_path):
    folder = tmp_path / "out"
    save(folder, {"a.json": b"{}", "b.bin": b"12345"})
    record = Record(str(folder))
    assert sorted(record.files) == ["a.json", "b.bin"] and record.unrecognised() == []
    (folder / "b.bin").write_bytes(b"54321")  # the same size, other bytes
    (folder / "notes.txt").write_text("mine")
    assert Record(str(folder)).unrecognised() == ["b.bin", "notes.txt"]
    with pytest.raises(UserError, match="b.bin, which mlm_tpu did not write"):
        check_output_dir(str(folder), ["*.bin"], overwrite=True)
    with pytest.raises(UserError, match="already holds a.json.*--overwrite"):
        check_output_dir(str(folder), ["a.json"], overwrite=False)
    check_output_dir(str(folder), ["a.json", "c.txt"], overwrite=True)
    with pytest.raises(UserError, match="b.bin"):
        save(folder, {"b.bin": b"ours again"})
    assert (folder / "b.bin").read_bytes() == b"54321"


def test_a_copied_folder_is_still_recognised_by_its_contents(tmp_path):
    save(tmp_path / "out", {"weights.h5": os.urandom(100_000)})
    shutil.copytree(tmp_path / "out", tmp_path / "copy")  # new modification times
    os.utime(tmp_path / "copy" / "weights.h5", ns=(1, 1))
    assert Record(str(tmp_path / "copy")).unrecognised() == []


def test_write_file_records_in_a_folder_with_a_record_and_refuses_a_users_file(tmp_path):
    save(tmp_path, {"card.md": b"ours"})
    write_file(str(tmp_path / "card.md"), b"ours, updated")
    write_file(str(tmp_path / "new.json"), b"{}")
    assert sorted(Record(str(tmp_path)).files) == ["card.md", "new.json"]
    (tmp_path / "card.md").write_text("edited by the user")
    with pytest.raises(UserError, match="card.md"):
        write_file(str(tmp_path / "card.md"), b"ours again")
    assert (tmp_path / "card.md").read_text() == "edited by the user"


@pytest.mark.parametrize("umask", [0o022, 0o007], ids=["umask-022", "umask-007"])
def test_published_files_get_the_mode_the_umask_gives_whatever_wrote_them(umask, tmp_path):
    """safetensors' save_file and mkstemp make private (0600) files; published, every file is 0666 less the umask,
    so a team's shared folder or a web server can read the weights as it reads the rest."""
    import numpy as np
    from safetensors.numpy import save_file

    from mlm_tpu.output_dir import write_json
    from mlm_tpu.shards.storage import LocalStorage

    before = os.umask(umask)
    try:
        with staged_output_dir(str(tmp_path / "model")) as staging:
            save_file({"w": np.zeros(2, np.float32)}, os.path.join(staging, "model.safetensors"))
            write_json(os.path.join(staging, "config.json"), {})
            Path(staging, "tokenizer.json").write_text("{}")
        write_file(str(tmp_path / "model" / "README.md"), b"a card")
        LocalStorage(str(tmp_path / "shards")).write("data-0-1.tfrecord", b"records")
    finally:
        os.umask(before)
    modes = {str(path.relative_to(tmp_path)): oct(path.stat().st_mode & 0o777) for path in tmp_path.rglob("*")
             if path.is_file()}
    assert modes == dict.fromkeys(["model/model.safetensors", "model/config.json", "model/tokenizer.json",
                                   "model/README.md", f"model/{RECORD}", "shards/data-0-1.tfrecord"],
                                  oct(0o666 & ~umask))


def test_remove_written_deletes_what_mlm_tpu_wrote_and_keeps_the_rest(tmp_path):
    with staged_output_dir(str(tmp_path / "run"), folders=["logs"]) as staging:
        Path(staging, "config.json").write_text("{}")
    (tmp_path / "run" / "logs").mkdir()
    (tmp_path / "run" / "logs" / "events").write_text("x")
    save(tmp_path / "run", {"tf_model.h5": b"weights"}, folders=["logs"])
    (tmp_path / "run" / "notes.txt").write_text("mine")
    Record(str(tmp_path / "run")).remove_written()
    assert sorted(os.listdir(tmp_path / "run")) == [RECORD, "notes.txt"]
    assert Record(str(tmp_path / "run")).unrecognised() == ["notes.txt"]
    save(tmp_path / "all-ours", {"a": b"1"})
    Record(str(tmp_path / "all-ours")).remove_written()
    assert not (tmp_path / "all-ours").exists()


def test_a_staged_sub_folder_is_published_with_its_folder_and_a_users_file_in_either_stops_both(tmp_path):
    def save_both(weights: bytes) -> None:
        with staged_output_dir(str(tmp_path / "run"), folders=["generator"]) as staging:
            Path(staging, "model.bin").write_bytes(weights)
            os.mkdir(os.path.join(staging, "generator"))
            Path(staging, "generator", "model.bin").write_bytes(weights)

    save_both(b"first")  # a new folder
    save_both(b"second")  # over the first
    assert [(tmp_path / "run" / name / "model.bin").read_bytes() for name in ("", "generator")] == [b"second"] * 2
    assert Record(str(tmp_path / "run")).folders == ["generator"]
    assert Record(str(tmp_path / "run" / "generator")).unrecognised() == []
    (tmp_path / "run" / "generator" / "model.bin").write_bytes(b"edited")
    with pytest.raises(UserError, match="generator holds model.bin, which mlm_tpu did not write"):
        save_both(b"third")
    assert (tmp_path / "run" / "model.bin").read_bytes() == b"second"  # refused before anything moved


def test_a_backup_first_written_after_the_first_save_is_the_runs_own_when_it_starts_again(tmp_path):
    """A run stopped just after epoch 1's best model was saved, with no backup before it (a fine-tuning run with no
    --backup-steps): the backup written at the stop is recorded, so the same command goes on from it."""
    import tf_keras as keras

    from mlm_tpu.model_folder.saving import check_training_output_dir
    from mlm_tpu.training.backup import Backup, BackupRecord, find_backup

    run = tmp_path / "run"
    save(run, {"config.json": b"{}"}, folders=("backup", "logs"))  # the best model, no backup/ yet
    assert Record(str(run)).folders == []
    model = keras.Sequential([keras.layers.Dense(2, input_shape=(3,))])
    Backup(str(run / "backup"), model, keras.optimizers.Adam()).save(BackupRecord(step=0, loop={}))
    check_training_output_dir(str(run))
    assert Record(str(run)).unrecognised() == [] and find_backup(str(run / "backup")).step == 0


SAVING_FOREVER = """
import os, random, sys
from pathlib import Path
from mlm_tpu.output_dir import staged_output_dir, write_file
random.seed(int(sys.argv[2]))
for round in range(10**6):
    with staged_output_dir(sys.argv[1]) as staging:
        for index in range(20):
            Path(staging, f"file-{index}.bin").write_bytes(os.urandom(random.randint(1, 300_000)))
    write_file(os.path.join(sys.argv[1], "single.json"), os.urandom(random.randint(1, 1000)))
    print(round, flush=True)
"""


def test_a_save_killed_at_any_moment_leaves_every_file_as_recorded(tmp_path):
    folder = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    for attempt in range(6):
        process = subprocess.Popen([sys.executable, "-c", SAVING_FOREVER, str(folder), str(attempt)], env=env,
                                   stdout=subprocess.PIPE, text=True)
        try:
            assert process.stdout.readline().strip() == "0"  # one whole save, then a kill somewhere in the next
            time.sleep(0.05 + 0.05 * attempt)
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=60)
        names = sorted(name for name in os.listdir(folder) if not name.startswith("."))
        assert names == sorted([f"file-{index}.bin" for index in range(20)] + ["single.json"])
        assert Record(str(folder)).unrecognised() == [], f"attempt {attempt}"


def test_folders_of_earlier_versions_are_recognised_by_what_they_wrote(tmp_path):
    tokenizer = Record(str(FIXTURES / "tokenizer"))
    assert sorted(tokenizer.files) == sorted(os.listdir(FIXTURES / "tokenizer"))
    run = shutil.copytree(FIXTURES / "roberta", tmp_path / "run")
    (run / "README.md").write_text("# my notes on this run\n")  # mlm_tpu 0.2 wrote no card: this is the user's
    (run / "data.csv").write_text("a,b\n")
    record = Record(str(run))
    assert record.folders == ["logs"] and "tf_model.h5" in record.files and "training_args.json" in record.files
    assert record.unrecognised() == ["README.md", "data.csv"]


def test_the_demo_recognises_its_earlier_output_and_nothing_else(tmp_path):
    from mlm_tpu.cli.demo import not_made_by_the_demo
    from test_bad_inputs import Inputs, earlier_demo

    inputs = Inputs(tmp_path, FIXTURES / "tokenizer", FIXTURES / "shards", FIXTURES / "t5-tokenizer")
    demo = earlier_demo(inputs, tmp_path / "demo")
    assert not_made_by_the_demo(str(demo)) == []
    (demo / "shards" / "test").mkdir()
    (demo / "shards" / "train" / "extra.txt").write_text("mine")
    assert not_made_by_the_demo(str(demo)) == ["shards/test", "shards/train/extra.txt"]
    users = tmp_path / "runs"
    shutil.copytree(FIXTURES / "tokenizer", users / "tokenizer")  # the user's own pipeline, laid out as the README's
    shutil.copytree(FIXTURES / "roberta", users / "model")
    assert not_made_by_the_demo(str(users)) == ["model", "tokenizer"]


@pytest.mark.slow
def test_the_demo_runs_again_over_its_earlier_output_and_keeps_what_is_beside_it(tmp_path):
    """Over what a demo before records left (the README's first command, run again after an upgrade): it replaces
    that run, leaves the user's model beside it alone, and its own output is then all recorded."""
    from mlm_tpu.cli.demo import not_made_by_the_demo
    from test_bad_inputs import Inputs, earlier_demo

    runs = tmp_path / "runs"
    demo = earlier_demo(Inputs(tmp_path, FIXTURES / "tokenizer", FIXTURES / "shards", FIXTURES / "t5-tokenizer"),
                        runs / "demo")
    (runs / "model").mkdir(parents=True)
    (runs / "model" / "notes.txt").write_text("the user's model goes here\n")
    result = run_module("mlm_tpu.demo", "--output-dir", str(demo), "--num-epochs", "1", "--vocab-size", "1000",
                        "--task-rows", "64")
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((demo / "tokenizer" / "tokenizer_training.json").read_text())["vocab_size"] == 1000
    assert json.loads((demo / "shards" / "train" / "manifest.json").read_text())["settings"]["max_length"] == 64
    logs = demo / "model" / "logs" / "train"
    assert len(list(logs.glob("events.out.tfevents.*"))) == 1  # a fresh run: the earlier one's logs went with it
    assert (demo / "model" / "loss.png").is_file() and (demo / "model" / "model.safetensors").is_file()
    assert sorted(os.listdir(runs)) == ["demo", "model"] and os.listdir(runs / "model") == ["notes.txt"]
    assert Record(str(demo)).folders == ["downstream", "model", "shards", "tokenizer"] and (demo / RECORD).is_file()
    assert (demo / "downstream" / "runs" / "rotten-tomatoes" / "model" / "seed-1.json").is_file()  # step 9's run
    assert "label:  " in result.stdout  # step 10's predictions
    assert not_made_by_the_demo(str(demo)) == []
