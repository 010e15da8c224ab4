"""The T5 line on the trainer's machinery: text-to-text fine-tuning (text2text_task.py: classification and
generation, scored by classification.py and generation.py through evaluation.py; prediction.py to use the
model) and its shapes (presets.py)."""
