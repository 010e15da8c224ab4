"""`python -m mlm_tpu.export`: the command lives in mlm_tpu/cli/export.py."""
from mlm_tpu.cli.main import run_as_main

run_as_main(__name__, "export")
