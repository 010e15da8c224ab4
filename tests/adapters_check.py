"""Run the Python snippet of a bottleneck-adapter folder's model card, as written, with AdapterHub's `adapters`, and
compare the model it loads with TensorFlow's logits.

Run by tests/test_delta_train.py with a Python that has torch, transformers 4.57 and adapters (no TensorFlow):
`python adapters_check.py ADAPTER INPUTS.npz` runs the card's snippet in ADAPTER's parent folder (the snippet names
the folder as the card's title does) and prints one JSON line: versions, the saved keys no adapter weight of the
model takes (unexpected), the model's adapter weights the file lacks (missing), and the largest logit difference
from the TensorFlow logits stored in INPUTS.npz.
"""

import json
import os
import re
import sys

import adapters
import numpy as np
import torch
import transformers
from safetensors.numpy import load_file


def main() -> None:
    folder, inputs_path = (os.path.abspath(path) for path in sys.argv[1:3])
    with open(os.path.join(folder, "README.md"), encoding="utf-8") as card:
        [snippet] = re.findall(r"```python\n(.*?)```", card.read(), flags=re.DOTALL)
    os.chdir(os.path.dirname(folder))
    scope = {}
    exec(snippet, scope)
    model = scope["model"].eval()
    [name] = model.adapters_config.adapters
    saved = set(load_file(f"{folder}/adapter.safetensors"))
    present = {key for key, _ in model.named_parameters() if f".adapters.{name}." in key}
    stored = np.load(inputs_path)
    inputs = {key: torch.tensor(stored[key]) for key in stored.files if key != "logits"}
    with torch.no_grad():
        logits = model(**inputs).logits.numpy()
    print(json.dumps({"adapters": adapters.__version__, "transformers": transformers.__version__,
                      "torch": torch.__version__, "config": model.adapters_config.get(name).__class__.__name__,
                      "snippet": snippet, "unexpected": sorted(saved - present), "missing": sorted(present - saved),
                      "tensors": len(saved), "max_abs_diff": float(np.abs(logits - stored["logits"]).max())}))


if __name__ == "__main__":
    main()
