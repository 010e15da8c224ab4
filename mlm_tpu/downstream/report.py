"""The downstream benchmark's report: per task and model, the median of the task's score over seeds and its spread
(max - min), every metric likewise, and the mean of the medians over tasks; as JSON (results.json, --json) and as a
table. Scores are shown x 100, as GLUE shows them.
"""

import statistics
from typing import Dict, List, Optional, Sequence, Tuple

from mlm_tpu.encoder.fine_tuning import OPTIMISTIC
from mlm_tpu.model_folder.pooling import POOLING_WORDS

WORDS_ROW = "  words read per row"  # the row under each task's: the words each column read

SPREAD = "max - min over seeds"
ROLE_TITLES = {"model": "model", "scratch": "scratch", "reference": "reference", "reference_continued":
               "reference continued", "tfidf": "tf-idf floor", "tfidf_whole": "tf-idf whole texts"}


def run_score(scores: Dict[str, float], metrics: Sequence[str]) -> float:
    """A run's task score: its metric, or the mean of its metrics (GLUE's MRPC, QQP: F1 and accuracy; STS-B: Pearson
    and Spearman)."""
    return statistics.fmean(scores[metric] for metric in metrics)


def summary(values: List[float]) -> Dict[str, object]:
    """The median of a score over seeds, and its spread (max - min)."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "spread": max(values) - min(values), "values": list(values)}


def kept_epoch_words(kept: str, epoch: Optional[int] = None) -> str:
    """Which epoch a run's score is, in words: its last, or its best on the dev set (the split it is scored on)."""
    if kept == "last":
        return f"epoch {epoch}, the last" if epoch else "the last epoch"
    return (f"epoch {epoch}, the best on the dev set it is scored on" if epoch else
            "the best epoch on the dev set, which it is scored on") + ": optimistic"


def task_entry(metrics: Sequence[str], runs: Dict[str, Tuple[str, List[Dict[str, float]], List[int], float]],
               floor: dict, **facts) -> dict:
    """One task's part of the report. `runs`: role -> (label, each seed's scores, each seed's kept epoch, the words of
    a row it read); `floor`: the TF-IDF floor's record ({} without it: floor.py's, with its cut), its whole-text
    scores as tfidf_whole when texts were cut; `facts`: what the report says of the task (sizes, where from)."""
    entry = {"metrics": list(metrics), **facts}
    for role, (label, scores, kept_epochs, words) in runs.items():
        entry[role] = {"label": label, **summary([run_score(run, metrics) for run in scores]),
                       "metrics": {metric: summary([run[metric] for run in scores]) for metric in metrics},
                       "kept_epochs": kept_epochs, "words_per_row": words}
    if floor:
        entry["tfidf"] = floor_entry("tfidf", floor["scores"], metrics,
                                     cut={**floor["cut"], "texts_cut": floor["texts_cut"]},
                                     words=floor.get("words_per_row"))
    if "whole_text_scores" in floor:
        entry["tfidf_whole"] = floor_entry("tfidf_whole", floor["whole_text_scores"], metrics, cut=None,
                                           words=floor.get("whole_words_per_row"))
    return entry


def floor_entry(label: str, scores: Dict[str, float], metrics: Sequence[str], cut: Optional[dict],
                words: Optional[float]) -> dict:
    """A TF-IDF floor's part of a task's report; `cut`: where its texts were cut (None: it read them whole);
    `words`: the words of a row it read."""
    return {"label": label, **summary([run_score(scores, metrics)]),
            "metrics": {metric: summary([scores[metric]]) for metric in metrics}, "cut": cut, "words_per_row": words}


def with_mean(report: dict) -> dict:
    """The report with `mean`: each role's mean over tasks of its medians (the whole-text floor's: a task whose texts
    were not cut counts with its floor, which read them whole)."""
    tasks = list(report["tasks"].values())
    roles = [role for role in ROLE_TITLES if tasks and all(role in task for task in tasks)]
    if "tfidf" in roles and "tfidf_whole" not in roles and any("tfidf_whole" in task for task in tasks):
        roles.append("tfidf_whole")
    return {**report, "mean": {role: statistics.fmean(_result(task, role)["median"] for task in tasks)
                               for role in roles}}


def _result(task: dict, role: str) -> dict:
    """A task's result for a role; the whole-text floor of a task whose texts were not cut is its floor."""
    return task[role] if role in task or role != "tfidf_whole" else task["tfidf"]


def format_table(report: dict) -> str:
    """The report as a table, under a line saying what the classifiers read (their pooling) and whether the scores
    are optimistic: per task its score's median (min-max) for each model, what pretraining gained over scratch, and
    under it the words of a row each model read."""
    roles = list(report["mean"])
    header = ["task", "score", "train", "dev"] + [ROLE_TITLES[role] for role in roles]
    gain = "model" in roles and "scratch" in roles
    header += ["gain"] if gain else []
    rows = []
    for name, task in report["tasks"].items():
        row = [name, " & ".join(task["metrics"]), f"{task['train_examples']:,}", f"{task['dev_examples']:,}"]
        row += [_cell(_result(task, role)) for role in roles]
        row += [f"{100 * (task['model']['median'] - task['scratch']['median']):+.1f}"] if gain else []
        rows.append(row)
        read = [_result(task, role).get("words_per_row") for role in roles]
        if any(words is not None for words in read):  # under it, the words of a row each column read
            rows.append([WORDS_ROW, "", "", ""] + ["" if words is None else f"{words:.1f}" for words in read] +
                        [""] * gain)
    mean = ["mean", "", "", ""] + [f"{100 * report['mean'][role]:.1f}" for role in roles]
    mean += [f"{100 * (report['mean']['model'] - report['mean']['scratch']):+.1f}"] if gain else []
    rows.append(mean)
    widths = [max(len(line[column]) for line in [header, *rows]) for column in range(len(header))]
    lines = ["  ".join(cell.ljust(width) if column < 2 else cell.rjust(width)
                       for column, (cell, width) in enumerate(zip(line, widths))) for line in [header, *rows]]
    labels = ", ".join(f"{ROLE_TITLES[role]}: {report['tasks'][next(iter(report['tasks']))][role]['label']}"
                       for role in roles if role not in ("tfidf", "tfidf_whole"))
    protocol = report["protocol"]
    optimistic = protocol.get("keep_epoch", "best") == "best"
    notes = [f"Dev-set scores x 100{f', {OPTIMISTIC}' if optimistic else ''}: the median over seeds "
             f"{_seeds(report['seeds'])} (min-max in brackets); a score of two metrics is their mean. " + labels + ".",
             f"Protocol: {protocol['num_epochs']} epoch{'s' * (protocol['num_epochs'] != 1)}, learning rate "
             f"{protocol['learning_rate']:g}, batch {protocol['per_replica_batch_size']}, {protocol['max_length']} "
             f"tokens, warm-up {protocol['warmup_ratio']:.0%}, weight decay {protocol['weight_decay_rate']:g}; each "
             f"run scored at {kept_epoch_words(protocol.get('keep_epoch', 'best'))}."]
    notes += [f"  {task['about']}" for task in report["tasks"].values() if task.get("about")]
    rate = report.get("reference_learning_rate")
    at_its_rate = f" (but at learning rate {rate:g}, a pretrained checkpoint's rate)" if rate else ""
    notes += [f"reference: {report['reference']}, fine-tuned under the same protocol{at_its_rate} on shards of its "
              "own tokenizer at the same length" + ("; reference continued: its masked-LM pretraining continued "
                                                    "(task-adaptive), the same way" if "reference_continued" in roles
                                                    else "") + "."] \
        if "reference" in roles else []
    notes += [_floor_note(report, protocol["max_length"])] if "tfidf" in roles else []
    notes += [f"'{WORDS_ROW.strip()}': the mean words of a row (text and pair) each model read, over the training "
              "and dev rows. Every model is fed the same text, each row cut to the whole words the model's tokenizer "
              "keeps; another tokenizer may need more tokens for it and read fewer."] \
        if WORDS_ROW in {row[0] for row in rows} else []
    caps = [f"the first {report[key]:,} {what} rows of each task" for key, what in
            (("max_train_samples", "training"), ("max_eval_samples", "dev")) if report.get(key)]
    notes += [f"Rows: {' and '.join(caps)}."] if caps else []
    pooling = report["classifier_pooling"]
    title = f"Classifier pooling: {pooling} (each classifier reads {POOLING_WORDS[pooling]})" + (
        f"; scores {OPTIMISTIC}" if optimistic else "")
    return "\n".join([title, ""] + lines + [""] + notes) + "\n"


def _floor_note(report: dict, max_length: int) -> str:
    """What the floor read: the words the model reads; how many texts were cut."""
    cut = {name: task["tfidf"]["cut"]["texts_cut"] for name, task in report["tasks"].items()
           if sum(task["tfidf"]["cut"]["texts_cut"])}
    note = (f"The tf-idf floor reads what the models read: each text cut to the whole words the model's tokenizer "
            f"keeps at {max_length} tokens")
    if not cut:
        return note + " (none was)."
    counts = "; ".join(f"{name}: {train:,} training and {dev:,} dev rows" for name, (train, dev) in cut.items())
    return note + f" ({counts}); 'tf-idf whole texts' is the same floor reading them uncut."


def _cell(result: dict) -> str:
    if result["spread"] == 0 and len(result["values"]) == 1:
        return f"{100 * result['median']:.1f}"
    return f"{100 * result['median']:.1f} ({100 * result['min']:.1f}-{100 * result['max']:.1f})"


def _seeds(seeds: List[int]) -> str:
    return f"{seeds[0]}-{seeds[-1]}" if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)) else \
        ", ".join(map(str, seeds))
