"""Load a bottleneck-adapter folder with AdapterHub's `adapters` onto its PyTorch base model, and compare logits.

Run by tests/test_delta_train.py with a Python that has torch, transformers 4.57 and adapters (no TensorFlow):
`python adapters_check.py ADAPTER BASE CLASS INPUTS.npz` prints one JSON line: versions, the saved keys no
adapter weight of the model takes (unexpected), the model's adapter weights the file lacks (missing), and the
largest logit difference from the TensorFlow logits stored in INPUTS.npz.
"""

import json
import sys

import adapters
import numpy as np
import torch
import transformers
from safetensors.numpy import load_file


def main() -> None:
    folder, base, class_name, inputs_path = sys.argv[1:5]
    model = getattr(transformers, class_name).from_pretrained(base)
    adapters.init(model)
    name = model.load_adapter(folder, set_active=True, use_safetensors=True)
    model.eval()
    saved = set(load_file(f"{folder}/adapter.safetensors"))
    present = {key for key, _ in model.named_parameters() if f".adapters.{name}." in key}
    stored = np.load(inputs_path)
    inputs = {key: torch.tensor(stored[key]) for key in stored.files if key != "logits"}
    with torch.no_grad():
        logits = model(**inputs).logits.numpy()
    print(json.dumps({"adapters": adapters.__version__, "transformers": transformers.__version__,
                      "torch": torch.__version__, "config": model.adapters_config.get(name).__class__.__name__,
                      "unexpected": sorted(saved - present), "missing": sorted(present - saved),
                      "tensors": len(saved), "max_abs_diff": float(np.abs(logits - stored["logits"]).max())}))


if __name__ == "__main__":
    main()
