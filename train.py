"""`python train.py`: train a model on TFRecord shards (masked-LM RoBERTa from scratch, or T5), as the 🤗 TPU
language-modeling example is run. The command lives in mlm_tpu/cli/train.py (`python train.py --help`)."""

from mlm_tpu.cli import run_command
from mlm_tpu.cli.train import main

if __name__ == "__main__":
    run_command(main)
