"""Exact search on the accelerator: every query against every document by cosine similarity, the corpus taken in
chunks (its embeddings, not a [queries x corpus] matrix, bound the memory), each chunk's best k merged with the best
so far by tf.math.top_k. What `predict search` and the retrieval evaluation rank with."""

from typing import Tuple

import numpy as np
import tensorflow as tf

CORPUS_CHUNK = 8192  # documents scored at a time


def normalized(embeddings: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (a zero row stays zero): their dot products are cosines."""
    embeddings = np.asarray(embeddings, np.float32)
    return embeddings / np.maximum(np.linalg.norm(embeddings, axis=1, keepdims=True), 1e-12)


@tf.function
def _merged_top_k(queries, chunk, offset, best_scores, best_ids, k: int):
    scores = tf.matmul(queries, chunk, transpose_b=True)
    found = tf.math.top_k(scores, k=tf.minimum(k, tf.shape(chunk)[0]))
    scores = tf.concat([best_scores, found.values], axis=1)
    ids = tf.concat([best_ids, found.indices + offset], axis=1)
    kept = tf.math.top_k(scores, k=tf.minimum(k, tf.shape(scores)[1]))
    return kept.values, tf.gather(ids, kept.indices, batch_dims=1)


def top_k(queries: np.ndarray, documents: np.ndarray, k: int, chunk: int = CORPUS_CHUNK
          ) -> Tuple[np.ndarray, np.ndarray]:
    """(cosine similarities [queries, k'], document rows [queries, k']) of each query's k' = min(k, documents) most
    similar documents, best first (ties: the lower row first)."""
    queries = tf.constant(normalized(queries))
    documents = normalized(documents)
    scores = tf.zeros([queries.shape[0], 0], tf.float32)
    ids = tf.zeros([queries.shape[0], 0], tf.int32)
    for start in range(0, len(documents), chunk):
        scores, ids = _merged_top_k(queries, tf.constant(documents[start:start + chunk]), tf.constant(start),
                                    scores, ids, k)
    return scores.numpy(), ids.numpy()
