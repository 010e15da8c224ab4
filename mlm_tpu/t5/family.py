"""The T5 family as one class: T5, T5 1.1 and mT5 alike, each built and loaded as its own TensorFlow class.

`TFT5FamilyForConditionalGeneration` is an Auto class of transformers (as TFAutoModelForSeq2SeqLM) that maps only the
T5 family (model_folder/configs.py T5_CLASSES): an mT5 folder loads as TFMT5ForConditionalGeneration and is saved
again as an mT5 (config model_type "mt5", architectures MT5ForConditionalGeneration), where T5's own class would read
it into a T5 configuration; anything else (a RoBERTa given to a T5 task) is refused by the type check of every task
(model_folder/checks.py check_model_type).
"""

from collections import OrderedDict

from transformers.models.auto.auto_factory import _BaseAutoModelClass, _LazyAutoMapping
from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

from mlm_tpu.model_folder.configs import T5_CLASSES


class TFT5FamilyForConditionalGeneration(_BaseAutoModelClass):
    _model_mapping = _LazyAutoMapping(CONFIG_MAPPING_NAMES, OrderedDict(T5_CLASSES))
