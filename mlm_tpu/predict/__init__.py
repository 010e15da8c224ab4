"""Trying a trained model on text: `python -m mlm_tpu.predict` (fill-mask)."""
