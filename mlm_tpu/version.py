"""mlm_tpu's version: recorded in what it writes (training_args.json, tokenizer_training.json) and read by the
build (pyproject.toml); a module of its own, so that recording it imports nothing else of mlm_tpu."""

__version__ = "0.4.0"
