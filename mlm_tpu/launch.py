"""`python -m mlm_tpu.launch`: the command lives in mlm_tpu/cli/launch.py."""
from mlm_tpu.cli.main import run_as_main

run_as_main(__name__, "launch")
