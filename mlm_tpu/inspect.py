"""`python -m mlm_tpu.inspect`: the command lives in mlm_tpu/cli/inspect_shards.py."""
from mlm_tpu.cli.main import run_as_main

run_as_main(__name__, "inspect")
