"""BEIR's folder, the format retrieval benchmarks ship in: corpus.jsonl ({"_id", "title", "text"}), queries.jsonl
({"_id", "text"}) and qrels/<split>.tsv (a header, then query-id, corpus-id, score: tab-separated). Read whole and
checked before any model runs: a missing file or split, an empty query or document, an id given twice, and qrels
naming an id the corpus or queries lack are one error line each. A document's text is its title and text joined by a
space, as BEIR's and sentence-transformers' evaluators join them."""

import json
import os
from dataclasses import dataclass
from typing import Dict, List

from mlm_tpu.errors import UserError

CORPUS, QUERIES, QRELS = "corpus.jsonl", "queries.jsonl", "qrels"


@dataclass
class RetrievalSet:
    """A BEIR folder's split: its documents and queries by id, and each query's relevant documents (score > 0)."""

    folder: str
    split: str
    corpus: Dict[str, str]
    queries: Dict[str, str]  # the queries the split's qrels judge, in the file's order
    qrels: Dict[str, Dict[str, int]]  # query id -> {document id: relevance}


def _rows(path: str, what: str) -> List[dict]:
    if not os.path.isfile(path):
        raise UserError(f"{path}: no such file; a BEIR folder holds {CORPUS}, {QUERIES} and {QRELS}/<split>.tsv")
    rows = []
    with open(path, encoding="utf-8") as stream:
        for number, line in enumerate(stream, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise UserError(f"{path}:{number}: not a JSON object ({error.msg}); each line holds one {what}") \
                    from None
            if not isinstance(row, dict) or "_id" not in row:
                raise UserError(f"{path}:{number}: a {what} needs its \"_id\"; each line is {{\"_id\", ...}}")
            rows.append({**row, "_where": f"{path}:{number}"})
    return rows


def _texts(path: str, what: str, with_title: bool) -> Dict[str, str]:
    """id -> text of a corpus or queries file; a duplicate id or an empty text is one error line."""
    found: Dict[str, str] = {}
    for row in _rows(path, what):
        key = str(row["_id"])
        if key in found:
            raise UserError(f"{row['_where']}: the {what} id '{key}' is given twice; ids must be unique (remove or "
                            "rename one)")
        parts = [row.get("title") or "", row.get("text") or ""] if with_title else [row.get("text") or ""]
        text = " ".join(str(part).strip() for part in parts if str(part).strip())
        if not text:
            raise UserError(f"{row['_where']}: the {what} '{key}' is empty; give it a text or remove the line")
        found[key] = text
    if not found:
        raise UserError(f"{path} holds no {what}")
    return found


def read_corpus(path: str) -> Dict[str, str]:
    """A corpus.jsonl: document id -> its title and text."""
    return _texts(path, "document", with_title=True)


def read_qrels(path: str) -> Dict[str, Dict[str, int]]:
    """qrels/<split>.tsv: query id -> {document id: relevance}, its header line skipped."""
    qrels: Dict[str, Dict[str, int]] = {}
    with open(path, encoding="utf-8") as stream:
        for number, line in enumerate(stream, start=1):
            fields = line.rstrip("\n").split("\t")
            if number == 1 and not fields[-1].lstrip("-").isdigit():
                continue  # the header: query-id corpus-id score
            if not line.strip():
                continue
            if len(fields) != 3 or not fields[2].lstrip("-").isdigit():
                raise UserError(f"{path}:{number}: a qrels line is query-id, corpus-id and a whole-number score, "
                                "separated by tabs")
            qrels.setdefault(fields[0], {})[fields[1]] = int(fields[2])
    return qrels


def read_beir(folder: str, split: str = "test") -> RetrievalSet:
    """A BEIR folder's `split`, checked whole."""
    if not os.path.isdir(folder):
        raise UserError(f"{folder}: no such folder (a BEIR folder: {CORPUS}, {QUERIES}, {QRELS}/<split>.tsv)")
    qrels_path = os.path.join(folder, QRELS, f"{split}.tsv")
    if not os.path.isfile(qrels_path):
        there = sorted(name[:-4] for name in os.listdir(os.path.join(folder, QRELS)) if name.endswith(".tsv")) \
            if os.path.isdir(os.path.join(folder, QRELS)) else []
        raise UserError(f"{folder} has no {QRELS}/{split}.tsv (the relevance judgements of split '{split}'"
                        f"{'; it has ' + ', '.join(there) if there else ''}); add it, or name a split it has")
    corpus = read_corpus(os.path.join(folder, CORPUS))
    queries = _texts(os.path.join(folder, QUERIES), "query", with_title=False)
    qrels = read_qrels(qrels_path)
    unknown_queries = [key for key in qrels if key not in queries]
    unknown_documents = sorted({document for judged in qrels.values() for document in judged if document not in corpus})
    if unknown_queries or unknown_documents:
        named = (f"query ids not in {QUERIES} ({', '.join(unknown_queries[:3])})" if unknown_queries else
                 f"document ids not in {CORPUS} ({', '.join(unknown_documents[:3])})")
        raise UserError(f"{qrels_path} names {named}; fix the ids or the files")
    relevant = {key: judged for key, judged in qrels.items() if any(score > 0 for score in judged.values())}
    if not relevant:
        raise UserError(f"{qrels_path} marks no document relevant (score > 0) for any query: nothing to find")
    return RetrievalSet(folder, split, corpus, {key: queries[key] for key in queries if key in relevant}, relevant)
