"""The encoder line on the trainer's machinery: sequence and token classification on any encoder (task.py, its
settings and heads), its kinds of split (shard_kinds.py: labelled rows from labelled_rows.py), the pretrained
encoder with a new head or one from scratch (models.py), its scores (validation.py, metrics.py), prediction
(prediction.py) and one fine-tuning run of a fixed protocol (fine_tuning.py)."""
