"""Load a mean-pooled classifier folder in transformers 5 (trust_remote_code) and in sentence-transformers, and
compare with TensorFlow.

Run by tests/test_classifier_pooling.py with a Python that has torch, transformers 5 and sentence-transformers (no
TensorFlow): `python pooling_check.py FOLDER INPUTS.npz [FOLDER INPUTS.npz ...]`, INPUTS.npz holding the model's
inputs, TensorFlow's logits and TensorFlow's masked mean of the last hidden states (`embeddings`) on the texts in
`texts`. Prints one JSON line per folder: the class AutoModelForSequenceClassification built with
trust_remote_code=True, its labels and largest logit difference, the same for transformers' own class (built without
it: it reads the first token), and the largest difference of SentenceTransformer(FOLDER).encode(texts) from the
embeddings.
"""

import json
import sys

import numpy as np
import torch
import transformers
from sentence_transformers import SentenceTransformer
from transformers import AutoModelForSequenceClassification


def logits_of(model, inputs) -> np.ndarray:
    with torch.no_grad():
        return model.eval()(**inputs).logits.numpy()


def check(folder: str, inputs_path: str) -> None:
    stored = np.load(inputs_path)
    inputs = {name: torch.tensor(stored[name]) for name in stored.files if name not in ("logits", "embeddings",
                                                                                          "texts")}
    remote = AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True)
    own = AutoModelForSequenceClassification.from_pretrained(folder)
    embeddings = SentenceTransformer(folder, device="cpu").encode([str(text) for text in stored["texts"]])
    print(json.dumps({"transformers": transformers.__version__, "class": type(remote).__name__,
                      "id2label": {str(key): value for key, value in remote.config.id2label.items()},
                      "max_abs_diff": float(np.abs(logits_of(remote, inputs) - stored["logits"]).max()),
                      "own_class": type(own).__name__,
                      "own_class_diff": float(np.abs(logits_of(own, inputs) - stored["logits"]).max()),
                      "embeddings_diff": float(np.abs(embeddings - stored["embeddings"]).max())}), flush=True)


def main() -> None:
    arguments = sys.argv[1:]
    for start in range(0, len(arguments), 2):
        check(*arguments[start:start + 2])


if __name__ == "__main__":
    main()
