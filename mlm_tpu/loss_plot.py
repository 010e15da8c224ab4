"""`python -m mlm_tpu.loss_plot`: the command lives in mlm_tpu/cli/plot.py."""
from mlm_tpu.cli.main import run_as_main

run_as_main(__name__, "plot")
