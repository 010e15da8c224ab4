"""`python -m mlm_tpu.tokenizer {train,encode}`: the command lives in mlm_tpu/cli/tokenizer.py."""
from mlm_tpu.cli.main import run_as_main

run_as_main(__name__, "tokenizer")
