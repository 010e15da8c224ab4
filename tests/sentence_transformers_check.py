"""Load embedding-model folders in sentence-transformers (PyTorch, transformers 5) and compare with mlm_tpu.

Run by tests/test_embedding.py with a Python that has torch, transformers 5 and sentence-transformers (no
TensorFlow): `python sentence_transformers_check.py TEXTS.json FOLDER VECTORS.npy [FOLDER VECTORS.npy ...]`,
VECTORS.npy holding mlm_tpu's vectors of the texts. Prints one JSON line per folder: the architecture
SentenceTransformer built, its pooling mode, its similarity function and the largest absolute difference of its
encode(texts) from mlm_tpu's vectors.
"""

import json
import sys

import numpy as np
from sentence_transformers import SentenceTransformer


def main() -> None:
    texts = json.loads(open(sys.argv[1], encoding="utf-8").read())
    arguments = sys.argv[2:]
    for folder, vectors in zip(arguments[::2], arguments[1::2]):
        model = SentenceTransformer(folder, device="cpu")
        found = model.encode(texts)
        print(json.dumps({"folder": folder, "architecture": type(model[0].auto_model).__name__,
                          "pooling": model[1].get_config_dict().get("pooling_mode"),
                          "similarity": model.similarity_fn_name,
                          "max_abs_diff": float(np.abs(found - np.load(vectors)).max())}), flush=True)


if __name__ == "__main__":
    main()
