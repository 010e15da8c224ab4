"""The T5 line on the trainer's machinery: text-to-text fine-tuning (text2text_task.py: classification and
generation, scored by classification.py and generation.py through evaluation.py; prediction.py to use the
model), span-corruption pretraining (span_corruption_task.py), their kinds of split (shard_kinds.py: text2text
rows from text2text_rows.py, span-corruption rows) and its shapes (presets.py)."""
