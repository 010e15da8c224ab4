"""The masked LM's kind of split (`shard --task mlm`): documents tokenized, concatenated (each keeps its
[CLS] ... [SEP]) and cut into examples of exactly --max-length tokens (shards/packing.py)."""

from mlm_tpu.shards.format import MLM
from mlm_tpu.shards.kinds import ShardKind
from mlm_tpu.shards.packing import PackedExamples


class MaskedLmKind(ShardKind):
    name = MLM
    examples = "masked-LM examples"
    trained_with = "--task mlm"
    how_to_make = "`python -m mlm_tpu.shard` (--task mlm)"

    def features(self, length, target_length=None) -> dict:
        return {"input_ids": length, "attention_mask": length}

    def holds(self, feature_names) -> bool:
        return "attention_mask" in feature_names and "labels" not in feature_names

    def example_maker(self, config, tokenizer, threads: int) -> PackedExamples:
        return PackedExamples(tokenizer, threads, config.max_length)

    def describe(self, config, maker) -> str:
        return f"{config.max_length}-token examples"


MASKED_LM = MaskedLmKind()
