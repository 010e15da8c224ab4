"""A kind of split is one object (shards/kinds.py) that a product line owns and the registry of tasks gathers: the
sharder and the reader are handed the kinds and know none of them, so a new kind needs no change to shards/."""

import argparse
from pathlib import Path

import numpy as np
import pytest

from mlm_tpu.corpus import CorpusSource
from mlm_tpu.errors import UserError
from mlm_tpu.mlm.shard_kind import MASKED_LM
from mlm_tpu.shards.config import ShardingConfig
from mlm_tpu.shards.kinds import ShardKind, ShardKinds
from mlm_tpu.shards.packing import PackedExamples
from mlm_tpu.shards.sharding import check_config, shard_corpus
from mlm_tpu.tasks import SHARD_KINDS, TASKS, make_task, shard_kinds

FIXTURES = Path(__file__).parent / "fixtures" / "made-by-0.2"


class TwoChoices(PackedExamples):
    """[choices, length] examples, as multiple choice's: each packed row and the same row reversed, each feature
    flattened into one fixed-length feature as the writer takes them."""

    def __init__(self, tokenizer, threads: int, length: int):
        super().__init__(tokenizer, threads, length)
        self.feature_lengths = {"input_ids": 2 * length, "attention_mask": 2 * length}

    def features(self, chunks: np.ndarray):
        choices = np.concatenate([chunks, chunks[:, ::-1]], axis=1)
        return {"input_ids": choices, "attention_mask": np.ones_like(choices)}


class MultipleChoiceKind(ShardKind):
    name = "multiple-choice"
    flags = {"source_prefix": "--source-prefix"}
    examples = "pairs of choices"
    trained_with = "--task multiple-choice"
    how_to_make = "`python -m mlm_tpu.shard --task multiple-choice`"

    def features(self, length, target_length=None) -> dict:
        return {name: None if length is None else 2 * length for name in ("input_ids", "attention_mask")}

    def example_maker(self, config, tokenizer, threads: int) -> TwoChoices:
        return TwoChoices(tokenizer, threads, config.max_length)

    def settings(self, config) -> dict:
        return {"choices": 2}

    def describe(self, config, maker) -> str:
        return f"pairs of {config.max_length}-token choices"


MULTIPLE_CHOICE = MultipleChoiceKind()


@pytest.fixture(scope="module")
def multiple_choice(wikitext_tokenizer, tmp_path_factory):
    """(the split's folder, its manifest) of a multiple-choice split of 16-token choices."""
    config = ShardingConfig(str(wikitext_tokenizer[0]), str(tmp_path_factory.mktemp("multiple-choice") / "out"),
                            task="multiple-choice", max_length=16, shard_size=50,
                            corpus=CorpusSource(builtin_corpus="pydoc-topics", split="validation"))
    return f"{config.output_dir}/validation", shard_corpus(config, ShardKinds([MULTIPLE_CHOICE], {}))


def test_a_kind_defined_outside_shards_is_sharded_with_its_own_features_and_settings(multiple_choice):
    _, manifest = multiple_choice
    assert manifest["features"] == {name: {"dtype": "int64", "length": 32} for name in ("input_ids", "attention_mask")}
    assert manifest["settings"]["task"] == "multiple-choice" and manifest["settings"]["choices"] == 2
    assert manifest["records"] == manifest["corpus_tokens"] // 16 > 50
    assert len(manifest["shards"]) == -(-manifest["records"] // 50)


def config(**settings) -> ShardingConfig:
    return ShardingConfig("tokenizer", "out", **settings)


@pytest.mark.parametrize("settings, message", [
    ({"task": "mlm", "pair_column": "second"}, "--pair-column is for --task sequence-classification, not mlm"),
    ({"task": "mlm", "target_column": "label"},
     "--target-column is for --task text2text, sequence-classification, token-classification or sentence-embedding, "
     "not mlm"),
    ({"task": "classification", "input_columns": ("q",), "target_column": "a", "noise_density": 0.3},
     "--noise-density is for --task span-corruption, not text2text"),
    ({"task": "token-classification", "input_columns": ("words",), "target_column": "tags",
      "problem_type": "regression"}, "--problem-type is for --task sequence-classification, not token-classification"),
    ({"task": "sequence-classification", "input_columns": ("text",), "target_column": "label",
      "source_prefix": "quality:"}, "--source-prefix is for --task text2text, not sequence-classification"),
    ({"task": "multiple choice"}, "--task must be one of mlm, text2text, span-corruption, sequence-classification, "
                                  "token-classification, sentence-embedding, not 'multiple choice'"),
    ({"task": "sentence-embedding", "input_columns": ("query",), "target_column": "positive", "pair_column": "x"},
     "--pair-column is for --task sequence-classification, not sentence-embedding"),
])
def test_a_flag_only_other_kinds_take_is_refused_by_one_check_that_names_them(settings, message):
    with pytest.raises(UserError, match=f"^{message}"):
        check_config(config(**settings), shard_kinds())


def test_flags_at_their_defaults_or_empty_are_not_given():
    checked, kind = check_config(config(task="generation", input_columns=["q"], target_column="a", labels=[],
                                        noise_density=0.15, mean_noise_span_length=3), shard_kinds())
    assert (checked.task, kind.name) == ("text2text", "text2text")


def test_every_task_and_every_shard_command_choice_has_a_kind():
    from mlm_tpu.cli.shard import build_parser

    choices = next(action.choices for action in build_parser()._actions if action.dest == "config.task")
    kinds = shard_kinds()
    assert [kinds.of(argparse.Namespace(task=choice)).name for choice in choices] == [
        "mlm", "text2text", "text2text", "text2text", "span-corruption", "sequence-classification",
        "token-classification", "sentence-embedding"]
    assert {make_task(name).shard_kind for name in TASKS} == set(SHARD_KINDS) == set(kinds.kinds)


def test_a_kind_defined_outside_shards_is_read_back_with_its_own_features_and_words(multiple_choice,
                                                                                     wikitext_tokenizer):
    from transformers import AutoTokenizer

    from mlm_tpu.shards.pipeline import evaluation_batches
    from mlm_tpu.shards.reading import find_shards

    folder, manifest = multiple_choice
    kinds = ShardKinds([*shard_kinds().kinds.values(), MULTIPLE_CHOICE], {})
    shards = find_shards(folder, kinds, "multiple-choice", MULTIPLE_CHOICE.features(16))
    assert shards.kind is MULTIPLE_CHOICE and shards.features == {"input_ids": 32, "attention_mask": 32}
    assert shards.records == manifest["records"]
    tokenizer = AutoTokenizer.from_pretrained(str(wikitext_tokenizer[0]))
    batch = next(iter(evaluation_batches(shards, 4, None, vocab_size=len(tokenizer))))
    assert {name: tuple(values.shape) for name, values in batch.items()} == {"input_ids": (4, 32),
                                                                            "attention_mask": (4, 32)}
    choices = batch["input_ids"].numpy()
    assert (choices[:, 16:] == choices[:, 15::-1]).all()  # the second choice is the first reversed, as written
    assert find_shards(folder, kinds, None, None).kind is MULTIPLE_CHOICE  # what inspection and fine-tuning ask
    with pytest.raises(UserError, match=f"^--train-dataset: the shards in {folder} are pairs of choices, which train "
                                        "with --task multiple-choice; make shards for this task with "
                                        r"`python -m mlm_tpu.shard` \(--task mlm\)$"):
        find_shards(folder, kinds, "mlm", MASKED_LM.features(16))
    masked_lm = str(FIXTURES / "shards" / "validation")
    with pytest.raises(UserError, match="are masked-LM examples, which train with --task mlm; make shards for this "
                                        "task with `python -m mlm_tpu.shard --task multiple-choice`$"):
        find_shards(masked_lm, kinds, "multiple-choice", MULTIPLE_CHOICE.features(None))
