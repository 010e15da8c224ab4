"""The settings of `--task mlm` (and of ELECTRA's generator, electra/settings.py): how rows are masked
(training/settings.py's MaskingSettings, which evaluation and inspection take too), and the masked-LM head. No
TensorFlow here: flags are checked before it loads. Each field is also a flag of `python train.py` (cli/train.py
generates them from the fields' metadata).
"""

from dataclasses import dataclass
from typing import Optional, Tuple

from mlm_tpu.configuration import setting
from mlm_tpu.training.settings import MaskingSettings
from mlm_tpu.training.vocabulary_growth import NewEmbeddingsSettings

@dataclass
class MaskedLmSettings(MaskingSettings):
    """`--task mlm`: the masking, and where the masked-LM head runs."""

    # the head at every position (not only the masked ones): the same loss, computed as before; free on resuming
    dense_mlm_head: bool = setting(
        False, changes_result=False, group="task",
        help="--task mlm (and electra's generator): run the masked-LM head at every position, as before, rather "
             "than at the masked positions only (the sparse head, the default: the same loss, the head's work saved "
             "at the other positions). For comparison; the saved model is the same kind either way.")
    # the sparse head: prediction slots per row (None: enough for all but 1e-6 of rows, prediction_slots.py)
    max_predictions_per_seq: Optional[int] = setting(
        None, low=1, group="task", metavar="SLOTS",
        help="--task mlm and electra, sparse head: prediction slots per row (BERT's max_predictions_per_seq). A row "
             "with more masked positions keeps this many, drawn at random, and leaves the others unmasked; each "
             "epoch's log line counts them (default: the fewest slots a row outgrows with probability below 1e-6 at "
             "--mlm-probability, e.g. 41 of 128 positions at 0.15). With --masking whole-word or span, rows mask at "
             "most this many, never part of a word (default: a full row's share at --mlm-probability, and 4 for the "
             "word that crosses it: 23 of 128 at 0.15).")
    # validation's share of tokens masked, apart from training's (None: --mlm-probability's)
    eval_mlm_probability: Optional[float] = setting(
        None, low=0, high=1, low_open=True, high_open=True, group="task", metavar="P",
        help="--task mlm and electra: the share of tokens masked in validation, apart from training's (ModernBERT "
             "trains at 0.3 and validates at 0.15) (default: --mlm-probability's).")
    # training's share of tokens masked by phase: RATE:UNTIL, each phase until (before) step UNTIL (mask.py)
    mlm_probability_schedule: Optional[Tuple[str, ...]] = setting(
        None, group="task", nargs="+", metavar="RATE:UNTIL",
        help="--task mlm and electra (token or whole-word masking): training's share of tokens masked by phase, "
             "each RATE until step UNTIL, the next from there, e.g. mmBERT's 0.3:8000 0.15:9500 0.05:10000; the "
             "last UNTIL must reach the run's end. The rate is a function of the step (masks stay keyed by seed and "
             "step), so a resumed run masks as the uninterrupted one; validation keeps --eval-mlm-probability (else "
             "--mlm-probability) (default: --mlm-probability throughout).")


@dataclass
class ContinuedMaskedLmSettings(MaskedLmSettings, NewEmbeddingsSettings):
    """`--task mlm`: the masked LM's settings, and how a continued checkpoint grows to an extended --tokenizer."""
