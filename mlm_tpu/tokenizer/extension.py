"""Extend a tokenizer with new pieces, every old piece keeping its id and every old encoding its ids
(`python -m mlm_tpu.tokenizer extend`, `extend_tokenizer`).

Continuing a checkpoint on a new domain or language meets words its tokenizer cuts into many pieces. This adds
whole words as pieces, after the base's ids (rounded up to a multiple with --pad-to-multiple-of), and records
what it did in tokenizer_extension.json.

Which words (--num-new-pieces N): the words of the corpus, as the base's normalizer and pre-tokenizer cut them
(with at least one letter, seen at least --min-frequency times), that the base cuts into two pieces or more,
ranked by the pieces they would save: frequency x (pieces - 1). Or the words of --new-pieces-file, in its order.

How each family takes a piece, in its model's own vocabulary (never as an added token: those are matched in raw
text before the model, inside longer words too):
- WordPiece: the word as a word-initial piece (no ##). WordPiece takes the longest known prefix of a word, so
  only words that begin with a new piece are cut otherwise.
- BPE: merges appended after all the base's, each making a piece the base lacks (so, for a word of k pieces,
  k - 2 intermediate pieces too, which count among the N and are shared between words where they can). The
  base's merges all apply first, exactly as before; a new merge then fires only where its pieces meet, and its
  result is new: an encoding either equals the base's or holds a new id.
- Unigram: the word with a score just above its best cut by the base (and by shorter new pieces), never below
  the base's lowest score (which sets the score of unknown characters). Viterbi then takes the best cut as
  before unless one through a new piece beats it.
So text that holds no new piece's text (WordPiece: no word beginning with one) encodes to the same ids as before;
for BPE and Unigram, any encoding without a new id is the base's (tests/test_tokenizer_extension.py checks both
on WikiText, for all three families).

Padding pieces (--pad-to-multiple-of) are named `[unused N]`: the space inside never reaches a model (WordPiece
and byte-level BPE pre-tokenizers split at spaces or turn them into Ġ, Metaspace into ▁), BPE has no merge making
them and Unigram gives them its lowest score; each is checked to stay unreachable from its own text.

Refused, in one line: a slow (Python) tokenizer (no tokenizer.json to extend), a BPE with dropout (it cuts the same
text differently from call to call, so no old encoding can be kept), a word-level tokenizer (it cuts no word into
pieces: nothing to keep whole), a Unigram whose added tokens take ids past its vocabulary (a new piece's id is its
place in the vocabulary, which those ids already hold).
"""

import json
import math
import os
import platform
from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from mlm_tpu.configuration import check_ranges, setting
from mlm_tpu.console import log, progress
from mlm_tpu.corpus import Corpus, CorpusSource
from mlm_tpu.errors import UserError
from mlm_tpu.output_dir import TOKENIZER_FOLDER, check_output_dir, staged_output_dir
from mlm_tpu.tokenizer.load import load_tokenizer, tokenizer_fingerprint
from mlm_tpu.version import __version__

EXTENSION_INFO_FILE = "tokenizer_extension.json"
DEFAULT_MIN_FREQUENCY = 2  # a word seen once is no pattern
SCORE_MARGIN = 0.01  # a new Unigram piece scores this much above the best cut of its text without it
PADDING_PIECE = "[unused {}]"
SHOWN_WORDS = 20  # words listed in the log


@dataclass
class TokenizerExtensionConfig:
    """What `python -m mlm_tpu.tokenizer extend` does; the flags of the same names fill it."""

    tokenizer: str  # the base: a tokenizer folder, a model folder or a Hub name
    output_dir: str  # folder to save the extended tokenizer in
    corpus: CorpusSource = field(default_factory=CorpusSource)
    num_new_pieces: Optional[int] = setting(None, low=1)  # the N words of the corpus that save the most pieces
    new_pieces_file: Optional[str] = None  # or these words, one a line
    min_frequency: int = setting(DEFAULT_MIN_FREQUENCY, low=1)  # corpus words seen fewer times are not candidates
    pad_to_multiple_of: Optional[int] = setting(None, low=1)  # round the vocabulary up with unreachable pieces
    overwrite: bool = False  # replace the files an earlier mlm_tpu command wrote in output_dir (never others)


# --- the base -------------------------------------------------------------------------------------------------


def backend_json(tokenizer) -> dict:
    return json.loads(tokenizer.backend_tokenizer.to_str())


def refuse_unextendable(tokenizer, name: str) -> str:
    """The family of `tokenizer` ("wordpiece", "bpe", "unigram"), or one line saying why it cannot take new pieces
    without changing old encodings."""
    if not getattr(tokenizer, "is_fast", False):
        raise UserError(f"--tokenizer {name} is a slow (Python) tokenizer: there is no tokenizer.json to extend; "
                        "use a folder with tokenizer.json")
    model = backend_json(tokenizer)["model"]
    family = model["type"].lower()
    if family == "bpe" and model.get("dropout"):
        raise UserError(f"--tokenizer {name} is a BPE with dropout {model['dropout']}: it cuts the same text "
                        "differently from call to call, so no extension can keep its encodings; use it without dropout")
    if family == "bpe" and (model.get("continuing_subword_prefix") or model.get("end_of_word_suffix")):
        raise UserError(f"--tokenizer {name} is a BPE that marks pieces inside words "
                        f"({model.get('continuing_subword_prefix') or model.get('end_of_word_suffix')}): a merge's "
                        "piece is then not its two pieces side by side, which mlm_tpu's extension relies on")
    if family == "wordlevel":
        raise UserError(f"--tokenizer {name} is word-level: it cuts no word into pieces, so no new piece keeps a "
                        "word whole; extend a WordPiece, BPE or Unigram tokenizer")
    if family not in ("wordpiece", "bpe", "unigram"):
        raise UserError(f"--tokenizer {name} has a {model['type']} model, which mlm_tpu cannot extend; extend a "
                        "WordPiece, BPE or Unigram tokenizer")
    if family == "unigram" and len(model["vocab"]) < len(tokenizer):
        raise UserError(f"--tokenizer {name}: its added tokens take ids {len(model['vocab'])} to {len(tokenizer) - 1}, "
                        "past its Unigram vocabulary, where a new piece's id must follow the vocabulary; mlm_tpu "
                        "cannot extend it")
    return family


def words_of(tokenizer, texts: Iterable[str]) -> Counter:
    """How often each word occurs, as the tokenizer's normalizer and pre-tokenizer cut the text (the form its model
    sees: "▁word", "Ġword" or "word"); only words with a letter."""
    counts: Counter = Counter()
    for text in texts:
        counts.update(segments(tokenizer, text))
    return Counter({word: count for word, count in counts.items() if any(char.isalpha() for char in word)})


def segments(tokenizer, text: str) -> List[str]:
    """The words of `text` as the tokenizer's normalizer and pre-tokenizer cut it: what its model is handed."""
    backend = tokenizer.backend_tokenizer
    normalized = backend.normalizer.normalize_str(text) if backend.normalizer else text
    return [word for word, _ in backend.pre_tokenizer.pre_tokenize_str(normalized)] if backend.pre_tokenizer \
        else [normalized]


def cut(tokenizer, word: str) -> List[str]:
    """The pieces the tokenizer's model cuts a word (in its pre-tokenized form) into."""
    return [token.value for token in tokenizer.backend_tokenizer.model.tokenize(word)]


def spells(family: str, word: str, pieces: Sequence[str], continuation: str, vocab: Dict[str, int]) -> bool:
    """Whether `pieces` spell `word`, each a piece of `vocab` (no unknown piece, no byte pieces standing in for a
    character)."""
    if not all(piece in vocab for piece in pieces):
        return False
    if family == "wordpiece":
        pieces = [pieces[0]] + [piece[len(continuation):] if piece.startswith(continuation) else "\0"
                                for piece in pieces[1:]]
    return "".join(pieces) == word


def piece_counts(tokenizer, counts: Counter) -> Counter:
    """How often each piece of the tokenizer's model occurs in the corpus' words (`counts`: words_of) as it cuts
    them, words holding an added token left out (it is matched before the model): what a new piece's frequency is
    compared with, to set its output bias (model_folder/new_embeddings.py)."""
    added = [token.content for token in tokenizer.backend_tokenizer.get_added_tokens_decoder().values()]
    pieces: Counter = Counter()
    for word, count in counts.items():
        if not any(content in word for content in added):
            for piece in cut(tokenizer, word):
                pieces[piece] += count
    return pieces


def base_frequencies(tokenizer, pieces: Counter) -> List[int]:
    """How often each of the tokenizer's pieces occurs in the corpus (`pieces`: piece_counts), by id: what the new
    pieces' output biases are matched against (model_folder/new_embeddings.py's frequency-matched bias)."""
    frequencies = [0] * len(tokenizer)
    for piece, index in tokenizer.backend_tokenizer.get_vocab(with_added_tokens=False).items():
        if index < len(frequencies):
            frequencies[index] = pieces.get(piece, 0)
    return frequencies


def pieces_per_word(tokenizer, counts: Counter) -> float:
    total = sum(counts.values())
    return sum(count * len(cut(tokenizer, word)) for word, count in counts.items()) / total if total else 0.0


# --- adding pieces, family by family -------------------------------------------------------------------------


@dataclass
class Addition:
    """One new piece: the word it keeps whole (or a BPE merge's intermediate piece), how the base cuts it."""

    piece: str
    base_pieces: List[str]
    frequency: int = 0
    kind: str = "word"  # or "merge step": a BPE piece a word's merges pass through

    @property
    def pieces_saved(self) -> int:
        return self.frequency * (len(self.base_pieces) - 1) if self.kind == "word" else 0


def _bpe_tree(pieces: List[str], old: set, new: set) -> Optional[List[Tuple[str, str]]]:
    """Merges (left, right) that build the word from its base pieces, bottom-up, each making a piece the base lacks,
    using as few pieces not yet added (`new`) as can be; None if every way passes through an old piece."""
    count = len(pieces)
    text = lambda start, end: "".join(pieces[start:end])  # noqa: E731
    best: Dict[Tuple[int, int], Tuple[float, List[Tuple[str, str]]]] = {}
    for length in range(1, count + 1):
        for start in range(count - length + 1):
            end = start + length
            if length == 1:
                best[start, end] = (0, [])
                continue
            if text(start, end) in old:
                best[start, end] = (math.inf, [])
                continue
            options = [(best[start, middle][0] + best[middle, end][0], middle) for middle in range(start + 1, end)]
            cost, middle = min(options)
            merges = best[start, middle][1] + best[middle, end][1] + [(text(start, middle), text(middle, end))]
            best[start, end] = (cost + (text(start, end) not in new), merges)
    cost, merges = best[0, count]
    return None if math.isinf(cost) else merges


def _bpe_merges(model: dict) -> List[Tuple[str, str]]:
    return [tuple(merge.split(" ", 1)) if isinstance(merge, str) else tuple(merge) for merge in model["merges"]]


def _choose(family: str, base, candidates: List[Addition], budget: Optional[int], named: bool,
            excluded: set) -> Tuple[List[Addition], List[Tuple[str, str]]]:
    """The additions (and for BPE the merges, in rank order) for `budget` new ids (None: every candidate, which
    --new-pieces-file names: `named`, so one that cannot be added is refused)."""
    old = set(base.backend_tokenizer.get_vocab())
    chosen: List[Addition] = []
    merges: List[Tuple[str, str]] = []
    added: set = set()
    for candidate in candidates:
        if budget is not None and len(chosen) >= budget:
            break
        if candidate.piece in excluded:
            continue
        if family != "bpe":
            chosen.append(candidate)
            continue
        tree = _bpe_tree(candidate.base_pieces, old, added)
        if tree is None:
            if named:
                raise UserError(f"--new-pieces-file: '{candidate.piece}' cannot be added to this BPE: every way of "
                                "merging its pieces passes through a piece the base has, which would change old "
                                "encodings")
            continue
        steps = [left + right for left, right in tree if left + right not in added]
        if budget is not None and len(chosen) + len(steps) > budget:
            continue
        for left, right in tree:
            if left + right not in added:
                added.add(left + right)
                if left + right != candidate.piece:
                    chosen.append(Addition(left + right, cut(base, left + right), kind="merge step"))
            if (left, right) not in merges:
                merges.append((left, right))
        chosen.append(candidate)
    return chosen, merges


def _best_score(word: str, scores: Dict[str, float], longest: int) -> float:
    """The best total score of a cut of `word` into the pieces of `scores` (Viterbi, as the Unigram model runs it)."""
    best = [0.0] + [-math.inf] * len(word)
    for end in range(1, len(word) + 1):
        for start in range(max(0, end - longest), end):
            score = scores.get(word[start:end])
            if score is not None and best[start] > -math.inf:
                best[end] = max(best[end], best[start] + score)
    return best[-1]


def _extended_model(family: str, model: dict, start: int, chosen: List[Addition], merges: List[Tuple[str, str]],
                    padding: List[str]) -> dict:
    """The base's model (its JSON) with the chosen pieces and padding after id `start - 1`."""
    model = json.loads(json.dumps(model))
    pieces = [addition.piece for addition in chosen]
    if family == "unigram":
        scores = {piece: score for piece, score in model["vocab"]}
        lowest = min(scores.values())
        longest = max(map(len, scores))
        for addition in sorted(chosen, key=lambda addition: len(addition.piece)):  # shorter pieces score first
            best = _best_score(addition.piece, scores, longest)
            scores[addition.piece] = max(best + SCORE_MARGIN, lowest)
            longest = max(longest, len(addition.piece))
        model["vocab"] += [[piece, scores[piece]] for piece in pieces] + [[piece, lowest] for piece in padding]
        return model
    ids = {piece: start + index for index, piece in enumerate(pieces + padding)}
    model["vocab"] = {**model["vocab"], **ids}
    if family == "bpe":
        strings = bool(model["merges"]) and isinstance(model["merges"][0], str)
        model["merges"] = model["merges"] + [f"{left} {right}" if strings else [left, right] for left, right in merges]
    return model


def _padding(base, size: int, multiple: Optional[int]) -> List[str]:
    """Names of the pieces that round `size` up to a multiple of `multiple`, none the base holds."""
    if not multiple or size % multiple == 0:
        return []
    vocab = base.backend_tokenizer.get_vocab()
    names = (PADDING_PIECE.format(index) for index in range(1 << 30))
    return [name for name, _ in zip((name for name in names if name not in vocab), range(multiple - size % multiple))]


def _rebuilt(base, backend):
    """The base's transformers class around the extended backend, with the base's settings (not its files: a saved
    spiece.model would be the base's vocabulary)."""
    files = {"name_or_path", "vocab_file", "merges_file", "tokenizer_file", "_commit_hash", "backend", "is_local",
             "local_files_only"}
    settings = {key: value for key, value in base.init_kwargs.items() if key not in files}
    return type(base)(tokenizer_object=backend, **settings)


def extended_tokenizer(base, family: str, candidates: List[Addition], budget: Optional[int], named: bool,
                       pad_to_multiple_of: Optional[int]):
    """(the extended transformers tokenizer, its additions, its padding pieces)."""
    from tokenizers import Tokenizer

    data = backend_json(base)
    start = len(base)
    excluded: set = set()
    while True:
        chosen, merges = _choose(family, base, candidates, budget, named, excluded)
        padding = _padding(base, start + len(chosen), pad_to_multiple_of)
        data["model"] = _extended_model(family, backend_json(base)["model"], start, chosen, merges, padding)
        backend = Tokenizer.from_str(json.dumps(data))
        broken = {addition.piece for addition in chosen if addition.kind == "word"
                  and [token.value for token in backend.model.tokenize(addition.piece)] != [addition.piece]}
        if not broken:
            break
        if named:  # a BPE merge of one word fires inside another first
            raise UserError(f"--new-pieces-file: the merges of '{sorted(broken)[0]}' clash with another word's; "
                            "give it in a file of its own")
        excluded |= broken
    if budget is not None and len(chosen) < budget:
        raise UserError(f"--num-new-pieces {budget} is more than the corpus yields: {len(chosen)} new pieces (words "
                        f"seen at least --min-frequency times that the base cuts into two pieces or more); ask for "
                        f"at most {len(chosen)}, lower --min-frequency, or give a larger corpus")
    extended = _rebuilt(base, backend)
    for piece in padding:
        for text in (piece, "x" + piece, "a " + piece + " b"):
            if backend.token_to_id(piece) in extended(text, add_special_tokens=False)["input_ids"]:
                raise UserError(f"--pad-to-multiple-of: this tokenizer reaches the padding piece '{piece}' from "
                                "text (its pre-tokenizer keeps spaces inside words); drop --pad-to-multiple-of")
    return extended, chosen, padding


# --- candidates ----------------------------------------------------------------------------------------------


def corpus_candidates(base, family: str, counts: Counter, min_frequency: int) -> List[Addition]:
    """The corpus' words the base cuts into two pieces or more, most pieces saved first (ties: by the word)."""
    continuation, vocab = _continuation(base), base.backend_tokenizer.get_vocab()
    added = [token.content for token in base.backend_tokenizer.get_added_tokens_decoder().values()]
    candidates = []
    for word, count in counts.items():
        if count < min_frequency or len(word) < 2 or word in vocab or (continuation and word.startswith(continuation)):
            continue
        if any(content in word for content in added):  # "<unk>" in WikiText: matched before the model ever sees it
            continue
        pieces = cut(base, word)
        if len(pieces) >= 2 and spells(family, word, pieces, continuation, vocab):
            candidates.append(Addition(word, pieces, count))
    return sorted(candidates, key=lambda addition: (-addition.pieces_saved, addition.piece))


def _continuation(base) -> str:
    return backend_json(base)["model"].get("continuing_subword_prefix") or ""


def named_candidates(base, family: str, path: str, counts: Counter) -> List[Addition]:
    """The words of --new-pieces-file (one a line, as written in text), each in the form the model sees; refused in
    one line: a line that is not one word to this tokenizer, a word it already holds whole, one it cannot spell."""
    try:
        with open(path, encoding="utf-8") as stream:
            lines = [line.strip() for line in stream if line.strip()]
    except FileNotFoundError:
        raise UserError(f"--new-pieces-file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as error:
        raise UserError(f"--new-pieces-file {path} cannot be read as UTF-8 text ({error})") from None
    if not lines:
        raise UserError(f"--new-pieces-file {path} holds no words (one a line)")
    continuation, vocab, seen, candidates = _continuation(base), base.backend_tokenizer.get_vocab(), set(), []
    for line in lines:
        cut_line = segments(base, " " + line)  # as inside text, after a space (byte-level BPE: Ġword)
        if len(cut_line) != 1 or len(cut_line[0]) < 2:
            raise UserError(f"--new-pieces-file: '{line}' is not one word of two characters or more to this tokenizer "
                            f"(its pre-tokenizer cuts it into {cut_line}); give one word a line")
        word = cut_line[0]
        if word in vocab:
            raise UserError(f"--new-pieces-file: '{line}' is a piece of the base already ('{word}', id {vocab[word]})")
        pieces = cut(base, word)
        if not spells(family, word, pieces, continuation, vocab):
            raise UserError(f"--new-pieces-file: the base cannot spell '{line}' (it cuts it into {pieces}); a new "
                            "piece must be made of pieces the base knows")
        if word not in seen:
            seen.add(word)
            candidates.append(Addition(word, pieces, counts.get(word, 0)))
    return candidates


# --- the command -----------------------------------------------------------------------------------------------


def check_config(config: TokenizerExtensionConfig) -> None:
    check_ranges(config)
    if (config.num_new_pieces is None) == (config.new_pieces_file is None):
        raise UserError("give one of --num-new-pieces N (the N words of the corpus that save the most pieces) or "
                        "--new-pieces-file FILE (those words)")


def _corpus_given(source: CorpusSource) -> bool:
    return bool(source.text_files or source.dataset or source.builtin_corpus)


def _text(tokenizer, piece: str) -> str:
    return tokenizer.convert_tokens_to_string([piece]).strip()


def _info(config: TokenizerExtensionConfig, base, extended, family: str, chosen: List[Addition], padding: List[str],
          corpus: Optional[Corpus], before: float, after: float, base_counts: Counter) -> dict:
    import tokenizers
    import transformers

    return {
        "base": {"tokenizer": config.tokenizer, "family": family, "size": len(base),
                 "fingerprint": tokenizer_fingerprint(base)},
        "size": len(extended),
        "fingerprint": tokenizer_fingerprint(extended),
        "chosen_by": ("--new-pieces-file" if config.new_pieces_file else
                      "pieces saved on the corpus: frequency x (pieces - 1)"),
        "new_pieces_file": config.new_pieces_file,
        "min_frequency": None if config.new_pieces_file else config.min_frequency,
        "corpus": corpus.source.describe() if corpus else None,
        "documents": corpus.documents_read if corpus else 0,
        "pieces_per_word": {"before": round(before, 4), "after": round(after, 4)},
        "new_pieces": [{"id": extended.convert_tokens_to_ids(addition.piece), "piece": addition.piece,
                        "text": _text(extended, addition.piece), "kind": addition.kind,
                        "base_pieces": addition.base_pieces, "frequency": addition.frequency,
                        "base_piece_frequencies": [base_counts[piece] for piece in addition.base_pieces],
                        "pieces_saved": addition.pieces_saved} for addition in chosen],
        "base_frequencies": base_frequencies(base, base_counts) if corpus else None,
        "padding": [{"id": extended.convert_tokens_to_ids(piece), "piece": piece} for piece in padding],
        "pad_to_multiple_of": config.pad_to_multiple_of,
        "versions": {"mlm_tpu": __version__, "tokenizers": tokenizers.__version__,
                     "transformers": transformers.__version__, "python": platform.python_version()},
    }


def _shown(base, chosen: List[Addition]) -> str:
    words = sorted((addition for addition in chosen if addition.kind == "word"), key=lambda a: -a.pieces_saved)
    shown = ", ".join(f"{_text(base, a.piece)} ({a.frequency}x, was {' '.join(a.base_pieces)})"
                      for a in words[:SHOWN_WORDS])
    return shown + (f" and {len(words) - SHOWN_WORDS} more" if len(words) > SHOWN_WORDS else "")


def extend_tokenizer(config: TokenizerExtensionConfig) -> str:
    """Extend, save (atomically) and record; return the output folder."""
    check_config(config)
    base = load_tokenizer(config.tokenizer)
    family = refuse_unextendable(base, config.tokenizer)
    corpus = Corpus(config.corpus) if config.num_new_pieces or _corpus_given(config.corpus) else None
    counts: Counter = Counter()
    if corpus:
        with progress(corpus.documents(), desc=f"reading {corpus.name()}", unit=" docs",
                      total=corpus.source.limit) as documents:
            counts = words_of(base, documents)
    if config.new_pieces_file:
        candidates = named_candidates(base, family, config.new_pieces_file, counts)
    else:
        candidates = corpus_candidates(base, family, counts, config.min_frequency)
    check_output_dir(config.output_dir, TOKENIZER_FOLDER.files, config.overwrite)  # after what it reads
    extended, chosen, padding = extended_tokenizer(base, family, candidates, config.num_new_pieces,
                                                   bool(config.new_pieces_file), config.pad_to_multiple_of)
    before, after = pieces_per_word(base, counts), pieces_per_word(extended, counts)
    info = _info(config, base, extended, family, chosen, padding, corpus, before, after, piece_counts(base, counts))
    with staged_output_dir(config.output_dir) as staging:
        extended.save_pretrained(staging)
        with open(os.path.join(staging, EXTENSION_INFO_FILE), "w", encoding="utf-8") as stream:
            json.dump(info, stream, indent=2, ensure_ascii=False)
            stream.write("\n")
    steps = sum(addition.kind != "word" for addition in chosen)
    log(f"Extended the {family} tokenizer {config.tokenizer} ({len(base):,} pieces) with {len(chosen):,} new pieces"
        + (f" ({steps:,} of them BPE merge steps)" if steps else "")
        + (f" and {len(padding)} padding pieces" if padding else "") + f": {len(extended):,} pieces, ids "
        f"{len(base):,} to {len(extended) - 1:,} new. Saved to {config.output_dir}")
    if counts:
        log(f"Pieces per word on the corpus ({sum(counts.values()):,} words): {before:.3f} before, {after:.3f} after")
    log(f"Words that now stay whole: {_shown(base, chosen)} (all in {EXTENSION_INFO_FILE})")
    return config.output_dir


# --- checking an extension (for a command that continues a checkpoint with it) ----------------------------------


def _pipeline(tokenizer) -> dict:
    data = backend_json(tokenizer)
    model = {key: value for key, value in data["model"].items() if key not in ("vocab", "merges")}
    return {"model": model, **{key: data.get(key) for key in ("normalizer", "pre_tokenizer", "decoder")}}


def check_extension(base, extended, flag: str = "--tokenizer", base_name: str = "the checkpoint's") -> List[int]:
    """Refuse `extended` unless it extends `base`: every piece of the base at its id, the same pipeline around the
    model, the base's merges (BPE) or scores (Unigram) unchanged. Return the new ids."""
    base_vocab, extended_vocab = base.get_vocab(), extended.get_vocab()
    moved = [(piece, index, extended_vocab.get(piece)) for piece, index in sorted(base_vocab.items(),
                                                                                  key=lambda item: item[1])
             if extended_vocab.get(piece) != index]
    if len(moved) > len(base_vocab) // 2 or _pipeline(base) != _pipeline(extended):
        raise UserError(f"{flag} is not an extension of {base_name} tokenizer: "
                        + (f"{len(moved):,} of its {len(base_vocab):,} pieces are not at their ids there"
                           if moved else "its normalizer, pre-tokenizer, decoder or model settings differ")
                        + f"; extend {base_name} tokenizer with `mlm-tpu tokenizer extend`")
    if moved:
        piece, old, new = moved[0]
        where = f"id {new}" if new is not None else "nowhere"
        raise UserError(f"{flag} changes the id of {len(moved):,} of {base_name} tokenizer's pieces ('{piece}': id "
                        f"{old}, now {where}); an extended tokenizer must keep every old piece at its id")
    base_model, extended_model = backend_json(base)["model"], backend_json(extended)["model"]
    if base_model["type"] == "BPE" and _bpe_merges(extended_model)[:len(base_model["merges"])] != _bpe_merges(base_model):
        raise UserError(f"{flag} changes {base_name} tokenizer's BPE merges: old words would be cut otherwise; new "
                        "merges must come after the old ones")
    if base_model["type"] == "Unigram" and extended_model["vocab"][:len(base_model["vocab"])] != base_model["vocab"]:
        raise UserError(f"{flag} changes the scores of {base_name} tokenizer's Unigram pieces: old words would be cut "
                        "otherwise")
    return sorted(index for piece, index in extended_vocab.items() if piece not in base_vocab)
