"""Tokenizer training and inspection: `python -m mlm_tpu.tokenizer train|encode`."""
