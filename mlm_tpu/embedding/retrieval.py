"""Retrieval evaluation of an embedding model on a BEIR folder's split: every query embedded, the whole corpus
embedded, exact search on the device (search.py), the ranking written as a TREC run file, and nDCG@10, recall@100 and
MRR@10 computed by trec_eval's own code (pytrec-eval-terrier) from that same run, not by hand."""

import os
from typing import Dict, List, Optional, Sequence

import numpy as np

from mlm_tpu.embedding.beir import RetrievalSet

DEPTH = 100  # documents kept per query: recall@100's
MEASURES = {"ndcg_cut_10": "ndcg@10", "recall_100": "recall@100", "recip_rank": "mrr@10"}


def run_of(query_ids: Sequence[str], document_ids: Sequence[str], scores: np.ndarray, rows: np.ndarray
           ) -> Dict[str, Dict[str, float]]:
    """A run (query id -> {document id: score}) from each query's ranked rows."""
    return {query: {document_ids[row]: float(score) for score, row in zip(query_scores, query_rows)}
            for query, query_scores, query_rows in zip(query_ids, scores, rows)}


def trec_run_lines(run: Dict[str, Dict[str, float]], name: str) -> List[str]:
    """The run in TREC's format: `query Q0 document rank score name`, best first."""
    lines = []
    for query, found in run.items():
        ranked = sorted(found.items(), key=lambda item: (-item[1], item[0]))
        lines += [f"{query} Q0 {document} {rank} {score:.6f} {name}"
                  for rank, (document, score) in enumerate(ranked, start=1)]
    return lines


def scores_of_run(qrels: Dict[str, Dict[str, int]], run: Dict[str, Dict[str, float]]) -> Dict[str, float]:
    """nDCG@10, recall@100 and MRR@10 (trec_eval's reciprocal rank, the run cut at 10), each the mean over the
    judged queries (a query the run misses counts 0)."""
    import pytrec_eval

    cut = {query: dict(sorted(found.items(), key=lambda item: (-item[1], item[0]))[:10])
           for query, found in run.items()}
    deep = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100"}).evaluate(run)
    shallow = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(cut)
    results = {}
    for measure, evaluated in (("ndcg_cut_10", deep), ("recall_100", deep), ("recip_rank", shallow)):
        results[MEASURES[measure]] = float(np.mean([evaluated.get(query, {}).get(measure, 0.0) for query in qrels]))
    return results


def evaluate_retrieval(embed, data: RetrievalSet, run_file: Optional[str] = None, name: str = "mlm_tpu"
                       ) -> Dict[str, float]:
    """`embed` (texts -> [texts, width]) judged on `data`: its scores, and the run written to `run_file`."""
    from mlm_tpu.embedding.search import top_k

    query_ids, document_ids = list(data.queries), list(data.corpus)
    scores, rows = top_k(embed([data.queries[key] for key in query_ids]),
                         embed([data.corpus[key] for key in document_ids]), DEPTH)
    run = run_of(query_ids, document_ids, scores, rows)
    if run_file:
        from mlm_tpu.output_dir import write_file

        os.makedirs(os.path.dirname(os.path.abspath(run_file)), exist_ok=True)
        write_file(run_file, ("\n".join(trec_run_lines(run, name)) + "\n").encode())
    return scores_of_run(data.qrels, run)
