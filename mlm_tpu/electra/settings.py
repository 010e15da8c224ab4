"""The settings of `--task electra`: the masked LM's (its generator masks and predicts as the masked LM does), and
the generator's size and the discriminator's weight in the loss."""

from dataclasses import dataclass
from typing import Optional

from mlm_tpu.configuration import setting
from mlm_tpu.mlm.settings import MaskedLmSettings


@dataclass
class ElectraSettings(MaskedLmSettings):
    """`--task electra`."""

    # the generator's hidden size as a share of the discriminator's (None: the preset's, 1/4 or 1/3)
    generator_size_ratio: Optional[float] = setting(
        None, low=0, high=1, low_open=True, group="task", metavar="RATIO",
        help="--task electra: the generator's hidden size as a share of the discriminator's, in (0, 1]; its "
             "feed-forward is 4x that, a head per 64 units (default: the preset's, the paper's 1/4 for electra-small "
             "and -large, 1/3 for electra-base, 1/2 for electra-tiny; 1/4 for a config.json).")
    discriminator_weight: Optional[float] = setting(  # λ of the loss (None: 50)
        None, low=0, low_open=True, group="task", metavar="LAMBDA",
        help="--task electra: the loss is the generator's masked-LM loss + LAMBDA x the discriminator's binary "
             "cross-entropy over every real token (default: 50, the paper's).")
