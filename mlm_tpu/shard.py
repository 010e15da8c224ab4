"""`python -m mlm_tpu.shard`: the command lives in mlm_tpu/cli/shard.py."""
from mlm_tpu.cli.main import run_as_main

run_as_main(__name__, "shard")
