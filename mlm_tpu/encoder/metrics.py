"""The scores of the encoder tasks, computed on the host from the predictions validation gathers, by the libraries
the field scores with: scikit-learn (accuracy, F1, Matthews correlation), SciPy (Pearson, Spearman) and seqeval
(entity-level precision, recall and F1, CoNLL's definition: an entity counts when its type and every word match).

Each function takes only the rows that are examples (padding rows are dropped before) and returns a flat dict
of floats; "loss" is the mean loss over what is scored (examples, or tagged words).
"""

import warnings
from typing import Dict, List, Sequence

import numpy as np

# Each task's scores, in words (for the model card), in the order shown.
CLASSIFICATION_SCORES = {"accuracy": "accuracy", "macro_f1": "macro F1", "matthews_correlation": "Matthews correlation",
                         "f1": "F1 of the second class", "loss": "loss"}  # f1: two classes only, GLUE's MRPC/QQP F1
REGRESSION_SCORES = {"pearson": "Pearson correlation", "spearman": "Spearman correlation", "loss": "mean squared error"}
TOKEN_SCORES = {"f1": "entity F1", "precision": "entity precision", "recall": "entity recall",
                "accuracy": "tag accuracy", "loss": "loss"}
LOWER_IS_BETTER = ("loss",)


def classification_scores(predicted: np.ndarray, truth: np.ndarray, losses: np.ndarray,
                          label_count: int) -> Dict[str, float]:
    """Accuracy, macro F1 (over the classes that occur) and Matthews correlation; with two classes also the F1 of
    the second (GLUE's F1 of MRPC and QQP, the positive class being id 1)."""
    from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

    scores = {"accuracy": float(accuracy_score(truth, predicted)),
              "macro_f1": float(f1_score(truth, predicted, average="macro", zero_division=0)),
              "matthews_correlation": float(matthews_corrcoef(truth, predicted))}
    if label_count == 2:
        scores["f1"] = float(f1_score(truth, predicted, pos_label=1, average="binary", zero_division=0))
    scores["loss"] = float(np.mean(losses))
    return scores


def regression_scores(predicted: np.ndarray, truth: np.ndarray) -> Dict[str, float]:
    """Pearson's and Spearman's correlations (0.0 where one side is constant, when SciPy has none) and the mean
    squared error, the loss."""
    from scipy.stats import ConstantInputWarning, pearsonr, spearmanr

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConstantInputWarning)
        pearson = pearsonr(predicted, truth)[0] if len(truth) > 1 else float("nan")
        spearman = spearmanr(predicted, truth)[0] if len(truth) > 1 else float("nan")
    return {"pearson": float(np.nan_to_num(pearson)), "spearman": float(np.nan_to_num(spearman)),
            "loss": float(np.mean((predicted - truth) ** 2))}


def tag_sequences(predicted: np.ndarray, truth: np.ndarray, names: Sequence[str], ignore: int):
    """(true tags, predicted tags) of each row, as names, at the positions that hold a word's tag."""
    true_rows: List[List[str]] = []
    predicted_rows: List[List[str]] = []
    for predicted_row, truth_row in zip(predicted, truth):
        tagged = truth_row != ignore
        true_rows.append([names[tag] for tag in truth_row[tagged]])
        predicted_rows.append([names[tag] for tag in predicted_row[tagged]])
    return true_rows, predicted_rows


def entity_scores(true_rows: List[List[str]], predicted_rows: List[List[str]], loss: float) -> Dict[str, float]:
    """seqeval's entity-level F1, precision and recall (conlleval's default mode), and the share of words tagged
    right."""
    from seqeval.metrics import accuracy_score, f1_score, precision_score, recall_score

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # seqeval warns where there is no entity at all (scores 0)
        return {"f1": float(f1_score(true_rows, predicted_rows, zero_division=0)),
                "precision": float(precision_score(true_rows, predicted_rows, zero_division=0)),
                "recall": float(recall_score(true_rows, predicted_rows, zero_division=0)),
                "accuracy": float(accuracy_score(true_rows, predicted_rows)), "loss": loss}
