"""How a sequence classifier's head pools (`config.classifier_pooling`, ModernBERT's name and values), on both sides.

"cls" (the default) is transformers' own: the head reads the first token's last hidden state. "mean" writes the mean
of the last hidden states over the real tokens (attention_mask) into that first position, so the family's own head,
which reads position 0 (RoBERTa's classifier, BERT's pooler, DistilBERT's pre_classifier, ELECTRA's head), reads it:
its weights and names stay the family's, and the saved folder is the family's class plus the setting. At small sizes
masked-LM pretraining never trains the first token's output, and only a mean-pooled head shows what it learnt.

TensorFlow: `follow_classifier_pooling`, which model_folder/loading.py and the encoder line apply to every model they
build or load. PyTorch: transformers has no mean-pooled RoBERTa or BERT classifier, so a mean-pooled folder holds one
as the Hub does for such models: a modeling file (a subclass of the family's class with the same pooling) named by the
config's `auto_map`, which `AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True)`
imports, offline; and sentence-transformers' files, so `SentenceTransformer(folder)` embeds with its encoder, mean
pooled.
"""

import functools
import inspect
import os
from typing import Dict, Optional

CLS, MEAN = "cls", "mean"
CLASSIFIER_POOLINGS = (CLS, MEAN)
POOLING_WORDS = {CLS: "the first token's hidden state", MEAN: "the mean of the last hidden states over real tokens"}
MODELING_FILE = "modeling_mean_pooling.py"
POOLING_FOLDER = "1_Pooling"  # sentence-transformers' Pooling module
SENTENCE_TRANSFORMERS_FILES = ("modules.json", "sentence_bert_config.json")
# what a mean-pooled folder holds besides the usual files
MEAN_POOLED_FILES = (MODELING_FILE, *SENTENCE_TRANSFORMERS_FILES, POOLING_FOLDER)
AUTO_CLASS = "AutoModelForSequenceClassification"
SEQUENCE_CLASSIFIER = "ForSequenceClassification"


def classifier_pooling(config) -> str:
    """A model config's pooling: its classifier_pooling, cls when it has none."""
    return getattr(config, "classifier_pooling", None) or CLS


def pools_mean(config, architecture: str) -> bool:
    """Whether a model of this class (a sequence classifier's only) reads the mean."""
    return architecture.endswith(SEQUENCE_CLASSIFIER) and classifier_pooling(config) == MEAN


def masked_mean(hidden, attention_mask):
    """[batch, width]: the mean of `hidden` ([batch, length, width]) over the positions `attention_mask` marks (all,
    when None), summed in float32 as sentence-transformers' mean pooling does."""
    import tensorflow as tf

    mask = (tf.ones(tf.shape(hidden)[:2]) if attention_mask is None else
            tf.cast(attention_mask, tf.float32))[:, :, None]
    total = tf.reduce_sum(tf.cast(hidden, tf.float32) * mask, axis=1)
    return tf.cast(total / tf.maximum(tf.reduce_sum(mask, axis=1), 1.0), hidden.dtype)


class _MeanIntoFirst:
    """Mixed into the class of a classifier's main layer (TFRobertaMainLayer...): its output's first position is the
    masked mean of its last hidden states, and a pooler of its own (BERT's) is run again on it."""

    def call(self, *args, **kwargs):
        import tensorflow as tf

        attention_mask = inspect.signature(super().call).bind_partial(*args, **kwargs).arguments.get("attention_mask")
        outputs = super().call(*args, **kwargs)
        sequence = outputs[0]
        first = masked_mean(sequence, attention_mask)[:, None, :]
        sequence = tf.concat([first, sequence[:, 1:]], axis=1)
        pooler = getattr(self, "pooler", None)
        pooled = None
        if pooler is not None:
            pooled = pooler(first)
            if len(pooled.shape) == 3:  # ALBERT's: a dense layer, which the main layer gives the first position
                pooled = pooled[:, 0]
        if isinstance(outputs, tuple):
            return (sequence, pooled, *outputs[2:]) if pooled is not None else (sequence, *outputs[1:])
        outputs["last_hidden_state"] = sequence
        if pooled is not None:
            outputs["pooler_output"] = pooled
        return outputs


@functools.lru_cache(maxsize=None)
def _mean_pooling_class(main_class: type) -> type:
    return type(main_class.__name__, (_MeanIntoFirst, main_class), {})


def follow_classifier_pooling(model):
    """`model` (a built or loaded TF model), its head reading what its config's classifier_pooling says; returned.
    Its class, weights and their names stay as they are: the main layer alone is given the mean."""
    if not pools_mean(model.config, type(model).__name__):
        return model
    main = getattr(model, model.base_model_prefix)
    if not isinstance(main, _MeanIntoFirst):
        object.__setattr__(main, "__class__", _mean_pooling_class(type(main)))  # past Keras' attribute tracking
    return model


def pytorch_class_name(architecture: str) -> str:
    """The class the modeling file defines for a folder of `architecture` (RobertaForSequenceClassification)."""
    return f"MeanPooling{architecture.removeprefix('TF')}"


def name_pytorch_class(config, architecture: str) -> bool:
    """Set (or, for a model that does not pool the mean, drop) the config's auto_map entry naming the modeling file's
    class, before the config is saved: a classifier fine-tuned with cls from a mean-pooled one must not keep it.
    Returns whether it names one."""
    auto_map = dict(getattr(config, "auto_map", None) or {})
    if pools_mean(config, architecture):
        auto_map[AUTO_CLASS] = f"{MODELING_FILE[:-3]}.{pytorch_class_name(architecture)}"
    elif auto_map.get(AUTO_CLASS, "").startswith(f"{MODELING_FILE[:-3]}."):
        del auto_map[AUTO_CLASS]
    if auto_map:
        config.auto_map = auto_map
    elif hasattr(config, "auto_map"):
        del config.auto_map
    return AUTO_CLASS in auto_map


MODELING_TEXT = '''"""{pytorch_class}: transformers' {architecture} whose head reads the mean of the last hidden
states over the real tokens (attention_mask) in place of the first token's, as mlm_tpu trained it (config.json:
"classifier_pooling": "mean"). Written by mlm_tpu; loaded by
AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True)."""

import torch
from transformers import {architecture}


def mean_into_first(module, args, kwargs, outputs):
    """The base model's outputs with the masked mean of its last hidden states at the first position, and its pooler
    (BERT's), if it has one, run again on it: the family's head reads position 0."""
    hidden = outputs[0]
    mask = kwargs.get("attention_mask")
    mask = (torch.ones(hidden.shape[:2], device=hidden.device) if mask is None else mask).to(torch.float32)[:, :, None]
    mean = (hidden.to(torch.float32) * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
    first = mean.to(hidden.dtype)[:, None, :]
    outputs.last_hidden_state = torch.cat([first, hidden[:, 1:]], dim=1)
    pooler = getattr(module, "pooler", None)
    if pooler is not None:
        pooled = pooler(first)
        if pooled.dim() == 3:  # ALBERT's: a linear layer, its activation apart
            pooled = module.pooler_activation(pooled[:, 0])
        outputs.pooler_output = pooled
    return outputs


class {pytorch_class}({architecture}):
    def __init__(self, config):
        super().__init__(config)
        self.base_model.register_forward_hook(mean_into_first, with_kwargs=True)
'''


def modeling_text(architecture: str) -> str:
    """The modeling file of a mean-pooled folder of `architecture` (a PyTorch class name)."""
    return MODELING_TEXT.format(architecture=architecture, pytorch_class=pytorch_class_name(architecture))


POOLING_MODES = {CLS: "cls_token", MEAN: "mean_tokens"}  # sentence-transformers' Pooling modes of our poolings
SIMILARITY_FILE = "config_sentence_transformers.json"  # an embedding model's: its similarity function


def sentence_transformers_files(config, max_length: Optional[int], pooling: str = MEAN,
                                similarity: Optional[str] = None) -> Dict[str, dict]:
    """sentence-transformers' files (path in the folder -> JSON): its encoder (the folder itself) then `pooling`;
    with `similarity` (an embedding model's: "cosine"), the file that names its similarity function."""
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": POOLING_FOLDER, "type": "sentence_transformers.models.Pooling"}]
    modes = ("cls_token", "mean_tokens", "max_tokens", "mean_sqrt_len_tokens", "weightedmean_tokens", "lasttoken")
    pooled = {"word_embedding_dimension": config.hidden_size,
              **{f"pooling_mode_{mode}": mode == POOLING_MODES[pooling] for mode in modes}, "include_prompt": True}
    files = {"modules.json": modules, "sentence_bert_config.json": {"max_seq_length": max_length,
                                                                    "do_lower_case": False},
             f"{POOLING_FOLDER}/config.json": pooled}
    if similarity:
        files[SIMILARITY_FILE] = {"prompts": {}, "default_prompt_name": None, "similarity_fn_name": similarity}
    return files


def saved_pooling(folder: str) -> Optional[str]:
    """The pooling a sentence-transformers folder's 1_Pooling/config.json says (cls or mean), None without one; a
    mode mlm_tpu does not compute is None too."""
    from mlm_tpu.jsonfiles import read_json

    path = os.path.join(folder, POOLING_FOLDER, "config.json")
    if not os.path.isfile(path):
        return None
    modes = read_json(path, f"{folder}'s pooling", "save the model again")
    return next((pooling for pooling, mode in POOLING_MODES.items() if modes.get(f"pooling_mode_{mode}")), None)


def write_sentence_transformers_files(folder: str, config, max_length: Optional[int], pooling: str = MEAN,
                                      similarity: Optional[str] = None) -> list:
    """sentence-transformers' files, written into `folder` (a staging folder); returns their paths in it."""
    from mlm_tpu.output_dir import write_json

    files = sentence_transformers_files(config, max_length, pooling, similarity)
    os.makedirs(os.path.join(folder, POOLING_FOLDER), exist_ok=True)
    for name, payload in files.items():
        write_json(os.path.join(folder, name), payload)
    return list(files)


def write_pytorch_pooling_files(folder: str, config, architecture: str, max_length: Optional[int]) -> list:
    """Into `folder` (a staging folder), for a mean-pooled classifier: the modeling file and sentence-transformers'
    files (`max_length`: the tokens it reads, those it was trained on where known); returns their paths in the folder (none for any other model)."""
    from mlm_tpu.output_dir import write_file

    if not pools_mean(config, architecture):
        return []
    architecture = architecture.removeprefix("TF")
    write_file(os.path.join(folder, MODELING_FILE), modeling_text(architecture).encode())
    return [MODELING_FILE, *write_sentence_transformers_files(folder, config, max_length)]
