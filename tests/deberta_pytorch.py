"""The PyTorch side of tests/test_deberta_v3.py, run with any Python that has torch and transformers 5 (no
TensorFlow): `python deberta_pytorch.py make FOLDER TOKENIZER` saves a new DeBERTa-v3-shaped DebertaV2Model (a tiny
one, PyTorch weights only, as the Hub's checkpoints are) with the tokenizer's files; `python deberta_pytorch.py check
FOLDER INPUTS.npz` loads FOLDER as DebertaV2Model and as DebertaV2ForSequenceClassification and prints one JSON line:
the weights each lacks (buffers aside) and the largest difference of DebertaV2Model's last hidden states from those
stored in INPUTS.npz (with the inputs that made them)."""

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import torch
import transformers

V3_TINY = dict(vocab_size=2000, hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=256,
               max_position_embeddings=64, relative_attention=True, position_buckets=32, norm_rel_ebd="layer_norm",
               share_att_key=True, pos_att_type=["p2c", "c2p"], position_biased_input=False, type_vocab_size=0,
               layer_norm_eps=1e-7, max_relative_positions=-1, pad_token_id=0)


def make(folder: str, tokenizer: str) -> None:
    torch.manual_seed(0)
    model = transformers.DebertaV2Model(transformers.DebertaV2Config(**V3_TINY))
    model.save_pretrained(folder)
    for path in Path(tokenizer).iterdir():
        if path.name != "config.json" and path.is_file():
            shutil.copy(path, Path(folder) / path.name)


def check(folder: str, inputs_path: str) -> None:
    stored = np.load(inputs_path)
    inputs = {name: torch.tensor(stored[name]) for name in ("input_ids", "attention_mask")}
    missing = {}
    for class_name in ("DebertaV2Model", "DebertaV2ForSequenceClassification"):
        model, info = getattr(transformers, class_name).from_pretrained(folder, output_loading_info=True)
        buffers = {name for name, _ in model.named_buffers()}
        missing[class_name] = [key for key in info["missing_keys"] if key not in buffers]
        if class_name == "DebertaV2Model":
            with torch.no_grad():
                hidden = model.eval()(**inputs).last_hidden_state.numpy()
    print(json.dumps({"transformers": transformers.__version__, "missing": missing,
                      "max_abs_diff": float(np.abs(hidden - stored["hidden"]).max())}), flush=True)


if __name__ == "__main__":
    {"make": make, "check": check}[sys.argv[1]](*sys.argv[2:])
