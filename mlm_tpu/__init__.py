"""mlm_tpu: pretrain masked language models from scratch on TPUs, GPUs or CPUs.

The stages are separate command-line tools sharing one package: ``python -m mlm_tpu.tokenizer``
trains a tokenizer, ``python -m mlm_tpu.shard`` cuts a corpus into TFRecord shards,
``python train.py`` trains, ``python -m mlm_tpu.evaluate`` and ``python -m mlm_tpu.predict``
measure and try the model.
"""

import os

# Set before anything imports TensorFlow: transformers' TF models need Keras 2 (tf-keras) behind
# tf.keras, and TensorFlow's C++ start-up chatter is not news to our users (errors still raise).
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

__version__ = "0.1.0"
