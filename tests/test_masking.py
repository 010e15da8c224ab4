"""--masking token | whole-word | span (mlm/masking.py, mlm/word_masking.py), in process, on real text packed as the
shard command packs it, with a tokenizer of each family: token masking is the masking of before, bit for bit; whole
words are never split, by the tokenizer's own notion of a word; span lengths follow SpanBERT's law; each mode masks
--mlm-probability of the tokens; the 80/10/10 split follows --mask-replace-prob and --random-replace-prob (per token,
per span); the masks are a function of (seed, step) alone; the sparse head's slots never split a word either."""

import hashlib
import re
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest

import mlm_tpu
from conftest import REPO_ROOT

FAMILIES = {"bpe": {"algorithm": "bpe"}, "wordpiece": {"algorithm": "wordpiece"}, "unigram": {"limit": 400}}
LENGTH, DOCUMENTS = 128, 400  # rows of 128 tokens packed from WikiText-2's first 400 paragraphs (~300 rows)
FIXTURES = REPO_ROOT / "tests" / "fixtures" / "made-by-0.2"


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory, wikitext_path):
    """A 2,000-piece tokenizer of each family, trained on WikiText-2 validation as the command trains them."""
    from mlm_tpu.tokenizer.load import load_tokenizer

    root = tmp_path_factory.mktemp("masking-families")
    return {name: load_tokenizer(mlm_tpu.train_tokenizer(str(root / name), text_files=[str(wikitext_path)],
                                                         vocab_size=2000, **settings))
            for name, settings in FAMILIES.items()}


def paragraphs(wikitext_path, count: int, without_unk: bool = False):
    """The first `count` paragraphs, stripped as the corpus reader strips documents (corpus.py); `without_unk`: with
    no "<unk>", WikiText's stand-in for rare words (the tokenizer's special token: never masked, it ends a span)."""
    text = wikitext_path.read_text(encoding="utf-8")
    lines = [line.strip() for line in (text.replace(" <unk>", "") if without_unk else text).splitlines()]
    return [line for line in lines if line][:count]


def packed(tokenizer, documents, length=LENGTH, framed=True):
    """Rows as the shard command packs them (each document framed by its special tokens, concatenated, cut every
    `length` tokens: shards/packing.py), and each token's word as the tokenizer's own pre-tokenizer splits the text
    (word_ids(); None for special tokens): a notion of words independent of the word marks masking reads."""
    from mlm_tpu.shards.packing import BatchTokenizer, ChunkPacker

    ids, words = [], []
    for number, document in enumerate(documents):
        encoding = tokenizer(document, add_special_tokens=framed)
        ids += encoding["input_ids"]
        words += [None if word is None else (number, word) for word in encoding.word_ids()]
    rows = ChunkPacker(length).add(BatchTokenizer(tokenizer, 1).encode(documents, framed))
    assert np.array_equal(rows.ravel(), ids[:rows.size])  # packed as the shard command packs them
    return rows, [words[start:start + length] for start in range(0, rows.size, length)]


def as_batch(rows):
    import tensorflow as tf

    rows = tf.convert_to_tensor(rows, tf.int32)
    return {"input_ids": rows, "attention_mask": tf.ones_like(rows)}


def mask(tokenizer, rows, masking, probability=0.15, slots=None, step=3, seed=5, **replacement):
    from mlm_tpu.mlm.masking import MlmMasker

    return MlmMasker(tokenizer, probability, seed, slots, masking=masking, **replacement)(step, as_batch(rows))


def masked_positions(batch) -> np.ndarray:
    """[rows, length] bool: where the batch takes a loss (the dense labels, or the sparse head's slots)."""
    from mlm_tpu.mlm.prediction_slots import MASKED_POSITIONS

    labels = batch["labels"].numpy()
    if MASKED_POSITIONS not in batch:
        return labels != -100
    found = np.zeros(batch["input_ids"].shape, bool)
    for row, (positions, values) in enumerate(zip(batch[MASKED_POSITIONS].numpy(), labels)):
        found[row, positions[values != -100]] = True
    return found


def digest(batch) -> str:
    hashed = hashlib.sha256()
    for name in sorted(batch):
        hashed.update(name.encode())
        hashed.update(np.asarray(batch[name].numpy(), np.int64).tobytes())
    return hashed.hexdigest()[:16]


@pytest.mark.parametrize("probability, slots, step, expected", [(0.15, None, 7, "015db60314c07c3d"),
                                                                (0.4, None, 11, "589113c854c80ded"),
                                                                (0.15, 9, 7, "361e158879d9b984")])
def test_token_masking_is_the_masking_of_before_bit_for_bit(probability, slots, step, expected):
    """The digests of masked batches that the code before --masking made (commit dd0af2d) for the same rows, seed and
    step: the default masking, its 80/10/10 and the sparse head's slots have not moved by a bit."""
    from mlm_tpu.mlm.masking import MlmMasker
    from mlm_tpu.mlm.shard_kind import MASKED_LM
    from mlm_tpu.shards.pipeline import evaluation_batches
    from mlm_tpu.shards.reading import find_shards
    from mlm_tpu.tasks import shard_kinds
    from mlm_tpu.tokenizer.load import load_tokenizer

    tokenizer = load_tokenizer(str(FIXTURES / "tokenizer"))
    shards = find_shards(str(FIXTURES / "shards" / "validation"), shard_kinds(), MASKED_LM.name, MASKED_LM.features(32))
    rows = next(iter(evaluation_batches(shards, 16, None, len(tokenizer))))
    batch = MlmMasker(tokenizer, probability, seed=3, prediction_slots=slots, masking="token", mask_replace_prob=0.8,
                      random_replace_prob=0.1)(step, rows)
    assert digest(batch) == expected


@pytest.mark.parametrize("family", FAMILIES)
def test_whole_word_and_span_masks_never_split_a_word(family, tokenizers, wikitext_path):
    """Every word, as the tokenizer's own pre-tokenizer splits the text, is masked whole or not at all (its special
    tokens aside), in dense batches and with few prediction slots (which cap the masks, never splitting a word)."""
    from mlm_tpu.training.task import TARGETS_LEFT_OUT

    tokenizer = tokenizers[family]
    rows, words = packed(tokenizer, paragraphs(wikitext_path, DOCUMENTS))
    special = np.isin(rows, tokenizer.all_special_ids)
    for masking in ("whole-word", "span"):
        for slots in (None, 6):
            batch = mask(tokenizer, rows, masking, slots=slots)
            masked = masked_positions(batch)
            long_words = 0
            for row in range(len(rows)):
                state = {}
                for position, word in enumerate(words[row]):
                    if word is not None and not special[row, position]:
                        assert state.setdefault(word, masked[row, position]) == masked[row, position], (
                            masking, slots, tokenizer.convert_ids_to_tokens(rows[row].tolist()), word)
                pieces = Counter(word for word, is_masked in zip(words[row], masked[row]) if is_masked)
                long_words += sum(count > 1 for count in pieces.values())
            assert long_words > 10  # words of several pieces were masked, whole
            if slots:
                assert masked.sum(axis=1).max() <= slots and not batch[TARGETS_LEFT_OUT].numpy().any()
    if family == "bpe":  # a document's first word has no Ġ: it starts a word after <s> all the same
        batch = mask(tokenizer, rows, "whole-word", probability=0.5)
        masked = masked_positions(batch)
        after_start = np.pad(rows[:, :-1] == tokenizer.bos_token_id, [(0, 0), (1, 0)])
        unmarked = np.vectorize(lambda token: not tokenizer.convert_ids_to_tokens(int(token)).startswith("Ġ"))(rows)
        assert (masked & after_start & unmarked).sum() > 10


def berts_whole_word_count(starts, candidate, real_tokens, probability, slots, rng) -> int:
    """How many tokens google-research/bert's create_masked_lm_predictions masks in a row with do_whole_word_mask:
    its candidates (every token but [CLS] and [SEP]: here, every special token) grouped in words (a token that
    starts none joins the word before), shuffled; num_to_predict = min(max_predictions_per_seq, max(1,
    int(round(len(tokens) * masked_lm_prob)))), len(tokens) the row's tokens, its special ones included; a word
    that does not fit what is left of it is skipped, and the next one tried."""
    words = []
    for start, is_candidate in zip(starts, candidate):
        if is_candidate:
            if words and not start:
                words[-1] += 1
            else:
                words.append(1)
    rng.shuffle(words)
    num_to_predict = min(slots, max(1, int(round(real_tokens * probability))))
    masked = 0
    for size in words:
        if masked >= num_to_predict:
            break
        if masked + size <= num_to_predict:
            masked += size
    return masked


@pytest.mark.parametrize("family", FAMILIES)
def test_whole_word_masking_spends_berts_budget_as_bert_does(family, tokenizers, wikitext_path):
    """On real rows of every real length from 16 to 128 tokens (the rest padding), whole-word masking never masks
    more than BERT's budget, min(slots, max(1, round(0.15 x the row's tokens))), and masks as many tokens per row
    as BERT's create_masked_lm_predictions on the same rows, on average within 1%, with and without few slots;
    rows of 1 to 4 tokens mask one token where a word of one piece can take it, as BERT's."""
    import random

    import tensorflow as tf

    from mlm_tpu.mlm.masking import MlmMasker
    from mlm_tpu.tokenizer.word_starts import word_start_flags, word_start_table

    tokenizer = tokenizers[family]
    rows, _ = packed(tokenizer, paragraphs(wikitext_path, DOCUMENTS))
    table, special_ids = word_start_table(tokenizer), set(tokenizer.all_special_ids)

    def masked_counts(real, slots, steps):
        """(ours [steps, rows], BERT's [steps, rows], budgets [rows]) on the rows cut to `real` tokens each."""
        attention = (np.arange(LENGTH)[None] < real[:, None]).astype(np.int32)
        cut = np.where(attention > 0, rows, tokenizer.pad_token_id)
        batch = {"input_ids": tf.constant(cut, tf.int32), "attention_mask": tf.constant(attention)}
        ours = np.array([masked_positions(MlmMasker(tokenizer, 0.15, 5, slots, masking="whole-word")(step, batch))
                         .sum(axis=1) for step in range(steps)])
        starts = [word_start_flags(row.tolist(), table, special_ids) for row in cut]
        candidate = ~np.isin(cut, list(special_ids))
        rng, most = random.Random(0), slots or LENGTH
        berts = np.array([[berts_whole_word_count(row_starts, row_candidate, tokens, 0.15, most, rng)
                           for row_starts, row_candidate, tokens in zip(starts, candidate, real)]
                          for _ in range(steps)])
        return ours, berts, np.minimum(most, np.maximum(1, [round(tokens * 0.15) for tokens in real]))

    real = 16 + np.arange(len(rows)) * 13 % (LENGTH - 15)
    for slots in (None, 8):
        ours, berts, budgets = masked_counts(real, slots, steps=4)
        assert (ours <= budgets).all(), slots
        assert ours.mean() == pytest.approx(berts.mean(), rel=0.01), slots
    ours, berts, budgets = masked_counts(1 + np.arange(len(rows)) % 4, None, steps=1)
    assert (budgets == 1).all() and np.array_equal(ours, berts) and ours.mean() > 0.5


def test_the_masker_reads_words_where_the_tokenizer_marks_them(tokenizers, wikitext_path):
    """word_numbers (tf, in the pipeline) starts a word where word_start_flags (Python) does, and at a row's start."""
    import tensorflow as tf

    from mlm_tpu.mlm.word_masking import word_numbers
    from mlm_tpu.tokenizer.word_starts import word_start_flags, word_start_table

    for tokenizer in tokenizers.values():
        rows, _ = packed(tokenizer, paragraphs(wikitext_path, 60))
        table, special_ids = word_start_table(tokenizer), set(tokenizer.all_special_ids)
        numbers = word_numbers(tf.constant(rows), tf.constant(np.isin(rows, list(special_ids))),
                               tf.constant(table)).numpy()
        for row, found in zip(rows, numbers):
            starts = word_start_flags(row.tolist(), table, special_ids)
            starts[0] = True
            assert np.array_equal(found, np.cumsum(starts) - 1)


def word_runs(masked_words):
    """Lengths of the runs of consecutive word numbers in a sorted list, with each run's first word."""
    runs = []
    for word in masked_words:
        if runs and word == runs[-1][0] + runs[-1][1]:
            runs[-1][1] += 1
        else:
            runs.append([word, 1])
    return runs


def test_span_lengths_follow_spanberts_law(tokenizers, wikitext_path):
    """Lengths in words of SpanBERT's law (geometric, p = 0.2, at most 10 words: mean 3.8), tested by chi-square:
    of the candidate spans as drawn, and of the masked spans in real text where the budget takes every candidate
    (so none is cut); at 15%, where the span crossing the budget keeps only the words that fit, within 0.02."""
    import tensorflow as tf
    from scipy import stats

    from mlm_tpu.mlm.word_masking import SPAN_MAX_WORDS, candidate_spans, span_length_law, word_numbers
    from mlm_tpu.tokenizer.word_starts import word_start_table

    law = span_length_law()
    assert np.sum(law * np.arange(1, SPAN_MAX_WORDS + 1)) == pytest.approx(3.8, abs=0.01)

    rows, length = 400, 256  # candidates over rows of 256 one-token words
    words = tf.tile(tf.range(length)[None], [rows, 1])
    draws = tf.random.stateless_uniform([2, rows, length // 2 + 1], seed=[1, 2])
    span, in_span = (value.numpy() for value in candidate_spans(words, draws[0], draws[1], 0.15))
    lengths = Counter()
    for row_spans, row_in_span in zip(span, in_span):
        numbers, counts = np.unique(row_spans[row_in_span], return_counts=True)
        starts = {number: np.argmax(row_spans == number) for number in numbers}
        lengths.update(count for number, count in zip(numbers, counts) if starts[number] < length - SPAN_MAX_WORDS)
    observed = np.array([lengths[size] for size in range(1, SPAN_MAX_WORDS + 1)])
    assert sum(lengths.values()) == observed.sum() > 5000
    assert stats.chisquare(observed, law * observed.sum()).pvalue > 0.01

    tokenizer = tokenizers["bpe"]  # real text of no special token, as one long document: spans are cut by none
    rows, _ = packed(tokenizer, paragraphs(wikitext_path, 300, without_unk=True), length=512, framed=False)
    numbers = word_numbers(tf.constant(rows), tf.zeros(rows.shape, tf.bool),
                           tf.constant(word_start_table(tokenizer))).numpy()
    for probability, tolerance in ((0.9, None), (0.15, 0.02)):
        lengths = Counter()
        for step in range(8):
            masked = masked_positions(mask(tokenizer, rows, "span", probability=probability, step=step))
            for row_numbers, row_masked in zip(numbers, masked):
                last = row_numbers[-1]
                lengths.update(size for first, size in word_runs(sorted(set(row_numbers[row_masked])))
                               if first < last - SPAN_MAX_WORDS)  # runs the row's end cannot have cut
        observed = np.array([lengths[size] for size in range(1, SPAN_MAX_WORDS + 1)])
        assert sum(lengths.values()) == observed.sum() > 2000, probability  # no run is longer than 10 words
        if tolerance is None:
            assert stats.chisquare(observed, law * observed.sum()).pvalue > 0.01
        else:
            assert np.abs(observed / observed.sum() - law).max() < tolerance


@pytest.mark.parametrize("probability", [0.15, 0.4])
def test_each_mode_masks_mlm_probability_of_the_tokens(probability, tokenizers, wikitext_path):
    """Of the maskable tokens; whole-word, of every token of the rows, special ones included, as BERT counts."""
    for family, tokenizer in tokenizers.items():
        rows, _ = packed(tokenizer, paragraphs(wikitext_path, DOCUMENTS))
        maskable = (~np.isin(rows, tokenizer.all_special_ids)).sum()
        for masking in ("token", "whole-word", "span"):
            counted = rows.size if masking == "whole-word" else maskable
            share = np.mean([masked_positions(mask(tokenizer, rows, masking, probability, step=step)).sum() / counted
                             for step in range(3)])
            assert share == pytest.approx(probability, rel=0.03), (family, masking)


def replacements(tokenizer, rows, batch):
    """[rows, length] of "mask", "random", "kept" at the masked positions ("" elsewhere)."""
    masked = masked_positions(batch)
    inputs = batch["input_ids"].numpy()
    kinds = np.where(inputs == tokenizer.mask_token_id, "mask", np.where(inputs == rows, "kept", "random"))
    return np.where(masked, kinds, "")


@pytest.mark.parametrize("shares", [(0.8, 0.1), (0.5, 0.4), (1.0, 0.0)])
def test_the_80_10_10_split_follows_the_settings_per_token_and_per_span(shares, tokenizers, wikitext_path):
    """Of the masked tokens, --mask-replace-prob become the mask token and --random-replace-prob a random one, the
    rest stay (a random token is the original 1 time in 2,000, inside the tolerance); token and whole-word decide per
    token (BERT's), span per span (SpanBERT's): each span all mask tokens or none."""
    tokenizer = tokenizers["wordpiece"]
    rows, _ = packed(tokenizer, paragraphs(wikitext_path, DOCUMENTS))
    mask_share, random_share = shares
    settings = {"mask_replace_prob": mask_share, "random_replace_prob": random_share}
    for masking in ("token", "whole-word", "span"):
        kinds = replacements(tokenizer, rows, mask(tokenizer, rows, masking, probability=0.4, **settings))
        counts = Counter(kinds[kinds != ""])
        total = sum(counts.values())
        assert total > 10000
        assert counts["mask"] / total == pytest.approx(mask_share, abs=0.02), masking
        assert counts["random"] / total == pytest.approx(random_share, abs=0.02), masking
        runs = [set(run) for row in kinds for run in _runs(row) if len(run) > 1]
        mixed = sum("mask" in run and len(run) > 1 for run in runs) / len(runs)  # runs part mask tokens, part not
        if masking == "span" or mask_share == 1.0:
            assert mixed < 0.01  # none, but where a random token drawn is the mask token (1 in 2,000)
        else:
            assert mixed > 0.1  # per token: a word's pieces are replaced each its own way


def _runs(row):
    """The runs of masked positions of one row of `replacements`, as lists of their kinds."""
    runs, current = [], []
    for kind in row:
        if kind:
            current.append(kind)
        elif current:
            runs.append(current)
            current = []
    return runs + ([current] if current else [])


def test_masks_are_a_function_of_seed_and_step_alone(tokenizers, wikitext_path):
    """Exact resume and a topology-free order need a batch's masks to depend on (seed, step) only: the same in a
    tf.data pipeline that maps batches in any order, in parallel, as called directly; another step or seed, others."""
    import tensorflow as tf

    from mlm_tpu.mlm.masking import MlmMasker

    tokenizer = tokenizers["unigram"]
    rows, _ = packed(tokenizer, paragraphs(wikitext_path, 120))
    batches = np.stack([rows[:32], rows[32:64]])
    for masking in ("whole-word", "span"):
        masker = MlmMasker(tokenizer, 0.15, 7, 20, masking=masking)
        direct = [digest(masker(step, as_batch(batches[step % 2]))) for step in range(4)]
        assert len(set(direct)) == 4
        steps = tf.data.Dataset.from_tensor_slices(tf.constant([3, 1, 2, 0], tf.int64))
        mapped = steps.map(lambda step: (step, masker(step, as_batch(tf.gather(batches, step % 2)))),
                           num_parallel_calls=4, deterministic=False)
        assert {int(step): digest(batch) for step, batch in mapped} == dict(enumerate(direct))
        again = MlmMasker(tokenizer, 0.15, 8, 20, masking=masking)
        assert digest(again(0, as_batch(batches[0]))) != direct[0]


def test_inspect_shows_words_masked_whole_or_in_part(tokenizers):
    """`inspect`'s view of the masks (tokenizer/encode.marked_words) for each family."""
    from mlm_tpu.tokenizer.encode import marked_words

    for family, tokenizer in tokenizers.items():
        encoding = tokenizer("The unbelievably tall tower stood.")
        word = [position for position, number in enumerate(encoding.word_ids()) if number == 1]
        stood = "stood ." if family == "wordpiece" else "stood."  # WordPiece's "." is a word of its own
        assert marked_words(tokenizer, encoding["input_ids"], set(word)) == (
            f"{tokenizer.cls_token} The ⟦unbelievably⟧ tall tower {stood} {tokenizer.sep_token}")
        part = marked_words(tokenizer, encoding["input_ids"], {word[-1]})
        assert re.search(r" unbeliev[a-z]*⟦[a-z]+⟧ tall ", part) and part.replace("⟦", "").replace("⟧", "") == (
            f"{tokenizer.cls_token} The unbelievably tall tower {stood} {tokenizer.sep_token}"), part


@pytest.mark.parametrize("settings, message", [
    ({"masking": "words"}, "--masking must be one of token, whole-word, span, not 'words'"),
    ({"mask_replace_prob": 0.9, "random_replace_prob": 0.2}, "add up to more than 1"),
])
def test_bad_masking_settings_are_one_line_before_anything_loads(settings, message):
    from mlm_tpu.errors import UserError
    from mlm_tpu.tasks import TrainingConfig, make_task
    from mlm_tpu.training.config import EvaluationConfig

    with pytest.raises(UserError, match=message):
        make_task("mlm").check(TrainingConfig("t", "o", **settings))
    with pytest.raises(UserError, match=message):
        make_task("mlm").prepare_evaluation(EvaluationConfig("m", "e", **settings), None, None, None)


def test_a_tokenizer_that_marks_no_words_cannot_mask_whole_words():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from mlm_tpu.errors import UserError
    from mlm_tpu.tasks import make_task
    from mlm_tpu.training.inspection import InspectionConfig

    backend = Tokenizer(models.WordLevel({"[MASK]": 0, "a": 1, "[UNK]": 2}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, mask_token="[MASK]", unk_token="[UNK]")
    task, shards = make_task("mlm"), SimpleNamespace(length=32)
    task.prepare_inspection(InspectionConfig("d", "t"), tokenizer, shards)  # token masking needs no words
    with pytest.raises(UserError, match="cannot tell how the tokenizer .* marks word starts"):
        task.prepare_inspection(InspectionConfig("d", "t", masking="whole-word"), tokenizer, shards)
