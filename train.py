"""`python train.py`: pretrain a masked language model (RoBERTa) from scratch on TFRecord shards.

Runs on a TPU (--tpu), on every GPU (MirroredStrategy) or on the CPU. Flags follow the 🤗 TPU
language-modeling example; dashes and underscores are both accepted. A preempted run resumes
from its backup when started again with the same command.
"""

from mlm_tpu.cli import run_command
from mlm_tpu.train_command import main

if __name__ == "__main__":
    run_command(main)
