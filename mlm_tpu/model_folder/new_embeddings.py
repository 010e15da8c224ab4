"""The rows a checkpoint's embeddings (and its masked-LM head's output bias) gain for the pieces an extended tokenizer
adds (`mlm-tpu tokenizer extend`), each initialised by one rule (`--new-embeddings`), a pair of parts: how the rows
start (ROWS) and how the output biases start (BIASES).

- `mean-of-pieces` (the default): the rows, the mean of the old rows of the pieces the base tokenizer cuts the new
  piece into (its model's cut of the piece as written, which is how it cut the word in text), as Fast Vocabulary
  Transfer (Gee et al. 2022) starts a new token. The output bias, this project's own rule (issue 55):
  prior_matched, which sets it so that at a mask with no context the new piece's logit is that of an old piece as
  frequent on the extension's corpus (`tokenizer extend` records every base piece's frequency there). Why: a masked
  LM's prior over pieces is its logits with no context, held by the bias and by the rows' product with the hidden
  state in proportions that vary by model, and the prior a new word needs is the new domain's. The two rules this
  replaces anchored the bias on the pieces' biases, which carry the old domain's prior: their mean (round 5) made a
  new row's logit the mean of its pieces', so it took probability wherever one of them fitted (56% of the softmax
  at old targets on a RoBERTa of IMDB); lowering it by log((f + 1) / geometric mean of (f_i + 1)) (round 6,
  frequency_shift, also this project's) counted in nats a prior the bias did not carry, and put a BERT of
  Wikipedia's new IMDB words at a loss above uniform's (docs/benchmark-results/vocabulary_extension.md). Without
  the record (a tokenizer extended otherwise) or a mask token, the pieces' mean bias.
- `mean`: the mean of all old rows (and of the old biases), as 🤗 PyTorch's `mean_resizing` centres them: Hewitt
  2021's recommendation, whose bound (by Jensen's inequality, a new row's probability is at most the mean of the
  old ones') keeps the new rows from taking over the softmax.
- `random`: a truncated normal of the config's initializer_range and a zero bias, as transformers 4.57's TensorFlow
  `resize_token_embeddings` draws them (seeded here, so a run is repeatable).

Padding pieces (`[unused N]`, which no text reaches) get the mean of all rows and the lowest old bias under the two
mean rules: never read, and as unlikely to be predicted as the least likely old piece.

Examples:
    >>> import numpy as np
    >>> embeddings = np.array([[0.0, 0.0], [2.0, 4.0], [4.0, 8.0]], dtype=np.float32)
    >>> rows, bias = resized(embeddings, np.array([0.0, 1.0, 3.0]), {3: [1, 2], 4: []}, "mean-of-pieces")
    >>> rows[3].tolist(), float(bias[3]), rows[4].tolist(), float(bias[4])  # without a model: the pieces' mean bias
    ([3.0, 6.0], 2.0, [2.0, 4.0], 0.0)
    >>> round(frequency_shift(99, [999, 999]), 4)  # round 6's shift: a word seen 10 times less than its pieces
    -2.3026
    >>> [round(value, 4) for value in frequency_line(np.array([-1.0, 1.0, 3.0]), [0, 9, 99])]  # -1 + 2 log10(1 + f)
    [-1.0, 0.8686]
"""

import json
import math
import os
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from mlm_tpu.tokenizer.extension import EXTENSION_INFO_FILE, PADDING_PIECE, check_extension
from mlm_tpu.tokenizer.load import tokenizer_fingerprint

ROWS = ("pieces", "all", "random")  # a new row: its pieces' mean, the mean of all rows, a truncated normal
# a new output bias: prior_matched's, its pieces' mean, that lowered by frequency_shift (round 6's rule),
# frequency_line's at its frequency, the mean of all biases, 0
BIASES = ("prior-matched", "pieces", "pieces-shifted", "frequency-matched", "all", "zero")
RULES = {"mean-of-pieces": ("pieces", "prior-matched"), "mean": ("all", "all"), "random": ("random", "zero")}
Mask = Tuple[Sequence[int], int]  # the tokenizer's framing of one mask token, and the mask's position in it
Rule = Union[str, Tuple[str, str]]
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


@dataclass(frozen=True)
class CorpusFrequencies:
    """What `tokenizer extend` counted on the corpus it read (its tokenizer_extension.json): each new piece's
    frequency, its base pieces' and, since it records them, every base piece's (by id)."""

    new: Dict[int, int]
    pieces: Dict[int, List[int]]
    base: Optional[List[int]] = None


def frequency_shift(frequency: int, piece_frequencies: Sequence[int]) -> float:
    """log((f + 1) / geometric mean of (f_i + 1)): how much rarer (below 0) a new piece of corpus frequency f is than
    the base pieces it was cut into (frequencies f_i), add-one smoothed (a BPE merge step, seen 0 times, stays
    finite)."""
    return math.log(frequency + 1) - sum(math.log(count + 1) for count in piece_frequencies) / len(piece_frequencies)


def corpus_frequencies(extended) -> Optional[CorpusFrequencies]:
    """The frequencies `tokenizer extend` recorded for `extended` (its tokenizer_extension.json beside it, recording
    this tokenizer); None where no such record holds them (a tokenizer extended otherwise, or by a list without a
    corpus)."""
    path = os.path.join(getattr(extended, "name_or_path", "") or "", EXTENSION_INFO_FILE)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as stream:
        record = json.load(stream)
    entries = record.get("new_pieces", [])
    if record.get("fingerprint") != tokenizer_fingerprint(extended) or not record.get("documents") or \
            not all("base_piece_frequencies" in entry for entry in entries):
        return None
    return CorpusFrequencies({entry["id"]: entry["frequency"] for entry in entries},
                             {entry["id"]: entry["base_piece_frequencies"] for entry in entries},
                             record.get("base_frequencies"))


def _random_rows(count: int, width: int, initializer_range: float, seed: int) -> np.ndarray:
    import tf_keras as keras

    initializer = keras.initializers.TruncatedNormal(stddev=initializer_range, seed=seed)
    return initializer(shape=(count, width)).numpy()


def parts(rule: Rule) -> Tuple[str, str]:
    """(how the rows start, how the biases start) of a rule's name or of such a pair."""
    found = RULES.get(rule, rule) if isinstance(rule, str) else tuple(rule)
    if not isinstance(found, tuple) or found[0] not in ROWS or found[1] not in BIASES:
        raise ValueError(f"rule must be one of {tuple(RULES)} or a pair of {ROWS} and {BIASES}, not {rule!r}")
    return found


def new_rows(embeddings: np.ndarray, cuts: Dict[int, List[int]], rows: str, initializer_range: float,
             seed: int) -> np.ndarray:
    """The matrix with a row for every id of `cuts`, each started by `rows` (ROWS); old rows as they were. It keeps
    rows it had past the base's ids (a checkpoint padded to a multiple)."""
    size = max([embeddings.shape[0]] + [index + 1 for index in cuts])
    grown = np.concatenate([embeddings, np.zeros((size - embeddings.shape[0], embeddings.shape[1]), embeddings.dtype)])
    ids = sorted(cuts)
    if rows == "random":
        grown[ids] = _random_rows(len(ids), embeddings.shape[1], initializer_range, seed).astype(embeddings.dtype)
        return grown
    mean_row = embeddings.astype(np.float64).mean(axis=0)
    for index in ids:
        pieces = cuts[index]
        grown[index] = embeddings[pieces].astype(np.float64).mean(axis=0) if rows == "pieces" and pieces else mean_row
    return grown


def frequency_line(bias: np.ndarray, base: Sequence[int]) -> Tuple[float, float]:
    """(intercept, slope) of the least-squares line of the old biases against the log of their pieces' frequencies on
    the extension's corpus (`base`, by id), over the pieces it holds at all: how the model's prior follows a piece's
    frequency in the new domain."""
    seen = [index for index, count in enumerate(base[:len(bias)]) if count > 0]
    if len(seen) < 2:
        return float(bias.astype(np.float64).mean()), 0.0
    slope, intercept = np.polyfit(np.log1p(np.array([base[index] for index in seen], np.float64)),
                                  bias[seen].astype(np.float64), 1)
    return float(intercept), float(slope)


def new_biases(bias: np.ndarray, cuts: Dict[int, List[int]], biases: str,
               frequencies: Optional[CorpusFrequencies] = None) -> np.ndarray:
    """The output bias with an entry for every id of `cuts`, each started by `biases` (BIASES; where it needs
    `frequencies` that are not recorded, the pieces' mean; `prior-matched` needs the model too: the pieces' mean here,
    which resized_model replaces with prior_matched's where it can); old entries as they were. A padding piece (no
    pieces) gets the lowest old bias (0 under `zero`)."""
    size = max([bias.shape[0]] + [index + 1 for index in cuts])
    grown = np.concatenate([bias, np.zeros(size - bias.shape[0], bias.dtype)])
    line = frequency_line(bias, frequencies.base) if biases == "frequency-matched" and frequencies and \
        frequencies.base else None
    for index, pieces in cuts.items():
        if biases == "zero":
            grown[index] = 0.0
        elif not pieces:
            grown[index] = bias.min()
        elif biases == "all":
            grown[index] = bias.astype(np.float64).mean()
        elif line and index in frequencies.new:
            grown[index] = line[0] + line[1] * math.log1p(frequencies.new[index])
        else:
            grown[index] = bias[pieces].astype(np.float64).mean()
            if biases == "pieces-shifted" and frequencies and index in frequencies.new:
                grown[index] += frequency_shift(frequencies.new[index], frequencies.pieces[index])
    return grown


def resized(embeddings: np.ndarray, bias: Optional[np.ndarray], cuts: Dict[int, List[int]], rule: Rule = DEFAULT_RULE,
            initializer_range: float = DEFAULT_INITIALIZER_RANGE, seed: int = 0,
            frequencies: Optional[CorpusFrequencies] = None) -> Tuple[np.ndarray, Optional[np.ndarray]]:
    """The embedding matrix (and output bias) with a row for every id of `cuts` (base_cuts), started by `rule` (a
    name of RULES, or a pair of ROWS and BIASES); old rows as they were."""
    rows, biases = parts(rule)
    return (new_rows(embeddings, cuts, rows, initializer_range, seed),
            None if bias is None else new_biases(bias, cuts, biases, frequencies))


def _resized_weight(value: np.ndarray, old_size: int, new_size: int, cuts: Dict[int, List[int]], rule: Rule,
                    initializer_range: float, seed: int,
                    frequencies: Optional[CorpusFrequencies]) -> np.ndarray:
    """One weight with a vocabulary axis grown from `old_size` to `new_size` (or as large, its new ids' rows set):
    rows of an embedding [V, X], columns of an output kernel [X, V] (T5 1.1's untied lm_head), entries of an output
    bias [V]."""
    new_size = max(old_size, new_size)
    rows, biases = parts(rule)
    if value.ndim == 1:
        return new_biases(value, cuts, biases, frequencies)[:new_size]
    if value.shape[0] == old_size:
        return new_rows(value, cuts, rows, initializer_range, seed)[:new_size]
    return new_rows(value.T, cuts, rows, initializer_range, seed)[:new_size].T


def resized_model(model, cuts: Dict[int, List[int]], rule: Rule = DEFAULT_RULE, seed: int = 0,
                  frequencies: Optional[CorpusFrequencies] = None, mask: Optional[Mask] = None):
    """A model of the same class with a vocabulary grown to hold every id of `cuts` (base_cuts), in any family of
    the registry (transformers' TensorFlow classes, ModernBERT): the same weights, and for the new ids rows by `rule`
    in every weight with a vocabulary axis (the input embeddings, with the masked-LM decoder tied to them; the output
    bias; an untied output kernel). A model with rows to spare for them (a vocabulary padded to a multiple) keeps its
    size, those rows set. `frequencies`: what the extension counted (corpus_frequencies); `mask`: a row holding one
    mask token (both for the prior-matched bias: matches_prior). Returns (the model, the names of the weights that
    grew or were set)."""
    from mlm_tpu.model_folder import families

    family = families.of_model(model)
    new_size = max(index + 1 for index in cuts)
    old_size = model.config.vocab_size
    initializer_range = _initializer_range(model.config)
    if new_size <= old_size:
        model, changed = _with_rows_set(model, family.vocabulary_weights(model), cuts, rule, seed, frequencies)
        return _prior_matched_where_possible(model, family, cuts, rule, frequencies, mask), changed
    grown = family.with_vocabulary_size(model, new_size)
    names = lambda weights: [weight.name.split("/", 1)[-1] for weight in weights]  # noqa: E731
    if names(grown.weights) != names(model.weights):
        raise ValueError(f"{type(model).__name__} built with a larger vocabulary has other weights")
    values, changed = [], []
    for weight, target in zip(model.weights, grown.weights):
        value = weight.numpy()
        if tuple(target.shape) != value.shape:
            value = _resized_weight(value, old_size, new_size, cuts, rule, initializer_range, seed, frequencies)
            changed.append(target.name.split("/", 1)[-1])
        values.append(value)
    grown.set_weights(values)
    return _prior_matched_where_possible(grown, family, cuts, rule, frequencies, mask), changed


def matches_prior(rule: Rule, frequencies: Optional[CorpusFrequencies], mask: Optional[Mask]) -> bool:
    """Whether `rule`'s biases are prior_matched's: it asks for them, the extension recorded every base piece's
    frequency (`tokenizer extend` since issue 55) and the tokenizer has a mask token; else its biases are the
    pieces' mean."""
    return parts(rule)[1] == "prior-matched" and bool(frequencies and frequencies.base) and mask is not None


def _prior_matched_where_possible(model, family, cuts: Dict[int, List[int]], rule: Rule,
                                  frequencies: Optional[CorpusFrequencies], mask: Optional[Mask]):
    bias = family.output_bias(model)
    if bias is not None and matches_prior(rule, frequencies, mask):
        prior_matched(model, bias, mask[0], mask[1], sorted(index for index, pieces in cuts.items() if pieces),
                      frequencies)
    return model


def _initializer_range(config) -> float:
    return getattr(config, "initializer_range", getattr(config, "initializer_factor", DEFAULT_INITIALIZER_RANGE))


def _with_rows_set(model, weights: list, cuts: Dict[int, List[int]], rule: Rule, seed: int,
                   frequencies: Optional[CorpusFrequencies]):
    """`model` with the rows of the ids of `cuts` set by `rule` in `weights` (its family's weights with a vocabulary
    axis): resized_model where those rows exist already."""
    size = model.config.vocab_size
    changed = []
    for weight in weights:
        weight.assign(_resized_weight(weight.numpy(), size, size, cuts, rule, _initializer_range(model.config), seed,
                                      frequencies))
        changed.append(weight.name.split("/", 1)[-1])
    return model, changed



def prior_matched(model, bias_weight, mask_row: Sequence[int], mask_position: int, ids: Sequence[int],
                  frequencies: CorpusFrequencies) -> None:
    """Set the output bias of each new id (`ids`, in `bias_weight`) so that at a mask with no context (`mask_row`:
    the tokenizer's framing of one mask token, at `mask_position`) the model's logit for the new piece is that of an
    old piece as frequent on the extension's corpus: the least-squares line of the old pieces' logits there against
    log(1 + frequency) (frequency_line), at its own frequency. Why: a masked LM's prior over pieces lives in its
    logits with no context, the output bias and the rows' product with the hidden state together, in proportions
    that vary by model (a tiny BERT's biases span 0.4 nats); a rule on the bias alone sets the prior only where
    the bias carries it."""
    import tensorflow as tf

    values = bias_weight.numpy()
    values[list(ids)] = 0.0
    bias_weight.assign(values)
    row = tf.constant([list(mask_row)])
    logits = tf.cast(model(input_ids=row, attention_mask=tf.ones_like(row), training=False).logits, tf.float32)
    logits = logits.numpy()[0, mask_position]
    intercept, slope = frequency_line(logits, frequencies.base)
    for index in ids:
        values[index] = intercept + slope * math.log1p(frequencies.new.get(index, 0)) - logits[index]
    bias_weight.assign(values)
