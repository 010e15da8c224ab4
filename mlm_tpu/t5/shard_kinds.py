"""T5's kinds of split: text-to-text rows (`shard --task text2text`, for classification and generation: one
input/target example per row, text2text_rows.py) and span-corruption rows (`--task span-corruption`, pretraining:
documents packed into raw rows of the length whose corrupted inputs are --max-length tokens)."""

from mlm_tpu.errors import UserError
from mlm_tpu.shards.format import SPAN_CORRUPTION, TEXT2TEXT, span_corruption_settings
from mlm_tpu.shards.kinds import ShardKind
from mlm_tpu.shards.packing import RawRows
from mlm_tpu.shards.span_lengths import (SpanLengths, TooFewSentinels, first_sentinel_id, longest_inputs_within,
                                         span_lengths)
from mlm_tpu.t5.text2text_rows import Text2TextExamples

T5_TOKENIZER = "make a T5 tokenizer with `python -m mlm_tpu.tokenizer train --template t5`"


def check_sentinels(tokenizer, lengths: SpanLengths, where: str, other_tokenizer: str, fewer_spans: str,
                    length_now: str) -> None:
    """That the tokenizer has a sentinel for every noise span of `lengths`' rows, or one line: `where` names it,
    `other_tokenizer` says which to use instead, `fewer_spans` how to make fewer, `length_now` the length in use."""
    try:
        first_sentinel_id(tokenizer, lengths)
    except TooFewSentinels as error:
        if not error.have:
            raise UserError(f"{where}: {error}; {other_tokenizer}") from None
        longest = longest_inputs_within(error.have, lengths.noise_density, lengths.mean_noise_span_length)
        raise UserError(f"{where}: {error}; {fewer_spans}: a --max-length of at most {longest} ({length_now}), a "
                        f"lower --noise-density (not {lengths.noise_density}) or a longer --mean-noise-span-length "
                        f"(not {lengths.mean_noise_span_length})") from None
    except ValueError as error:
        raise UserError(f"{where}: {error}; {other_tokenizer}") from None


class Text2TextKind(ShardKind):
    name = TEXT2TEXT
    flags = {"input_columns": "--input-column", "target_column": "--target-column", "source_prefix": "--source-prefix"}
    token_id_features = ("input_ids", "labels")
    examples = "text-to-text examples (they hold labels)"
    trained_with = "--task classification or --task generation"
    how_to_make = "`python -m mlm_tpu.shard --task text2text`"

    def features(self, length, target_length=None) -> dict:
        return {"input_ids": length, "attention_mask": length, "labels": target_length}

    def holds(self, feature_names) -> bool:
        return "labels" in feature_names

    def check(self, config) -> None:
        if not config.input_columns or not config.target_column:
            raise UserError("--task text2text needs --input-column (one or more) and --target-column, e.g. "
                            "--input-column question --target-column answer")
        if config.target_column in config.input_columns:
            raise UserError(f"--target-column '{config.target_column}' is also an --input-column; the model would "
                            "see the answer in its input")

    def example_maker(self, config, tokenizer, threads: int) -> Text2TextExamples:
        return Text2TextExamples(tokenizer, threads, config.input_columns, config.target_column, config.source_prefix,
                                 config.max_length, config.max_target_length)

    def settings(self, config) -> dict:
        return {"input_columns": list(config.input_columns), "target_column": config.target_column,
                "source_prefix": config.source_prefix, "max_target_length": config.max_target_length}

    def describe(self, config, maker) -> str:
        return f"examples of {config.max_length} input and {config.max_target_length} target tokens"


class SpanCorruptionKind(ShardKind):
    name = SPAN_CORRUPTION
    flags = {"noise_density": "--noise-density", "mean_noise_span_length": "--mean-noise-span-length"}
    examples = "raw rows for span corruption"
    trained_with = "--task span-corruption"
    how_to_make = "`python -m mlm_tpu.shard --task span-corruption` with a T5 tokenizer"

    def features(self, length, target_length=None) -> dict:
        """Raw rows: --max-length is checked against the inputs they are corrupted into, not against them."""
        return {"input_ids": length}

    def holds(self, feature_names) -> bool:
        return "attention_mask" not in feature_names and "labels" not in feature_names

    @staticmethod
    def lengths(config) -> SpanLengths:
        """The raw rows whose corrupted inputs are --max-length tokens (T5's arithmetic)."""
        try:
            return span_lengths(config.max_length, config.noise_density, config.mean_noise_span_length)
        except ValueError as error:
            raise UserError(f"--task span-corruption: {error}") from None

    def example_maker(self, config, tokenizer, threads: int) -> RawRows:
        lengths = self.lengths(config)
        check_sentinels(tokenizer, lengths, f"--tokenizer {config.tokenizer}", T5_TOKENIZER, "make fewer spans",
                        f"not {config.max_length}")
        return RawRows(tokenizer, threads, lengths.raw_length)

    def settings(self, config) -> dict:
        return span_corruption_settings(self.lengths(config))

    def describe(self, config, maker) -> str:
        return (f"{maker.max_length}-token raw rows (corrupted while training into {config.max_length}-token "
                "inputs)")


TEXT2TEXT_ROWS = Text2TextKind()
SPAN_CORRUPTION_ROWS = SpanCorruptionKind()
