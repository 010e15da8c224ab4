"""Load an adapter folder with PEFT onto its PyTorch base model and compare the logits with TensorFlow's.

Run by tests/test_delta_train.py, tests/test_delta_encoder.py and tests/test_delta_modernbert.py with a Python that
has torch, transformers 5 and peft (no TensorFlow): `python peft_check.py ADAPTER BASE CLASS INPUTS.npz [ADAPTER
BASE CLASS INPUTS.npz ...]` prints one JSON line per adapter (torch and PEFT load once for all): versions, the
adapter's keys the model lacks (unexpected) and the model's adapter weights (modules_to_save: a classifier's head,
too) the file lacks (missing), as `set_peft_model_state_dict` reports them (`PeftModel.from_pretrained` ignores
unexpected keys silently), and the largest logit difference from the TensorFlow logits stored in INPUTS.npz with the
inputs that made them (an encoder's logits at each position: at its real tokens); or, for an adapter PEFT fails to
load or run, the error. BASE `card`: the model is the one the Python snippet of ADAPTER's model card loads, run as
written in ADAPTER's parent folder (the snippet names the folder as the card's title does; CLASS unused). BASE `-`:
ADAPTER is a whole model folder (`export --merge`), loaded by CLASS as tests/pytorch_check.py does.
"""

import json
import os
import re
import sys

import numpy as np
import peft
import torch
import transformers
from peft import PeftModel
from peft.utils import set_peft_model_state_dict
from safetensors.numpy import load_file

TUNER_MARKS = ("lora_", "ia3_", "prompt_encoder", "modules_to_save")


def load(adapter: str, base: str, class_name: str):
    """The PeftModel: `adapter` on `base` loaded by `class_name`, or (base `card`) what the card's snippet loads."""
    if base != "card":
        return PeftModel.from_pretrained(getattr(transformers, class_name).from_pretrained(base), adapter)
    folder = os.path.abspath(adapter)
    with open(os.path.join(folder, "README.md"), encoding="utf-8") as card:
        [snippet] = re.findall(r"```python\n(.*?)```", card.read(), flags=re.DOTALL)
    here = os.getcwd()
    os.chdir(os.path.dirname(folder))
    try:
        scope = {}
        exec(snippet, scope)
    finally:
        os.chdir(here)
    return scope["model"]


def check(adapter: str, base: str, class_name: str, inputs_path: str) -> None:
    if base == "-":
        import pytorch_check

        return pytorch_check.check(adapter, class_name, inputs_path)
    model = load(adapter, base, class_name).eval()
    checked = load(adapter, base, class_name)
    state = {name: torch.tensor(array) for name, array in load_file(f"{adapter}/adapter_model.safetensors").items()}
    result = set_peft_model_state_dict(checked, state)
    prompt_learning = checked.peft_config["default"].is_prompt_learning
    unexpected = [key for key in result.unexpected_keys if not (prompt_learning and key == "prompt_embeddings")]
    missing = [key for key in result.missing_keys if any(mark in key for mark in TUNER_MARKS)]
    if prompt_learning:  # loaded by the prompt encoder itself, past load_state_dict: check it took the weight
        loaded = checked.prompt_encoder["default"].embedding.weight.detach().numpy()
        if np.array_equal(loaded, state["prompt_embeddings"].numpy()):
            missing.remove("prompt_encoder.default.embedding.weight")
    stored = np.load(inputs_path)
    inputs = {name: torch.tensor(stored[name]) for name in stored.files if name != "logits"}
    with torch.no_grad():
        logits = model(**inputs).logits.numpy()
        with model.disable_adapter():
            base_logits = model(**inputs).logits.numpy()
    expected = stored["logits"]
    compared = real_positions(model, stored, logits)
    print(json.dumps({"peft": peft.__version__, "transformers": transformers.__version__, "torch": torch.__version__,
                      "peft_type": str(model.peft_config["default"].peft_type), "unexpected": unexpected,
                      "missing": missing, "tensors": len(state),
                      "max_abs_diff": float(np.abs(logits - expected)[compared].max()),
                      "change_from_base": float(np.abs(logits - base_logits)[compared].max())}))


def real_positions(model, stored, logits) -> np.ndarray:
    """Where to compare: everywhere, but for an encoder's outputs at each position (a tagger's, a masked LM's) only at
    the real tokens: nothing reads its padded positions, and transformers 5's ModernBERT computes them otherwise
    (mlm_tpu matches it at real tokens: tests/test_model_families.py)."""
    mask = stored["attention_mask"].astype(bool) if "attention_mask" in stored.files else None
    if (mask is None or model.config.is_encoder_decoder or logits.ndim != 3
            or logits.shape[:2] != mask.shape):
        return np.ones(logits.shape, bool)
    return np.broadcast_to(mask[:, :, None], logits.shape)


def main() -> None:
    arguments = sys.argv[1:]
    for start in range(0, len(arguments), 4):
        try:
            check(*arguments[start:start + 4])
        except Exception as error:  # one adapter PEFT refuses: said, and the others still checked
            print(json.dumps({"error": f"{type(error).__name__}: {error}"[-2000:]}))


if __name__ == "__main__":
    main()
