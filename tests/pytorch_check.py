"""Load a model folder with transformers' PyTorch classes and compare its logits with TensorFlow's.

Run by tests/test_export.py and tests/test_encoder.py with any Python that has torch and transformers
(transformers 5 included; no TensorFlow needed): `python pytorch_check.py FOLDER CLASS INPUTS.npz [FOLDER CLASS
INPUTS.npz ...]` prints one JSON line per folder with the transformers version, the missing and unexpected keys
(buffers aside), the labels the config names (id2label) and the largest logit difference from the TensorFlow
logits stored in INPUTS.npz (with the inputs that made them).
"""

import json
import sys

import numpy as np
import torch
import transformers


def main() -> None:
    arguments = sys.argv[1:]
    for start in range(0, len(arguments), 3):
        check(*arguments[start:start + 3])


def check(folder: str, class_name: str, inputs_path: str) -> None:
    model, info = getattr(transformers, class_name).from_pretrained(folder, output_loading_info=True)
    buffers = {name for name, _ in model.named_buffers()}
    stored = np.load(inputs_path)
    inputs = {name: torch.tensor(stored[name]) for name in stored.files if name != "logits"}
    with torch.no_grad():
        logits = model.eval()(**inputs).logits.numpy()
    print(json.dumps({"transformers": transformers.__version__, "torch": torch.__version__,
                      "missing": [key for key in info["missing_keys"] if key not in buffers],
                      "unexpected": list(info["unexpected_keys"]),
                      "id2label": {str(key): value for key, value in model.config.id2label.items()},
                      "max_abs_diff": float(np.abs(logits - stored["logits"]).max())}), flush=True)


if __name__ == "__main__":
    main()
