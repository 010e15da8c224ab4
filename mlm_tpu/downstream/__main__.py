"""`python -m mlm_tpu.downstream`: the command lives in mlm_tpu/cli/downstream.py."""
from mlm_tpu.cli.main import run_as_main

run_as_main(__name__, "downstream")
