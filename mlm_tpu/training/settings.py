"""Settings several tasks share (their settings dataclasses derive from these)."""

from dataclasses import dataclass
from typing import Optional

from mlm_tpu.configuration import setting


@dataclass
class BestModelSettings:
    """A task whose output folder keeps the epoch of the best validation score (T5 text-to-text, encoders)."""

    metric_for_best_model: Optional[str] = setting(  # the validation score whose best epoch is kept
        None, group="task",
        help="T5 and encoder tasks with --eval-dataset: the validation score whose best epoch the output folder keeps "
             "(classification: accuracy (default), macro_f1; generation: exact_match, f1, rouge1, rouge2, rougeL "
             "(default); sequence-classification: accuracy (default), macro_f1, matthews_correlation, f1 (two "
             "classes), loss, or for scores pearson (default), spearman, loss; token-classification: f1 (default), "
             "precision, recall, accuracy, loss).")
