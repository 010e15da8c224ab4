"""Trying a trained model on text: `python -m mlm_tpu.predict` (fill-mask, or text2text for T5)."""
