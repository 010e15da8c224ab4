"""What validation of an embedding model runs each epoch (through training/evaluation.py's PredictionValidation):
the queries and positives of the validation split embedded on the device, and on the host each query ranked against
every positive of the split: whether its own comes first (accuracy@1) and the reciprocal of its rank within the
first 10 (MRR@10). Padding rows (no attention) are left out."""

from typing import Dict

import numpy as np
import tensorflow as tf

from mlm_tpu.embedding.encoder import TextEmbedder
from mlm_tpu.training.task import Scores

SCORES = {"accuracy_at_1": "each query's own positive ranked first among the split's positives",
          "mrr_at_10": "mean reciprocal rank of the positive, within the first 10"}


def ranks(queries: np.ndarray, documents: np.ndarray) -> np.ndarray:
    """The rank (1 first) of each query's own document (row i) among all, by cosine similarity."""
    queries = queries / np.maximum(np.linalg.norm(queries, axis=1, keepdims=True), 1e-12)
    documents = documents / np.maximum(np.linalg.norm(documents, axis=1, keepdims=True), 1e-12)
    similarities = queries @ documents.T
    own = np.diag(similarities)
    return 1 + (similarities > own[:, None]).sum(axis=1)


class PairScorer:
    """Queries and positives embedded on the device, ranked on the host."""

    best_metric = "mrr_at_10"

    def __init__(self, embedder: TextEmbedder):
        self.embedder = embedder

    def on_device(self, model, batch: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
        return {"query": self.embedder(batch["input_ids"], batch["attention_mask"]),
                "positive": self.embedder(batch["positive_input_ids"], batch["positive_attention_mask"]),
                "real": tf.cast(batch["attention_mask"][:, 0] > 0, tf.int32)}

    def score(self, outputs: Dict[str, np.ndarray]) -> Scores:
        real = outputs["real"] > 0
        found = ranks(outputs["query"][real].astype(np.float64), outputs["positive"][real].astype(np.float64))
        return {"accuracy_at_1": float(np.mean(found == 1)),
                "mrr_at_10": float(np.mean(np.where(found <= 10, 1.0 / found, 0.0)))}

    def describe(self, scores: Scores) -> str:
        return (f"each query against the split's {'positives'}: accuracy@1 {scores['accuracy_at_1']:.2%}, "
                f"MRR@10 {scores['mrr_at_10']:.4f}")
