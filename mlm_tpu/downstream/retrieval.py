"""Retrieval tasks of `mlm-tpu downstream`: a task given as a BEIR folder (`NAME=FOLDER`, with a `train` qrels split to
fine-tune on and a `test` one to score), or the built-in `inverse-cloze-imdb` (inverse_cloze.py). Each is scored by
nDCG@10, recall@100 and MRR@10 on its test queries (mlm_tpu/embedding/retrieval.py: exact search, trec_eval's
measures), for:
- the model fine-tuned contrastively (`--task sentence-embedding` on the train split's (query, relevant document)
  pairs, in-batch negatives), one run per seed;
- the same shape fine-tuned the same way from scratch (`--baseline scratch`);
- the model without fine-tuning, mean-pooled: what pretraining alone gives;
- BM25 (rank-bm25's Okapi BM25) on the words of the same texts, cut to the tokens the model reads, as the floor;
- the reference, all-MiniLM-L6-v2 as published (`--baseline reference`), no fine-tuning.
Runs already done (their result file) are read, not run again; the report holds the medians over seeds."""

import json
import os
import re
import statistics
from typing import Dict, List, Optional

from mlm_tpu.console import log
from mlm_tpu.downstream import inverse_cloze
from mlm_tpu.errors import UserError
from mlm_tpu.output_dir import write_file, write_json

MEASURES = ("ndcg@10", "recall@100", "mrr@10")
RESULTS_FILE = "retrieval.json"
TABLE_FILE = "retrieval.md"


def retrieval_folder(spec: str) -> Optional[str]:
    """The BEIR folder a --tasks entry names (NAME=FOLDER, a folder; or the built-in task), None for other tasks."""
    if spec == inverse_cloze.NAME:
        return inverse_cloze.NAME
    name, _, folder = spec.partition("=")
    return folder if name and os.path.isdir(folder) else None


def retrieval_specs(values) -> Optional[List[str]]:
    """The --tasks entries, when they are retrieval tasks (None when none is); a mix with classification tasks is
    one error line (their rows and reports differ)."""
    specs = [spec.strip() for value in values for spec in value.split(",") if spec.strip()]
    retrieval = [spec for spec in specs if retrieval_folder(spec) is not None]
    if not retrieval:
        return None
    if len(retrieval) < len(specs):
        raise UserError(f"--tasks mixes retrieval tasks ({', '.join(retrieval)}) with classification tasks; run "
                        "each kind in its own `mlm-tpu downstream` with its own --output-dir")
    return retrieval


def _pairs_file(path: str, train) -> str:
    """The (query, positive) rows of a train split: each query with each of its relevant documents."""
    rows = [{"query": train.queries[query], "positive": train.corpus[document]}
            for query, judged in train.qrels.items() for document, score in judged.items() if score > 0]
    write_file(path, "".join(json.dumps(row) + "\n" for row in rows).encode())
    return path


def _bm25(test, tokenizer, max_length: int) -> Dict[str, float]:
    """BM25 on the texts' words, each text cut to the tokens the model reads (its tokenizer's cut)."""
    from rank_bm25 import BM25Okapi

    from mlm_tpu.embedding.retrieval import scores_of_run

    def words(text: str) -> List[str]:
        kept = tokenizer.decode(tokenizer(text, truncation=True, max_length=max_length)["input_ids"],
                                skip_special_tokens=True)
        return re.findall(r"\w+", kept.lower())

    documents = list(test.corpus)
    index = BM25Okapi([words(test.corpus[key]) for key in documents])
    run = {}
    for query, text in test.queries.items():
        scores = index.get_scores(words(text))
        best = sorted(range(len(documents)), key=lambda row: -scores[row])[:100]
        run[query] = {documents[row]: float(scores[row]) for row in best}
    return scores_of_run(test.qrels, run)


def _embedding_scores(folder: str, test, max_length: int, run_file: str) -> Dict[str, float]:
    from mlm_tpu.embedding.prediction import Embedder
    from mlm_tpu.embedding.retrieval import evaluate_retrieval

    return evaluate_retrieval(Embedder(folder, max_length), test, run_file)


def _result(path: str, make) -> Dict[str, float]:
    """A row's scores: read from `path` when an earlier run wrote them, else made and written."""
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as stream:
            return json.load(stream)
    scores = make()
    write_json(path, scores)
    return scores


def run_retrieval_benchmark(config, specs: List[str]) -> dict:
    """Every row of every retrieval task (config: a benchmark.DownstreamConfig), then the report."""
    from mlm_tpu.embedding.beir import read_beir
    from mlm_tpu.tokenizer.load import load_tokenizer

    if any(baseline not in ("scratch", "reference") for baseline in config.baseline):
        raise UserError("retrieval tasks take --baseline scratch and reference (BM25 is always run), not "
                        f"{', '.join(b for b in config.baseline if b not in ('scratch', 'reference'))}")
    out = config.output_dir
    protocol = config.protocol
    tokenizer = load_tokenizer(config.model, "--model")
    tasks = {}
    for spec in specs:
        folder = retrieval_folder(spec)
        name = spec.partition("=")[0] if "=" in spec else spec
        if folder == inverse_cloze.NAME:
            folder = inverse_cloze.write_inverse_cloze(os.path.join(out, "data", name))
        tasks[name] = (read_beir(folder, "train"), read_beir(folder, "test"), folder)
    report = {"model": config.model, "seeds": config.seeds, "max_length": protocol.max_length,
              "protocol": {"num_epochs": protocol.num_epochs, "learning_rate": protocol.learning_rate,
                           "per_replica_batch_size": protocol.per_replica_batch_size}, "tasks": {}}
    for name, (train, test, folder) in tasks.items():
        runs = os.path.join(out, "runs", name)
        os.makedirs(runs, exist_ok=True)
        rows: Dict[str, List[Dict[str, float]]] = {}
        log(f"{name}: {len(train.queries):,} training queries, {len(test.queries):,} test queries, "
            f"{len(test.corpus):,} documents")
        rows["bm25"] = [_result(os.path.join(runs, "bm25.json"), lambda: _bm25(test, tokenizer, protocol.max_length))]
        rows["no fine-tuning"] = [_result(os.path.join(runs, "no-fine-tuning.json"), lambda: _embedding_scores(
            config.model, test, protocol.max_length, os.path.join(runs, "no-fine-tuning.trec")))]
        if "reference" in config.baseline:
            from mlm_tpu.downstream.reference import NAME, reference_folder

            rows[NAME] = [_result(os.path.join(runs, "reference.json"), lambda: _embedding_scores(
                reference_folder(), test, protocol.max_length, os.path.join(runs, "reference.trec")))]
        shards = _shards(config, train, os.path.join(out, "shards", name))
        starts = {"fine-tuned": {"model_name_or_path": config.model}}
        if "scratch" in config.baseline:
            starts["scratch, fine-tuned"] = {"model_config": config.model, "tokenizer": config.model}
        for label, start in starts.items():
            rows[label] = []
            for seed in range(1, config.seeds + 1):
                run_dir = os.path.join(runs, label.replace(", ", "-"), f"seed-{seed}")
                rows[label].append(_result(run_dir + ".json", lambda: _fine_tuned(
                    config, shards, run_dir, seed, start, test)))
        report["tasks"][name] = {"folder": folder, "about": inverse_cloze.ABOUT if name == inverse_cloze.NAME else
                                 f"{name}: the BEIR folder {folder}, train split to fine-tune, test split scored",
                                 "rows": {label: {measure: statistics.median(run[measure] for run in found)
                                                  for measure in MEASURES} | {"runs": len(found)}
                                          for label, found in rows.items()}}
    write_json(os.path.join(out, RESULTS_FILE), report)
    write_file(os.path.join(out, TABLE_FILE), table(report).encode())
    return report


def _shards(config, train, folder: str) -> str:
    """The train split's pairs, sharded with the model's tokenizer (once)."""
    from mlm_tpu.corpus import CorpusSource
    from mlm_tpu.shards.config import ShardingConfig
    from mlm_tpu.shards.sharding import shard_corpus
    from mlm_tpu.tasks import shard_kinds

    split = os.path.join(folder, "train")
    if not os.path.isfile(os.path.join(split, "manifest.json")):
        os.makedirs(folder, exist_ok=True)
        pairs = _pairs_file(os.path.join(folder, "pairs.jsonl"), train)
        shard_corpus(ShardingConfig(config.model, folder, task="sentence-embedding",
                                    corpus=CorpusSource(text_files=(pairs,), split="train"), input_columns=("query",),
                                    target_column="positive", max_length=config.protocol.max_length), shard_kinds())
    return split


def _fine_tuned(config, shards: str, run_dir: str, seed: int, start: dict, test) -> Dict[str, float]:
    """One contrastive fine-tuning run under the protocol, scored on the test split."""
    from mlm_tpu.configuration import from_keywords
    from mlm_tpu.tasks import TrainingConfig, training_task
    from mlm_tpu.training.trainer import train

    protocol = config.protocol
    settings = {"task": "sentence-embedding", "train_dataset": shards, "output_dir": run_dir, "seed": seed,
                "num_epochs": protocol.num_epochs, "learning_rate": protocol.learning_rate,
                "per_replica_batch_size": protocol.per_replica_batch_size, "warmup_ratio": protocol.warmup_ratio,
                "weight_decay_rate": protocol.weight_decay_rate, "max_length": protocol.max_length, **start}
    training = from_keywords(TrainingConfig, settings)
    train(training, training_task(training))
    return _embedding_scores(run_dir, test, protocol.max_length, run_dir + ".trec")


def table(report: dict) -> str:
    """The report as Markdown: a table per task, medians over seeds."""
    lines = [f"Model: `{report['model']}`; {report['seeds']} seed(s) for the fine-tuned rows (medians); texts cut to "
             f"{report['max_length']} tokens; protocol: {report['protocol']}.", ""]
    for name, task in report["tasks"].items():
        lines += [f"### {name}", "", task["about"], "", "| row | nDCG@10 | recall@100 | MRR@10 | runs |",
                  "| --- | --- | --- | --- | --- |"]
        lines += [f"| {label} | {row['ndcg@10']:.4f} | {row['recall@100']:.4f} | {row['mrr@10']:.4f} | {row['runs']} |"
                  for label, row in task["rows"].items()]
        lines.append("")
    return "\n".join(lines)
