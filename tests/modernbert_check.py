"""transformers 5's ModernBERT classes on the PyTorch side of tests/test_modernbert.py (run with a Python that has
torch and transformers 5; no TensorFlow).

`python modernbert_check.py make CONFIG.json INPUTS.npz OUT_DIR`: for each head (masked LM, sequence classification
pooled by cls and by mean, token classification), a model of CONFIG made by transformers 5 with perturbed weights
(norms and biases too, so none is trivially 1 or 0), saved by `save_pretrained` in OUT_DIR/<name>/ with its
outputs on the inputs, under eager and sdpa attention: OUT_DIR/<name>/outputs.npz (`logits_eager`, `logits_sdpa`,
`hidden_<i>` under eager); the masked LM's also its loss on the inputs' `labels` (`loss`) and its logits at the
labelled positions with `sparse_prediction` on (`logits_sparse`, flattened as it gives them). Prints one JSON
line.

`python modernbert_check.py check INPUTS.npz FOLDER CLASS [FOLDER CLASS ...]`: loads each folder (saved by
TensorFlow, its logits and hidden states in FOLDER/tf_outputs.npz) under eager and sdpa attention and prints one
JSON line per folder: missing and unexpected keys, the largest logit and hidden-state differences over the real
tokens (padding positions are not compared: no one reads them).

`python modernbert_check.py make-masked-lm CONFIG.json TOKENIZER OUT_DIR`: a ModernBertForMaskedLM of CONFIG made by
transformers 5 with TOKENIZER's vocabulary and special ids, its weights perturbed (so its losses differ from one
masking to another by far more than a check's tolerance), saved by `save_pretrained` (PyTorch-only safetensors) with
the tokenizer.

`python modernbert_check.py continued INPUTS.npz BASE TRAINED COMPARED.npz OUT.npz`: BASE's masked-LM loss on
INPUTS' labels (transformers 5's own: the mean over labelled tokens) under eager and sdpa attention; TRAINED loaded as
ModernBertForMaskedLM (missing and unexpected keys) with its logits on COMPARED's rows in OUT.npz. Prints one JSON
line.
"""

import json
import os
import sys

import numpy as np
import torch
import transformers
from transformers import (ModernBertConfig, ModernBertForMaskedLM, ModernBertForSequenceClassification,
                          ModernBertForTokenClassification)

IMPLEMENTATIONS = ("eager", "sdpa")
HEADS = {"masked_lm": (ModernBertForMaskedLM, {}),
         "classifier_cls": (ModernBertForSequenceClassification, {"classifier_pooling": "cls", "num_labels": 3}),
         "classifier_mean": (ModernBertForSequenceClassification, {"classifier_pooling": "mean", "num_labels": 3}),
         "tokens": (ModernBertForTokenClassification, {"num_labels": 5})}


def inputs_of(path: str):
    stored = np.load(path)
    return {name: torch.tensor(stored[name]) for name in ("input_ids", "attention_mask")}


def outputs_of(model, inputs, implementation: str):
    model.set_attn_implementation(implementation)
    with torch.no_grad():
        return model.eval()(**inputs, output_hidden_states=True)


def perturb(model, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            noise = torch.randn(parameter.shape, generator=generator)
            parameter.copy_(1.0 + 0.1 * noise if "norm" in name and name.endswith("weight") else 0.1 * noise)


def make(config_path: str, inputs_path: str, out_dir: str) -> None:
    inputs = inputs_of(inputs_path)
    for seed, (name, (model_class, changes)) in enumerate(HEADS.items()):
        config = ModernBertConfig.from_json_file(config_path)
        for key, value in changes.items():
            setattr(config, key, value)
        torch.manual_seed(seed)
        model = model_class(config)
        perturb(model, seed)
        folder = os.path.join(out_dir, name)
        model.save_pretrained(folder)
        arrays = {}
        for implementation in IMPLEMENTATIONS:
            outputs = outputs_of(model, inputs, implementation)
            arrays[f"logits_{implementation}"] = outputs.logits.numpy()
            if implementation == "eager":
                arrays.update({f"hidden_{index}": hidden.numpy() for index, hidden in enumerate(outputs.hidden_states)})
        if name == "masked_lm":
            labels = torch.tensor(np.load(inputs_path)["labels"])
            with torch.no_grad():
                arrays["loss"] = model(**inputs, labels=labels).loss.numpy()
                model.sparse_prediction = True
                arrays["logits_sparse"] = model(**inputs, labels=labels).logits.numpy()
        np.savez(os.path.join(folder, "outputs.npz"), **arrays)
    print(json.dumps({"transformers": transformers.__version__, "torch": torch.__version__, "made": list(HEADS)}))


def largest_difference(ours: np.ndarray, theirs: np.ndarray, mask: np.ndarray) -> float:
    """Over the real tokens where the arrays hold positions, over everything where they do not."""
    if ours.ndim >= 2 and ours.shape[:2] == mask.shape:
        ours, theirs = ours[mask.astype(bool)], theirs[mask.astype(bool)]
    return float(np.abs(ours - theirs).max())


def check(inputs_path: str, folder: str, class_name: str) -> None:
    inputs = inputs_of(inputs_path)
    mask = inputs["attention_mask"].numpy()
    expected = np.load(os.path.join(folder, "tf_outputs.npz"))
    report = {"folder": os.path.basename(folder), "class": class_name}
    for implementation in IMPLEMENTATIONS:
        model, info = getattr(transformers, class_name).from_pretrained(folder, output_loading_info=True,
                                                                       attn_implementation=implementation)
        outputs = outputs_of(model, inputs, implementation)
        report[f"logits_{implementation}"] = largest_difference(outputs.logits.numpy(), expected["logits"], mask)
        report[f"hidden_{implementation}"] = max(
            largest_difference(hidden.numpy(), expected[f"hidden_{index}"], mask)
            for index, hidden in enumerate(outputs.hidden_states))
        report.update(missing=list(info["missing_keys"]), unexpected=list(info["unexpected_keys"]),
                      mismatched=[str(item) for item in info["mismatched_keys"]])
        report["classifier_pooling"] = model.config.classifier_pooling
    print(json.dumps(report), flush=True)


def make_masked_lm(config_path: str, tokenizer_folder: str, out_dir: str) -> None:
    tokenizer = transformers.AutoTokenizer.from_pretrained(tokenizer_folder)
    config = ModernBertConfig.from_json_file(config_path)
    config.vocab_size = len(tokenizer)
    ids = {"pad": tokenizer.pad_token_id, "cls": tokenizer.cls_token_id, "sep": tokenizer.sep_token_id}
    for name, token in {**ids, "bos": ids["cls"], "eos": ids["sep"]}.items():
        setattr(config, f"{name}_token_id", token)
    torch.manual_seed(0)
    model = ModernBertForMaskedLM(config)
    perturb(model, 0)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    print(json.dumps({"made": out_dir, "vocab_size": config.vocab_size}))


def continued(inputs_path: str, base: str, trained: str, compared_path: str, out_path: str) -> None:
    inputs = inputs_of(inputs_path)
    labels = torch.tensor(np.load(inputs_path)["labels"])
    report = {}
    for implementation in IMPLEMENTATIONS:
        model = ModernBertForMaskedLM.from_pretrained(base, attn_implementation=implementation).eval()
        with torch.no_grad():
            report[f"loss_{implementation}"] = float(model(**inputs, labels=labels).loss)
    model, info = ModernBertForMaskedLM.from_pretrained(trained, output_loading_info=True,
                                                        attn_implementation="eager")
    np.savez(out_path, logits=outputs_of(model, inputs_of(compared_path), "eager").logits.numpy())
    report.update(missing=list(info["missing_keys"]), unexpected=list(info["unexpected_keys"]))
    print(json.dumps(report))


def main() -> None:
    command, *arguments = sys.argv[1:]
    if command == "make":
        make(*arguments)
    elif command == "make-masked-lm":
        make_masked_lm(*arguments)
    elif command == "continued":
        continued(*arguments)
    else:
        inputs_path, *rest = arguments
        for start in range(0, len(rest), 2):
            check(inputs_path, *rest[start:start + 2])


if __name__ == "__main__":
    main()
