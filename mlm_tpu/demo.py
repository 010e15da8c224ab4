"""`python -m mlm_tpu.demo`: the command lives in mlm_tpu/cli/demo.py."""
from mlm_tpu.cli.main import run_as_main

run_as_main(__name__, "demo")
