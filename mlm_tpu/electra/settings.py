"""The settings of `--task electra`: the masked LM's (its generator masks and predicts as the masked LM does), the
generator's size and the discriminator's weight in the loss, how the two share their embeddings, and the generator a
continued run starts from."""

from dataclasses import dataclass
from typing import Optional

from mlm_tpu.configuration import setting
from mlm_tpu.mlm.settings import MaskedLmSettings
from mlm_tpu.training.vocabulary_growth import NewEmbeddingsSettings

SHARINGS = ("gdes", "shared", "none")  # --embedding-sharing (sharing.py; here, where no TensorFlow is imported)


@dataclass
class ElectraSettings(MaskedLmSettings, NewEmbeddingsSettings):
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
    generator_name_or_path: Optional[str] = setting(  # the generator beside --model-name-or-path's discriminator
        None, group="task", metavar="PATH",
        help="--task electra with --model-name-or-path (a discriminator given apart from its generator, as "
             "google/electra-small-discriminator and google/electra-small-generator are published): the generator "
             "to continue beside it, an ElectraForMaskedLM (or, for DeBERTa-v3, DebertaV2ForMaskedLM) folder or Hub "
             "name of the same vocabulary (default: the generator/ folder inside --model-name-or-path, as --task "
             "electra saves it; for DeBERTa-v3 without one, a new generator of half the discriminator's depth). The "
             "generator then shares the discriminator's embeddings (--embedding-sharing).")
    embedding_sharing: Optional[str] = setting(  # sharing.py (None: the family's, as its paper has it)
        None, group="task", choices=SHARINGS,
        help="--task electra: how the generator and the discriminator share their embeddings. gdes: DeBERTa-v3's "
             "gradient-disentangled sharing, the discriminator reads the generator's token embeddings with their "
             "gradient stopped plus a difference of its own that starts at zero, and saves their sum; shared: "
             "ELECTRA's, one embeddings layer both models train; none: each its own (default: gdes for DeBERTa-v3, "
             "shared for ELECTRA; gdes is DeBERTa-v3's only).")
