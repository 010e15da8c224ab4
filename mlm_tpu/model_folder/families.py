"""The registry of model families (DESIGN.md's "Model families"): the one place the stages ask how a configuration
becomes a model of a head (masked LM, sequence or token classification, the bare encoder), how its weights load from
a folder and are saved into one, and what it costs per example, so that no stage branches on a family's name.

A family answers the questions of `Family`. Hand-written families declare themselves in their own folder (ModernBERT:
mlm_tpu/modernbert/family.py's FAMILY) and are listed in HAND_WRITTEN; transformers' TensorFlow classes are the
generic entry (TransformersFamily), which answers for every configuration no hand-written family claims, with what
loading.py (configs.py, checkpoint.py), saving.py, pytorch.py and pooling.py do for them.
"""

import os
from typing import Optional, Protocol, Tuple

from mlm_tpu.modernbert.family import FAMILY as MODERNBERT

HEADS = ("base", "masked_lm", "sequence_classification", "token_classification")
# transformers' TF Auto class of each head
AUTO_CLASSES = {"base": "TFAutoModel", "masked_lm": "TFAutoModelForMaskedLM",
                "sequence_classification": "TFAutoModelForSequenceClassification",
                "token_classification": "TFAutoModelForTokenClassification"}


class Family(Protocol):
    """What a family answers: which configurations, presets and models are its own, its model class for a head, how
    a model is built, loaded and saved, its FLOPs (None: training/flops.py's count of a BERT-style encoder)."""

    name: str
    tensorflow_layout: bool  # its folders hold tf_model.h5 too (transformers 4's TF classes load them)
    pools_natively: bool  # transformers 5's own classifier reads config.json's classifier_pooling (no remote code)

    def claims_values(self, values: dict) -> bool: ...  # a config.json's values

    def claims_preset(self, name: str) -> bool: ...

    def claims_config(self, config) -> bool: ...

    def claims_model(self, model) -> bool: ...

    def model_class(self, head: str): ...

    def builds(self, head: str) -> bool: ...  # a model of `head` (a hand-written family: its own classes)

    def from_config(self, config, head: str): ...

    def save(self, model, folder: str, max_length: Optional[int] = None) -> None: ...

    def training_flops(self, config, length: int, head: str, head_positions: Optional[int]) -> Optional[float]: ...

    # pretraining keeps each document of a packed row to itself (document_ids(input_ids, separator_id) in the batch)
    packs_documents: bool

    # (model, batch with masked_positions, training) -> its masked-LM output at those positions; None: sparse_head.py's
    sparse_outputs: Optional[object]

    # the Linear modules of its attention and feed-forward, as PEFT's target_modules names them: what LoRA wraps by
    # default where PEFT's own table (by model type) has no entry; () where that table answers
    projection_modules: Tuple[str, ...]

    def pytorch_names(self, model) -> dict: ...  # id(variable) -> (PyTorch name, transposed?) of a model's weights

    def architecture_class(self, name: str): ...  # the class of a saved config's `architectures` name

    # what an extended tokenizer grows (model_folder/new_embeddings.py): the weights with a vocabulary axis (the input
    # embeddings, which a tied decoder reads; an untied decoder; the output bias), the masked-LM head's output bias
    # (None: it has none), and a model of the same class and config with `size` tokens, built, its weights drawn
    def vocabulary_weights(self, model) -> list: ...

    def output_bias(self, model): ...

    def with_vocabulary_size(self, model, size: int): ...


class TransformersFamily:
    """Every family transformers 4.57's TensorFlow classes build (BERT, RoBERTa, ALBERT, DeBERTa-v2, ELECTRA, T5...):
    its Auto classes, save_pretrained's tf_model.h5 beside the PyTorch-layout model.safetensors (pytorch.py) and a
    mean-pooled classifier's PyTorch class and sentence-transformers' files (pooling.py)."""

    name = "transformers"
    tensorflow_layout = True
    pools_natively = False  # a mean-pooled classifier comes with its class (pooling.py)

    def claims_values(self, values: dict) -> bool:
        return True

    def claims_preset(self, name: str) -> bool:
        return True

    def claims_config(self, config) -> bool:
        return True

    def claims_model(self, model) -> bool:
        return True

    def model_class(self, head: str):
        import transformers

        return getattr(transformers, AUTO_CLASSES[head])

    def builds(self, head: str) -> bool:
        return False  # checks.py's check_model_type asks transformers' Auto classes

    def from_config(self, config, head: str):
        return self.model_class(head).from_config(config)

    def save(self, model, folder: str, max_length: Optional[int] = None) -> None:
        """`max_length`: the longest input, for sentence-transformers' files (None: the model's positions)."""
        from mlm_tpu.model_folder.pooling import name_pytorch_class, write_pytorch_pooling_files
        from mlm_tpu.model_folder.pytorch import save_pytorch_weights

        architecture = type(model).__name__
        name_pytorch_class(model.config, architecture)
        model.save_pretrained(folder)
        save_pytorch_weights(model, folder)
        write_pytorch_pooling_files(folder, model.config, architecture, max_length)

    def training_flops(self, config, length: int, head: str, head_positions: Optional[int]) -> Optional[float]:
        return None

    sparse_outputs = None  # mlm/sparse_head.py finds the head of transformers' masked LMs
    packs_documents = False  # a packed row is one sequence: its documents attend to each other
    projection_modules: Tuple[str, ...] = ()  # PEFT's table names the modules of transformers' classes

    def pytorch_names(self, model) -> dict:
        """transformers' own TF -> PyTorch mapping of each weight's name (pytorch.py)."""
        from mlm_tpu.model_folder.pytorch import pytorch_name_and_transpose

        return {id(variable): pytorch_name_and_transpose(variable) for variable in model.weights}

    def architecture_class(self, name: str):
        import transformers

        return getattr(transformers, "TF" + name)

    def vocabulary_weights(self, model) -> list:
        """The weights with an axis of the vocabulary's size (each class names its own)."""
        return [weight for weight in model.weights if model.config.vocab_size in tuple(weight.shape)]

    def output_bias(self, model):
        """The model's one weight of shape [vocabulary] (T5 has none; an ELECTRA discriminator none either)."""
        biases = [weight for weight in model.weights if tuple(weight.shape) == (model.config.vocab_size,)]
        return biases[0] if len(biases) == 1 else None

    def with_vocabulary_size(self, model, size: int):
        config = model.config.__class__.from_dict({**model.config.to_dict(), "vocab_size": size})
        grown = type(model)(config)
        grown(grown.dummy_inputs, training=False)
        return grown


GENERIC = TransformersFamily()
HAND_WRITTEN: Tuple = (MODERNBERT,)


def of_values(values: dict):
    """The family of a config.json's values."""
    return next((family for family in HAND_WRITTEN if family.claims_values(values)), GENERIC)


def of_config(config):
    return next((family for family in HAND_WRITTEN if family.claims_config(config)), GENERIC)


def of_model(model):
    return next((family for family in HAND_WRITTEN if family.claims_model(model)), GENERIC)


def of_preset(name: str):
    """The hand-written family a --model-config names by preset, else None (a path or another family's preset)."""
    return next((family for family in HAND_WRITTEN if family.claims_preset(name)), None)


def of_folder(name_or_path: str):
    """The family of a saved model (a folder, a config.json file, or a Hub name: its config.json in the Hub cache, or
    downloaded into it); the generic one for a config.json that cannot be had or read (its loading says why).

    Only a namespaced Hub name (`owner/model`, as every hand-written family's checkpoints are) is looked up: a bare
    word is a preset or one of transformers' legacy names (`roberta-base`), all of the generic family, and asking the
    Hub about it costs an offline machine 24 s of retries for nothing."""
    from mlm_tpu.hub import hub_file, is_local

    path = os.path.join(name_or_path, "config.json") if os.path.isdir(name_or_path) else name_or_path
    if not is_local(name_or_path):
        path = hub_file(name_or_path, "config.json") if "/" in name_or_path else None
    if not path or not os.path.isfile(path):
        return GENERIC
    import json

    try:
        with open(path, encoding="utf-8") as file:
            values = json.load(file)
    except (OSError, ValueError):
        return GENERIC
    return of_values(values) if isinstance(values, dict) else GENERIC


def of_model_config(name_or_path: Optional[str]):
    """The hand-written family a --model-config names (a preset, a config.json, a folder holding one), else None."""
    if not name_or_path:
        return None
    family = of_preset(name_or_path) or of_folder(name_or_path)
    return None if family is GENERIC else family


def of_run(model_config: Optional[str], model_name_or_path: Optional[str]):
    """The family a training run builds: its --model-name-or-path's, else its --model-config's, else the generic."""
    if model_name_or_path:
        return of_folder(model_name_or_path)
    return of_model_config(model_config) or GENERIC


def model_type(config) -> str:
    """A config's model type (`roberta`, `modernbert`), whatever its family's config class."""
    return getattr(config, "model_type", None) or of_config(config).name


def head_of_class(model_class) -> str:
    """The head a transformers class (or Auto class) of any family stands for, by its name's ending."""
    name = getattr(model_class, "__name__", str(model_class))
    for head, ending in (("masked_lm", "ForMaskedLM"), ("sequence_classification", "ForSequenceClassification"),
                         ("token_classification", "ForTokenClassification")):
        if name.endswith(ending):
            return head
    return "base"
