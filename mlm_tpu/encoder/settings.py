"""The settings of `--task sequence-classification | token-classification`: which epoch the output folder keeps
(the labels come from the shards, the head from the task); a sequence classifier's, what its head reads."""

from dataclasses import dataclass
from typing import Optional

from mlm_tpu.configuration import setting
from mlm_tpu.model_folder.pooling import CLASSIFIER_POOLINGS
from mlm_tpu.training.settings import BestModelSettings


@dataclass
class EncoderSettings(BestModelSettings):
    """The encoder tasks'."""


@dataclass
class SequenceClassificationSettings(EncoderSettings):
    """`--task sequence-classification`'s."""

    classifier_pooling: Optional[str] = setting(  # cls | mean (None: the base's own, else cls)
        None, group="task", metavar="|".join(CLASSIFIER_POOLINGS),
        help="Sequence classification: what the head reads (ModernBERT's classifier_pooling, kept in config.json). "
             "cls: the first token's last hidden state, as transformers' heads read it; mean: the mean of the last "
             "hidden states over the real tokens, in its place, in the family's own head (RoBERTa's classifier, "
             "BERT's pooler...). At small sizes masked-LM pretraining never trains the first token, and only mean "
             "shows what it learnt. A mean-pooled folder loads in PyTorch with trust_remote_code=True (its class "
             "comes with it) and in sentence-transformers. Default: the pooling of a --model-name-or-path "
             "classifier, else cls.")
