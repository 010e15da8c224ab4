"""The settings of `--task sequence-classification | token-classification`: which epoch the output folder keeps
(the labels come from the shards, the head from the task)."""

from dataclasses import dataclass

from mlm_tpu.training.settings import BestModelSettings


@dataclass
class EncoderSettings(BestModelSettings):
    """The encoder tasks'."""
