"""Load an adapter folder with PEFT onto its PyTorch base model and compare the logits with TensorFlow's.

Run by tests/test_delta_train.py with a Python that has torch, transformers 5 and peft (no TensorFlow):
`python peft_check.py ADAPTER BASE CLASS INPUTS.npz [ADAPTER BASE CLASS INPUTS.npz ...]` prints one JSON line per
adapter (torch and PEFT load once for all): versions, the adapter's keys the
model lacks (unexpected) and the model's adapter weights the file lacks (missing), as
`set_peft_model_state_dict` reports them (`PeftModel.from_pretrained` ignores unexpected keys silently), and the
largest logit difference from the TensorFlow logits stored in INPUTS.npz with the inputs that made them; or, for
an adapter PEFT fails to load or run, the error.
"""

import json
import sys

import numpy as np
import peft
import torch
import transformers
from peft import PeftModel
from peft.utils import set_peft_model_state_dict
from safetensors.numpy import load_file

TUNER_MARKS = ("lora_", "ia3_", "prompt_encoder")


def check(adapter: str, base: str, class_name: str, inputs_path: str) -> None:
    model_class = getattr(transformers, class_name)
    model = PeftModel.from_pretrained(model_class.from_pretrained(base), adapter).eval()
    checked = PeftModel.from_pretrained(model_class.from_pretrained(base), adapter)
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
    print(json.dumps({"peft": peft.__version__, "transformers": transformers.__version__, "torch": torch.__version__,
                      "peft_type": str(model.peft_config["default"].peft_type), "unexpected": unexpected,
                      "missing": missing, "tensors": len(state),
                      "max_abs_diff": float(np.abs(logits - expected).max()),
                      "change_from_base": float(np.abs(logits - base_logits).max())}))


def main() -> None:
    arguments = sys.argv[1:]
    for start in range(0, len(arguments), 4):
        try:
            check(*arguments[start:start + 4])
        except Exception as error:  # one adapter PEFT refuses: said, and the others still checked
            print(json.dumps({"error": f"{type(error).__name__}: {error}"[-2000:]}))


if __name__ == "__main__":
    main()
