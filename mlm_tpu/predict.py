"""`python -m mlm_tpu.predict`: the command lives in mlm_tpu/cli/predict.py."""
from mlm_tpu.cli.main import run_as_main

run_as_main(__name__, "predict")
