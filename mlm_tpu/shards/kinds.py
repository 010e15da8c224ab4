"""A kind of split (the shard command's --task) is one object, as a seqio Task is: the flags it takes beyond every
kind's and their checks, the first pass it needs over the corpus, its example maker (which says the features and
their lengths), what its manifest records of its settings, and its words for the log; and for reading a split back,
the features it holds and their lengths, which hold token ids, whether feature names look like its examples (shards
without a manifest), and its words for a split of the wrong kind.

A product line owns its kinds (mlm/shard_kind.py, t5/shard_kinds.py, encoder/shard_kinds.py); the registry of
tasks (tasks.py) gathers them into `ShardKinds`, which the shard command hands to the sharder, and a task's plug-in
to the reader of splits (reading.py, pipeline.py). Neither imports a product line, so a new kind of split is a
module in its product line and a line in the registry.
"""

import dataclasses
import os
from typing import Collection, Dict, Mapping, Optional, Sequence, Tuple

from mlm_tpu.errors import UserError
from mlm_tpu.shards.packing import ExampleMaker


class ShardKind:
    """The base of every kind of split; a product line's subclass fills it in."""

    name: str
    # the ShardingConfig fields this kind reads beyond every kind's (the others' are refused), and their flags
    flags: Mapping[str, str] = {}
    token_id_features: Tuple[str, ...] = ("input_ids",)  # features of token ids (checked against the vocabulary)
    labelled: bool = False  # its manifest's settings name its labels ("labels"), which inspection shows by name
    # its words for a split of the wrong kind: what its examples are, which train --task trains on them, how to make
    # them ("the shards in X are <examples>, which train with <trained_with>; make shards ... with <how_to_make>")
    examples: str
    trained_with: str
    how_to_make: str

    def features(self, length: Optional[int], target_length: Optional[int] = None) -> Dict[str, Optional[int]]:
        """The features its examples hold, and their lengths for a --max-length and --max-target-length (None:
        whatever the shards hold)."""
        raise NotImplementedError

    def holds(self, feature_names: Collection[str]) -> bool:
        """Whether examples with these features are of this kind, for shards without a manifest (older mlm_tpu's
        and the reference sharder's): at most one kind says so of any features."""
        return False

    def check(self, config) -> None:
        """The values of its flags, checked (one error line each) before anything is read."""

    def with_corpus_facts(self, config, corpus):
        """The config with what a first pass over the corpus finds (nothing, but for labelled rows), the same for
        every worker of a Beam job."""
        return config

    def example_maker(self, config, tokenizer, threads: int) -> ExampleMaker:
        """What turns corpus batches into this kind's examples."""
        raise NotImplementedError

    def settings(self, config) -> Dict[str, object]:
        """What the manifest records of this kind's own settings: a re-run with others must not mix into the split."""
        return {}

    def describe(self, config, maker: ExampleMaker) -> str:
        """What the job writes, in words, for its log lines."""
        raise NotImplementedError


def example_maker(kind: ShardKind, config, tokenizer) -> ExampleMaker:
    """`kind`'s example maker with --num-workers tokenizer threads (every core when None)."""
    return kind.example_maker(config, tokenizer, config.num_workers or os.cpu_count() or 1)


def _listed(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


class ShardKinds:
    """The kinds of split the sharder makes, by name, and the other names they go by (the trainer's words)."""

    def __init__(self, kinds: Sequence[ShardKind], aliases: Mapping[str, str]):
        self.kinds = {kind.name: kind for kind in kinds}
        self.aliases = dict(aliases)

    def of(self, config) -> ShardKind:
        """The kind `config.task` names (or one of the other names it goes by)."""
        name = self.aliases.get(config.task, config.task)
        if name not in self.kinds:
            raise UserError(f"--task must be one of {', '.join(self.kinds)}, not '{config.task}'")
        return self.kinds[name]

    def holding(self, feature_names: Collection[str]) -> ShardKind:
        """The kind of split that holds examples with these features (for shards without a manifest): the one whose
        examples they are (among the registry's kinds, always one)."""
        return next(kind for kind in self.kinds.values() if kind.holds(feature_names))

    def of_manifest(self, manifest: dict) -> ShardKind:
        """The kind a manifest says its split is (older manifests: from the features)."""
        return self.kinds.get(manifest.get("settings", {}).get("task")) or self.holding(manifest["features"])

    def refuse_other_flags(self, config, kind: ShardKind) -> None:
        """One check for every kind: a flag given (off its default) that `kind` does not take but other kinds do is
        one line naming them."""
        for field in dataclasses.fields(config):
            takers = [other for other in self.kinds.values() if field.name in other.flags]
            value = getattr(config, field.name)
            given = value != field.default and bool(value or field.default)  # () and [] alike are not given
            if takers and field.name not in kind.flags and given:
                raise UserError(f"{takers[0].flags[field.name]} is for --task "
                                f"{_listed([other.name for other in takers])}, not {kind.name}")
