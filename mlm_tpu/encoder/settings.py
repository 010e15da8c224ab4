"""The settings of `--task sequence-classification | token-classification`: which epoch the output folder keeps
(the labels come from the shards, the head from the task); a sequence classifier's, what its head reads."""

from dataclasses import dataclass
from typing import Optional

from mlm_tpu.configuration import setting
from mlm_tpu.errors import UserError
from mlm_tpu.model_folder.pooling import CLASSIFIER_POOLINGS
from mlm_tpu.training.settings import BestModelSettings


KEPT_EPOCHS = ("best", "last")  # --keep-epoch


def check_kept_epoch(keep_epoch: Optional[str], metric_for_best_model: Optional[str]) -> None:
    """One error line for an epoch rule that is neither, or a --metric-for-best-model that would pick nothing."""
    if keep_epoch not in (None, *KEPT_EPOCHS):
        raise UserError(f"--keep-epoch is {' or '.join(KEPT_EPOCHS)}, not {keep_epoch}")
    if keep_epoch == "last" and metric_for_best_model:
        raise UserError(f"--metric-for-best-model {metric_for_best_model} picks the best epoch, and --keep-epoch last "
                        "keeps the last one whatever it scores: give --keep-epoch best with it, or leave it out")


@dataclass
class EncoderSettings(BestModelSettings):
    """The encoder tasks'."""

    keep_epoch: Optional[str] = setting(  # best | last (None: best)
        None, group="task", choices=KEPT_EPOCHS,
        help="Encoder tasks with --eval-dataset: which epoch the output folder keeps. best: the epoch of the best "
             "validation score (--metric-for-best-model), as 🤗's load_best_model_at_end (default); last: the last "
             "epoch's, saved at the end of each (Cramming's GLUE-sane reports it). A score picked as the best on a "
             "split and reported on that same split is optimistic: `mlm-tpu downstream` keeps the last by default.")


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
