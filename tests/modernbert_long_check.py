"""transformers 5's side of tests/test_modernbert_long_rows.py's context-extension check (run with a Python that has
torch and transformers 5; no TensorFlow).

`python modernbert_long_check.py FOLDER INPUTS.npz OUT.npz`: loads FOLDER (saved by mlm_tpu) as
ModernBertForMaskedLM under eager attention; prints one JSON line (its max_position_embeddings, rope_parameters,
missing and unexpected keys); writes the logits of each row of INPUTS (`input_ids`, `attention_mask`, one row at a
time) to OUT as `logits_<row>`.
"""

import json
import sys

import numpy as np
import torch
from transformers import ModernBertForMaskedLM


def main(folder: str, inputs_path: str, out_path: str) -> None:
    model, info = ModernBertForMaskedLM.from_pretrained(folder, attn_implementation="eager",
                                                        output_loading_info=True)
    model.eval()
    stored = np.load(inputs_path)
    outputs = {}
    with torch.no_grad():
        for row in range(len(stored["input_ids"])):
            ids = torch.tensor(stored["input_ids"][row:row + 1])
            mask = torch.tensor(stored["attention_mask"][row:row + 1])
            outputs[f"logits_{row}"] = model(input_ids=ids, attention_mask=mask).logits[0].numpy()
    np.savez(out_path, **outputs)
    config = model.config
    print(json.dumps({"max_position_embeddings": config.max_position_embeddings,
                      "rope_parameters": config.rope_parameters, "missing": sorted(info["missing_keys"]),
                      "unexpected": sorted(info["unexpected_keys"])}))


if __name__ == "__main__":
    main(*sys.argv[1:])
