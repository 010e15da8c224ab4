"""The encoder line's kinds of split: labelled rows for sequence classification (`shard --task
sequence-classification`: a text, or a pair, and its label) and token classification (`--task token-classification`:
a row's words and a tag per word), made by labelled_rows.py after a first pass that checks every row and finds the
label names."""

import dataclasses

from mlm_tpu.console import log
from mlm_tpu.encoder.labelled_rows import PROBLEM_TYPES, SequenceExamples, TokenExamples, find_labels
from mlm_tpu.errors import UserError
from mlm_tpu.shards.format import REGRESSION, SEQUENCE_CLASSIFICATION, TOKEN_CLASSIFICATION
from mlm_tpu.shards.kinds import ShardKind


class LabelledKind(ShardKind):
    """What the two kinds of labelled rows share: one --input-column and a --target-column, the labels found."""

    token_level: bool
    flags = {"input_columns": "--input-column", "target_column": "--target-column", "labels": "--labels"}
    labelled = True

    @property
    def trained_with(self) -> str:
        return f"--task {self.name}"

    @property
    def how_to_make(self) -> str:
        return f"`python -m mlm_tpu.shard --task {self.name}`"

    def features(self, length, target_length=None) -> dict:
        """Its inputs, and a label per example (sequences) or per token (tokens)."""
        return {"input_ids": length, "attention_mask": length, "token_type_ids": length,
                "labels": length if self.token_level else 1}

    def check(self, config) -> None:
        if len(config.input_columns) != 1 or not config.target_column:
            example = ("--input-column tokens --target-column ner_tags" if self.token_level else
                       "--input-column sentence --target-column label (and --pair-column sentence2 for pairs)")
            raise UserError(f"--task {self.name} needs one --input-column (the "
                            f"{'words' if self.token_level else 'text'}) and --target-column (the "
                            f"{'tags' if self.token_level else 'label'}), e.g. {example}")
        if config.problem_type and config.problem_type not in PROBLEM_TYPES:
            raise UserError(f"--problem-type must be one of {', '.join(PROBLEM_TYPES)}, not '{config.problem_type}'")
        if config.problem_type == REGRESSION and config.labels:
            raise UserError("--labels names classes; a regression split's labels are scores: drop one of them")
        columns = [column for column in (config.input_columns[0], config.pair_column, config.target_column) if column]
        if len(set(columns)) < len(columns):
            raise UserError(f"--input-column, --pair-column and --target-column must be different columns, not "
                            f"{', '.join(columns)}")
        if len(set(config.labels)) < len(config.labels):
            raise UserError(f"--labels names a label twice: {' '.join(config.labels)}")

    def with_corpus_facts(self, config, corpus):
        """The config with the split's problem type and label names (--labels, else found), after a first pass over
        the split that checks every row before anything is written."""
        log(f"Checking the rows and reading the labels ('{config.target_column}') of {corpus.name()}")
        columns = (config.input_columns[0], *([config.pair_column] if config.pair_column else []))
        problem_type, names = find_labels(corpus, self.name, columns, config.target_column, config.problem_type,
                                          config.labels)
        if problem_type == REGRESSION:
            log("The labels are numbers, some not whole: a regression split (pass --problem-type "
                "single_label_classification if they are classes)" if not config.problem_type else "A regression split")
        else:
            shown = ", ".join(names[:20]) + (f", ... ({len(names)} in all)" if len(names) > 20 else "")
            log(f"{len(names)} label{'s' * (len(names) != 1)}: {shown}")
        return dataclasses.replace(config, problem_type=None if self.token_level else problem_type,
                                   labels=tuple(names))

    def settings(self, config) -> dict:
        return {"input_column": config.input_columns[0], "target_column": config.target_column,
                "labels": list(config.labels)}


class SequenceClassificationKind(LabelledKind):
    name = SEQUENCE_CLASSIFICATION
    token_level = False
    examples = "texts (or pairs) with a label each"
    flags = {**LabelledKind.flags, "pair_column": "--pair-column", "problem_type": "--problem-type"}

    def example_maker(self, config, tokenizer, threads: int) -> SequenceExamples:
        return SequenceExamples(tokenizer, threads, config.max_length, config.input_columns[0], config.pair_column,
                                config.target_column, config.problem_type, config.labels)

    def settings(self, config) -> dict:
        return {**super().settings(config), "pair_column": config.pair_column, "problem_type": config.problem_type}

    def describe(self, config, maker) -> str:
        return (f"{config.max_length}-token {'pairs' if config.pair_column else 'texts'} with "
                f"{'a score' if config.problem_type == REGRESSION else 'a label'} each")


class TokenClassificationKind(LabelledKind):
    name = TOKEN_CLASSIFICATION
    token_level = True
    examples = "words with a tag each"

    def example_maker(self, config, tokenizer, threads: int) -> TokenExamples:
        return TokenExamples(tokenizer, threads, config.max_length, config.input_columns[0], config.target_column,
                             config.labels)

    def describe(self, config, maker) -> str:
        return f"{config.max_length}-token rows of tagged words"


SEQUENCE_CLASSIFICATION_ROWS = SequenceClassificationKind()
TOKEN_CLASSIFICATION_ROWS = TokenClassificationKind()
