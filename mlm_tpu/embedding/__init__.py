"""The sentence-embedding line: an encoder fine-tuned contrastively on (query, positive, hard negatives) rows, the
negatives being the whole global batch (loss.py), GradCache for batches larger than memory (grad_cache.py), saved as
a sentence-transformers model (saving.py), judged by retrieval (retrieval.py)."""
