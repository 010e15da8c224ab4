"""mlm_tpu: pretrain language models from scratch on TPUs, GPUs or CPUs, and fine-tune T5, with TensorFlow,
Keras 2 and 🤗 Transformers.

From Python (see mlm_tpu/api.py; TensorFlow loads only when a function needs it):

    import mlm_tpu
    mlm_tpu.train_tokenizer("runs/tok", builtin_corpus="pydoc-topics", vocab_size=4096)
    mlm_tpu.shard_corpus("runs/tok", "runs/shards", builtin_corpus="pydoc-topics", max_length=128)
    mlm_tpu.train_model("runs/shards/train", "runs/model", tokenizer="runs/tok", model_config="tiny")

From the shell: `mlm-tpu COMMAND` (or `python -m mlm_tpu.<command>`, `python train.py`).
"""

import os

# Set before anything imports TensorFlow: transformers' TF models need Keras 2 (tf-keras) behind
# tf.keras, and TensorFlow's C++ start-up chatter is not news to our users (errors still raise).
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from mlm_tpu.errors import UserError  # noqa: E402
from mlm_tpu.version import __version__  # noqa: E402

API = ("train_tokenizer", "extend_tokenizer", "shard_corpus", "train_model", "evaluate_model", "fill_mask", "predict_text2text",
       "predict_text_classification", "predict_token_classification", "fine_tune", "downstream_benchmark", "export_model",
       "plot_loss")
FINE_TUNING = ("FineTuningProtocol", "FineTuningResult")  # fine_tune's protocol and result (encoder/fine_tuning.py)
__all__ = ["UserError", *API, *FINE_TUNING]


def __getattr__(name: str):
    """The API functions, imported on first use (importing mlm_tpu stays quick)."""
    if name in API:
        from mlm_tpu import api

        return getattr(api, name)
    if name in FINE_TUNING:
        from mlm_tpu.encoder import fine_tuning

        return getattr(fine_tuning, name)
    raise AttributeError(f"module 'mlm_tpu' has no attribute '{name}'")
