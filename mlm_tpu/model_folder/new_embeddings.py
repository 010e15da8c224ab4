"""The rows a checkpoint's embeddings (and its masked-LM head's output bias) gain for the pieces an extended tokenizer
adds (`mlm-tpu tokenizer extend`), each initialised by one rule (`--new-embeddings`):

- `mean-of-pieces` (the default): the mean of the old rows of the pieces the base tokenizer cuts the new piece into
  (its model's cut of the piece as written, which is how it cut the word in text): Hewitt 2021, FOCUS's and
  WECHSEL's starting point. A new word starts where the model read it before. Its output bias: the mean of its
  pieces' biases, shifted by the log of how much rarer the new piece is than its pieces where the extension recorded
  their frequencies on its corpus (`tokenizer extend`'s tokenizer_extension.json): log((f + 1) / geometric mean of
  (f_i + 1)). Why: a masked-LM head's bias carries a piece's prior (its log frequency, up to a constant), and a
  whole word is rarer than the pieces it was cut into; with the pieces' mean bias alone the new row's logit is the
  mean of its pieces' logits, so it takes probability wherever any of its pieces fits (up to the mean of their
  probabilities, by Jensen's inequality: Hewitt's bound) and starves the old pieces (on a tiny RoBERTa of 2,048
  pieces extended by 500 IMDB words: a higher loss over all masked targets than random rows,
  docs/benchmark-results/vocabulary_extension.md). Without recorded frequencies, the pieces' mean bias.
- `mean`: the mean of all old rows (and of the old biases), as 🤗 PyTorch's `mean_resizing` centres them.
- `random`: a truncated normal of the config's initializer_range and a zero bias, as transformers 4.57's TensorFlow
  `resize_token_embeddings` draws them (seeded here, so a run is repeatable).

Padding pieces (`[unused N]`, which no text reaches) get the mean of all rows and the lowest old bias under the two
mean rules: never read, and as unlikely to be predicted as the least likely old piece.

Examples:
    >>> import numpy as np
    >>> embeddings = np.array([[0.0, 0.0], [2.0, 4.0], [4.0, 8.0]], dtype=np.float32)
    >>> rows, bias = resized(embeddings, np.array([0.0, 1.0, 3.0]), {3: [1, 2], 4: []}, "mean-of-pieces")
    >>> rows[3].tolist(), float(bias[3]), rows[4].tolist(), float(bias[4])
    ([3.0, 6.0], 2.0, [2.0, 4.0], 0.0)
    >>> shift = frequency_shift(99, [999, 999])  # a word seen 10 times less often than its pieces: log(1/10)
    >>> round(shift, 4), float(resized(embeddings, np.array([0.0, 1.0, 3.0]), {3: [1, 2]}, "mean-of-pieces",
    ...                                bias_shifts={3: shift})[1][3]) == 2.0 + shift
    (-2.3026, True)
"""

import json
import math
import os
import re
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from mlm_tpu.tokenizer.extension import EXTENSION_INFO_FILE, PADDING_PIECE, check_extension
from mlm_tpu.tokenizer.load import tokenizer_fingerprint

RULES = ("mean-of-pieces", "mean", "random")
RULE_WORDS = {"mean-of-pieces": "the mean of the rows of the pieces the checkpoint's tokenizer cut its piece into",
              "mean": "the mean of all rows", "random": "drawn from a truncated normal, its bias 0"}
DEFAULT_RULE = "mean-of-pieces"
DEFAULT_INITIALIZER_RANGE = 0.02  # transformers' default where a config names none
PADDING = re.compile(re.escape(PADDING_PIECE).replace(r"\{\}", r"\d+"))


def base_cuts(base, extended) -> Dict[int, List[int]]:
    """For each id `extended` adds to `base` (refused unless it extends it: check_extension), the ids of the pieces
    `base` cuts the new piece into; [] for a padding piece."""
    model = base.backend_tokenizer.model
    in_model = extended.backend_tokenizer.get_vocab(with_added_tokens=False)
    cuts = {}
    for index in check_extension(base, extended):
        piece = extended.convert_ids_to_tokens(index)
        if PADDING.fullmatch(piece):
            cuts[index] = []
        elif piece in in_model:
            cuts[index] = [token.id for token in model.tokenize(piece)]
        else:  # an added token (transformers' add_tokens): the base's encoding of its text
            cuts[index] = base(piece, add_special_tokens=False)["input_ids"]
    return cuts


def frequency_shift(frequency: int, piece_frequencies: Sequence[int]) -> float:
    """log((f + 1) / geometric mean of (f_i + 1)): how much rarer (below 0) a new piece of corpus frequency f is than
    the base pieces it was cut into (frequencies f_i), add-one smoothed (a BPE merge step, seen 0 times, stays
    finite)."""
    return math.log(frequency + 1) - sum(math.log(count + 1) for count in piece_frequencies) / len(piece_frequencies)


def bias_shifts(extended) -> Optional[Dict[int, float]]:
    """For each new piece of `extended` (a tokenizer made by `tokenizer extend`, its tokenizer_extension.json beside
    it, recording this tokenizer), frequency_shift of its frequency and its base pieces' on the extension's corpus;
    None where no such record holds them (a tokenizer extended otherwise, or by a list without a corpus)."""
    path = os.path.join(getattr(extended, "name_or_path", "") or "", EXTENSION_INFO_FILE)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as stream:
        record = json.load(stream)
    entries = record.get("new_pieces", [])
    if record.get("fingerprint") != tokenizer_fingerprint(extended) or not record.get("documents") or \
            not all("base_piece_frequencies" in entry for entry in entries):
        return None
    return {entry["id"]: frequency_shift(entry["frequency"], entry["base_piece_frequencies"]) for entry in entries}


def _random_rows(count: int, width: int, initializer_range: float, seed: int) -> np.ndarray:
    import tf_keras as keras

    initializer = keras.initializers.TruncatedNormal(stddev=initializer_range, seed=seed)
    return initializer(shape=(count, width)).numpy()


def resized(embeddings: np.ndarray, bias: Optional[np.ndarray], cuts: Dict[int, List[int]], rule: str = DEFAULT_RULE,
            initializer_range: float = DEFAULT_INITIALIZER_RANGE, seed: int = 0,
            bias_shifts: Optional[Dict[int, float]] = None) -> Tuple[np.ndarray, Optional[np.ndarray]]:
    """The embedding matrix (and output bias) with a row for every id of `cuts` (base_cuts), initialised by `rule`;
    old rows as they were. The matrix keeps rows it had past the base's ids (a checkpoint padded to a multiple).
    `bias_shifts` (mean-of-pieces only: bias_shifts()) are added to the new pieces' mean biases."""
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, not {rule!r}")
    old_rows = embeddings.shape[0]
    size = max([old_rows] + [index + 1 for index in cuts])
    rows = np.concatenate([embeddings, np.zeros((size - old_rows, embeddings.shape[1]), embeddings.dtype)])
    biases = None if bias is None else np.concatenate([bias, np.zeros(size - old_rows, bias.dtype)])
    ids = sorted(cuts)
    if rule == "random":
        rows[ids] = _random_rows(len(ids), embeddings.shape[1], initializer_range, seed).astype(embeddings.dtype)
        if biases is not None:
            biases[ids] = 0.0
        return rows, biases
    mean_row = embeddings.astype(np.float64).mean(axis=0)
    for index in ids:
        pieces = cuts[index]
        if rule == "mean-of-pieces" and pieces:
            rows[index] = embeddings[pieces].astype(np.float64).mean(axis=0)
        else:
            rows[index] = mean_row
        if biases is not None:
            if not pieces:
                biases[index] = bias.min()
            elif rule == "mean-of-pieces":
                biases[index] = bias[pieces].astype(np.float64).mean() + (bias_shifts or {}).get(index, 0.0)
            else:
                biases[index] = bias.astype(np.float64).mean()
    return rows, biases


def _resized_weight(value: np.ndarray, old_size: int, new_size: int, cuts: Dict[int, List[int]], rule: str,
                    initializer_range: float, seed: int, bias: Optional[np.ndarray],
                    shifts: Optional[Dict[int, float]]) -> np.ndarray:
    """One weight with a vocabulary axis grown from `old_size` to `new_size` (or as large, its new ids' rows set):
    rows of an embedding [V, X], columns of an output kernel [X, V] (T5 1.1's untied lm_head), entries of an output
    bias [V] (`bias`: that bias, which the rows' rule reads for the bias it gives)."""
    new_size = max(old_size, new_size)
    if value.ndim == 1:
        return resized(np.zeros((old_size, 1), value.dtype), value, cuts, rule, initializer_range, seed,
                       shifts)[1][:new_size]
    if value.shape[0] == old_size:
        return resized(value, bias, cuts, rule, initializer_range, seed)[0][:new_size]
    return resized(value.T, bias, cuts, rule, initializer_range, seed)[0][:new_size].T


def resized_model(model, cuts: Dict[int, List[int]], rule: str = DEFAULT_RULE, seed: int = 0,
                  shifts: Optional[Dict[int, float]] = None):
    """A model of the same class with a vocabulary grown to hold every id of `cuts` (base_cuts), in any family of
    the registry (transformers' TensorFlow classes, ModernBERT): the same weights, and for the new ids rows by `rule`
    in every weight with a vocabulary axis (the input embeddings, with the masked-LM decoder tied to them; the output
    bias; an untied output kernel). A model with rows to spare for them (a vocabulary padded to a multiple) keeps its
    size, those rows set. `shifts`: the new pieces' output bias shifts (bias_shifts). Returns (the model, the names of
    the weights that grew or were set)."""
    from mlm_tpu.model_folder import families

    family = families.of_model(model)
    new_size = max(index + 1 for index in cuts)
    old_size = model.config.vocab_size
    bias = family.output_bias(model)
    bias = None if bias is None else bias.numpy()
    initializer_range = _initializer_range(model.config)
    if new_size <= old_size:
        return _with_rows_set(model, family.vocabulary_weights(model), cuts, rule, seed, bias, shifts)
    grown = family.with_vocabulary_size(model, new_size)
    names = lambda weights: [weight.name.split("/", 1)[-1] for weight in weights]  # noqa: E731
    if names(grown.weights) != names(model.weights):
        raise ValueError(f"{type(model).__name__} built with a larger vocabulary has other weights")
    values, changed = [], []
    for weight, target in zip(model.weights, grown.weights):
        value = weight.numpy()
        if tuple(target.shape) != value.shape:
            value = _resized_weight(value, old_size, new_size, cuts, rule, initializer_range, seed, bias, shifts)
            changed.append(target.name.split("/", 1)[-1])
        values.append(value)
    grown.set_weights(values)
    return grown, changed


def _initializer_range(config) -> float:
    return getattr(config, "initializer_range", getattr(config, "initializer_factor", DEFAULT_INITIALIZER_RANGE))


def _with_rows_set(model, weights: list, cuts: Dict[int, List[int]], rule: str, seed: int,
                   bias: Optional[np.ndarray], shifts: Optional[Dict[int, float]]):
    """`model` with the rows of the ids of `cuts` set by `rule` in `weights` (its family's weights with a vocabulary
    axis; `bias`: its output bias, which the rule reads): resized_model where those rows exist already."""
    size = model.config.vocab_size
    changed = []
    for weight in weights:
        weight.assign(_resized_weight(weight.numpy(), size, size, cuts, rule, _initializer_range(model.config), seed,
                                      bias, shifts))
        changed.append(weight.name.split("/", 1)[-1])
    return model, changed
