"""The model card (README.md) of a tokenizer folder, in the Hub's format: what it is, what it was trained on,
and how to load it."""

from mlm_tpu.corpus import datasets_of, describe_corpus
from mlm_tpu.tokenizer.families import DEFAULT_ALGORITHM, FAMILIES


def tokenizer_card_text(info: dict, name: str) -> str:
    """The README.md of a tokenizer folder (`info`: what tokenizer_training.json records)."""
    from huggingface_hub import ModelCard, ModelCardData

    algorithm = info.get("algorithm", DEFAULT_ALGORITHM)
    data = ModelCardData(library_name="transformers", tags=["mlm_tpu", "tokenizer", algorithm, info["template"]],
                         datasets=datasets_of(info["corpus"]) or None)
    body = [f"# {name}", "", f"A {FAMILIES[algorithm].title} tokenizer ({info['template']} template), trained with "
            f"mlm_tpu on {describe_corpus(info['corpus'])}: {info['documents']:,} documents, "
            f"{info['characters']:,} characters, a vocabulary of {info['vocab_size']:,}. How it was made is in `tokenizer_training.json`.", "",
            "## Use it", "", "```python", "from transformers import AutoTokenizer", "",
            f'tokenizer = AutoTokenizer.from_pretrained("{name}")', "```"]
    return ModelCard(f"---\n{data.to_yaml()}\n---\n\n" + "\n".join(body) + "\n").content
