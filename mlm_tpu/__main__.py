"""`python -m mlm_tpu COMMAND`: the `mlm-tpu` command (mlm_tpu/cli/main.py)."""
from mlm_tpu.cli.main import console_main

console_main()
