"""`python -m mlm_tpu.evaluate`: the command lives in mlm_tpu/cli/evaluate.py."""
from mlm_tpu.cli.main import run_as_main

run_as_main(__name__, "evaluate")
