"""The sentence-embedding line's kind of split: (query, positive, hard negatives) rows, made by pairs.py after a
first pass that checks every row."""

from mlm_tpu.console import log
from mlm_tpu.embedding.pairs import PairExamples, check_rows, feature_names
from mlm_tpu.errors import UserError
from mlm_tpu.shards.kinds import ShardKind

SENTENCE_EMBEDDING = "sentence-embedding"


class SentenceEmbeddingKind(ShardKind):
    name = SENTENCE_EMBEDDING
    flags = {"input_columns": "--input-column", "target_column": "--target-column",
             "negative_columns": "--negative-columns"}
    token_id_features = ("input_ids", "positive_input_ids", "negative_input_ids")
    examples = "queries with their positive (and hard negatives)"
    trained_with = f"--task {SENTENCE_EMBEDDING}"
    how_to_make = f"`python -m mlm_tpu.shard --task {SENTENCE_EMBEDDING}`"

    def features(self, length, target_length=None) -> dict:
        """Each text's inputs; whatever lengths the split holds (the negatives' depends on how many a row has)."""
        return {name: None for name in feature_names()}

    def holds(self, feature_names_found) -> bool:
        return "positive_input_ids" in feature_names_found

    def columns(self, config) -> tuple:
        return (config.input_columns[0], config.target_column, *config.negative_columns)

    def check(self, config) -> None:
        if len(config.input_columns) != 1 or not config.target_column:
            raise UserError(f"--task {self.name} needs one --input-column (the query) and --target-column (its "
                            "positive), e.g. --input-column query --target-column positive (and --negative-columns "
                            "negative for hard negatives)")
        columns = self.columns(config)
        if len(set(columns)) < len(columns):
            raise UserError(f"--input-column, --target-column and --negative-columns must be different columns, not "
                            f"{', '.join(columns)}")

    def with_corpus_facts(self, config, corpus):
        log(f"Checking the rows of {corpus.name()} (each needs a query, a positive"
            f"{' and its hard negatives' if config.negative_columns else ''})")
        check_rows(corpus, self.columns(config))
        return config

    def example_maker(self, config, tokenizer, threads: int) -> PairExamples:
        return PairExamples(tokenizer, threads, config.max_length, self.columns(config))

    def settings(self, config) -> dict:
        return {"input_column": config.input_columns[0], "target_column": config.target_column,
                "negative_columns": list(config.negative_columns)}

    def describe(self, config, maker) -> str:
        negatives = len(config.negative_columns)
        return (f"{config.max_length}-token queries and positives"
                f"{f' with {negatives} hard negative' + 's' * (negatives != 1) if negatives else ''}")


SENTENCE_EMBEDDING_ROWS = SentenceEmbeddingKind()
