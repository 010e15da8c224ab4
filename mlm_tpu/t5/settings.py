"""The settings of the T5 tasks: span corruption takes only --new-embeddings (the shards' manifest holds its noise);
classification and generation their targets' length, and each its own."""

from dataclasses import dataclass
from typing import Optional, Tuple

from mlm_tpu.configuration import setting
from mlm_tpu.training.settings import BestModelSettings
from mlm_tpu.training.vocabulary_growth import NewEmbeddingsSettings


@dataclass
class SpanCorruptionSettings(NewEmbeddingsSettings):
    """`--task span-corruption`: how a continued T5 grows to an extended --tokenizer (the noise is the shards')."""


@dataclass
class Text2TextSettings(BestModelSettings):
    """What `--task classification` and `generation` share."""

    max_target_length: Optional[int] = setting(  # tokens per target; None: the shards'
        None, low=2, group="data",
        help="T5 text-to-text: tokens per target, checked against the shards (default: what they hold).")


@dataclass
class ClassificationSettings(Text2TextSettings):
    """`--task classification`."""

    labels: Optional[Tuple[str, ...]] = setting(  # the class names (None: the shards' targets)
        None, group="task", nargs="+", metavar="LABEL",
        help="Classification: the class names, each one token of the tokenizer (default: the targets the training "
             "shards' manifest counted).")


@dataclass
class GenerationSettings(Text2TextSettings):
    """`--task generation`."""

    max_new_tokens: Optional[int] = setting(  # tokens generated in validation
        None, low=1, group="task",
        help="Generation: tokens generated per example in validation (default: the shards' target length).")
