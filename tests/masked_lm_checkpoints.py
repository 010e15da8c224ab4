"""Make tiny PyTorch-only masked-LM checkpoints of several families, as transformers 5 saves them, and the masked-LM
loss transformers computes on one masked batch of each.

Run by tests/test_continued_families.py with a Python that has torch and transformers 5 (no TensorFlow needed):
`python masked_lm_checkpoints.py SPEC.json`. SPEC names the output folder, the text and, per family, the
tokenizer folder (made by `python -m mlm_tpu.tokenizer train`; XLM-R, ALBERT and DeBERTa-v2 get their own
class, on its Unigram vocabulary). Each checkpoint folder gets random weights (every
parameter perturbed, so that a bias or layer norm loaded wrong shows), `save_pretrained`'s model.safetensors and the
tokenizer as transformers 5 saves it; beside it, `FAMILY.npz` holds input_ids, attention_mask and labels (a seeded
15% of the non-special tokens masked) and the loss and logits transformers computed. One JSON line per family.
"""

import json
import os
import sys

import numpy as np
import torch
import transformers

TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
LENGTH = 32  # tokens per row of the masked batch
# SentencePiece families: their own tokenizer class, on the vocabulary of the Unigram tokenizer given
UNIGRAM_CLASSES = {"xlm-roberta": "XLMRobertaTokenizer", "albert": "AlbertTokenizer",
                   "deberta-v2": "DebertaV2Tokenizer"}
SPECIAL_TOKENS = dict(cls_token="[CLS]", sep_token="[SEP]", bos_token="[CLS]", eos_token="[SEP]", pad_token="<pad>",
                      unk_token="<unk>", mask_token="[MASK]")  # `python -m mlm_tpu.tokenizer train`'s


def tokenizer_of(family: str, folder: str):
    """The tokenizer in `folder`, as the family's own class where it has one of SentencePiece's."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    if family not in UNIGRAM_CLASSES:
        return tokenizer
    vocab = [tuple(entry) for entry in json.loads(tokenizer.backend_tokenizer.to_str())["model"]["vocab"]]
    extra = {"unk_id": tokenizer.unk_token_id} if family == "deberta-v2" else {}
    return getattr(transformers, UNIGRAM_CLASSES[family])(vocab=vocab, **SPECIAL_TOKENS, **extra)


def config_of(family: str, tokenizer):
    """A tiny configuration of `family`, its vocabulary and special ids the tokenizer's."""
    ids = dict(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id)
    framing = dict(bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id)
    if family == "bert":
        return transformers.BertConfig(**TINY, **ids, max_position_embeddings=64)
    if family in ("roberta", "xlm-roberta"):  # positions numbered from pad_token_id + 1
        config_class = transformers.RobertaConfig if family == "roberta" else transformers.XLMRobertaConfig
        return config_class(**TINY, **ids, **framing, max_position_embeddings=64 + tokenizer.pad_token_id + 1,
                            type_vocab_size=1)
    if family == "distilbert":
        return transformers.DistilBertConfig(**ids, dim=32, n_layers=2, n_heads=2, hidden_dim=64,
                                             max_position_embeddings=64)
    if family == "albert":
        return transformers.AlbertConfig(**TINY, **ids, **framing, embedding_size=16, max_position_embeddings=64)
    if family == "deberta-v2":  # DeBERTa-v3's attention: relative positions only, shared keys, log buckets
        return transformers.DebertaV2Config(**TINY, **ids, max_position_embeddings=64, relative_attention=True,
                                            position_biased_input=False, pos_att_type=["p2c", "c2p"],
                                            position_buckets=16, norm_rel_ebd="layer_norm", share_att_key=True,
                                            type_vocab_size=0)
    if family == "electra":  # the generator: a smaller hidden size under wider embeddings
        return transformers.ElectraConfig(**TINY, **ids, embedding_size=16, max_position_embeddings=64)
    raise ValueError(family)


def masked_batch(tokenizer, texts, seed: int):
    """input_ids, attention_mask and labels of `texts`, a seeded 15% of the ordinary tokens masked."""
    encoded = tokenizer(texts, max_length=LENGTH, truncation=True, padding="max_length", return_tensors="np")
    input_ids, attention_mask = encoded["input_ids"].astype(np.int32), encoded["attention_mask"].astype(np.int32)
    ordinary = ~np.isin(input_ids, tokenizer.all_special_ids)
    masked = ordinary & (np.random.default_rng(seed).random(input_ids.shape) < 0.15)
    masked[:, 1] |= ordinary[:, 1]  # at least one per row
    labels = np.where(masked, input_ids, -100).astype(np.int32)
    return dict(input_ids=np.where(masked, tokenizer.mask_token_id, input_ids).astype(np.int32),
                attention_mask=attention_mask, labels=labels)


def make(family: str, tokenizer_folder: str, folder: str, texts, seed: int) -> dict:
    torch.manual_seed(seed)
    tokenizer = tokenizer_of(family, tokenizer_folder)
    model = transformers.AutoModelForMaskedLM.from_config(config_of(family, tokenizer)).eval()
    with torch.no_grad():
        for parameter in model.parameters():  # tied ones once
            parameter.add_(torch.randn_like(parameter) * 0.05)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    batch = masked_batch(tokenizer, texts, seed)
    with torch.no_grad():
        output = model(**{name: torch.tensor(value, dtype=torch.long) for name, value in batch.items()})
    np.savez(f"{folder}.npz", **batch, loss=output.loss.numpy(), logits=output.logits.numpy())
    return {"family": family, "class": type(model).__name__, "loss": float(output.loss),
            "tokenizer": type(tokenizer).__name__, "files": sorted(os.listdir(folder)),
            "transformers": transformers.__version__}


def main() -> None:
    with open(sys.argv[1]) as stream:
        spec = json.load(stream)
    for family, tokenizer_folder in spec["families"].items():
        folder = os.path.join(spec["output"], family)
        print(json.dumps(make(family, tokenizer_folder, folder, spec["texts"], spec["seed"])), flush=True)


if __name__ == "__main__":
    main()
