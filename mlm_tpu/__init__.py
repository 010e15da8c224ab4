"""mlm_tpu: pretrain masked language models from scratch on TPUs, GPUs or CPUs.

The stages are separate command-line tools sharing one package:
``python -m mlm_tpu.tokenizer train`` trains a Unigram tokenizer on a corpus; later stages
shard the corpus into TFRecords, train on them and try the model.
"""

__version__ = "0.1.0"
