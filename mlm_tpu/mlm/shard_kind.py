"""The masked LM's kind of split (`shard --task mlm`): documents tokenized, concatenated (each keeps its
[CLS] ... [SEP]) and cut into examples of exactly --max-length tokens (shards/packing.py)."""

from mlm_tpu.shards.format import MLM
from mlm_tpu.shards.kinds import ShardKind
from mlm_tpu.shards.packing import PackedExamples


class MaskedLmKind(ShardKind):
    name = MLM

    def example_maker(self, config, tokenizer, threads: int) -> PackedExamples:
        return PackedExamples(tokenizer, threads, config.max_length)

    def describe(self, config, maker) -> str:
        return f"{config.max_length}-token examples"


MASKED_LM = MaskedLmKind()
