"""What the model is fed (`python -m mlm_tpu.inspect`): the first examples of a split, after the transform its task
applies while training (masking, span corruption, or none), as ids and as text; a masked LM's masks also as the
text with its masked pieces in brackets, which shows words masked whole (⟦unbelievably⟧) or in part (un⟦believ⟧ably).

Span corruption's inputs and targets are hard to picture from a description: `<extra_id_0>` stands in
the input where the target says what was there. Reading a few examples settles it, and shows a
wrong tokenizer or a wrong kind of split at once. The transform is the one the task's plug-in makes
for training, so what is shown is what the model gets.
"""

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Dict, List, Optional

from mlm_tpu.configuration import check_ranges, setting
from mlm_tpu.errors import UserError
from mlm_tpu.shards.format import IGNORE_INDEX
from mlm_tpu.training.settings import MaskingSettings

if TYPE_CHECKING:  # task.py reads shards, which loads TensorFlow: `inspect --help` needs neither
    from mlm_tpu.shards.kinds import ShardKinds
    from mlm_tpu.training.task import Task


@dataclass
class InspectionConfig(MaskingSettings):
    """What `python -m mlm_tpu.inspect` shows (a masked LM's masks: as MaskingSettings' fields say)."""

    dataset: str  # a split's folder (local or gs://)
    tokenizer: str  # the tokenizer the shards were made with
    num_examples: int = setting(3, low=1, high=1000)
    seed: int = setting(42, low=0)  # of the masks or spans (training draws from seed + input pipeline)
    task: Optional[str] = None  # whose transform is shown (None: the first task that trains on the split's kind)
    model: Optional[str] = None  # --task electra: the output folder whose generator makes the replacements
    model_config: Optional[str] = None  # a masked LM's shape (preset or config.json): its family's packing is shown


def examples_as_fed(config: InspectionConfig, shard_kinds: "ShardKinds",
                    plug_in_of_split: Callable[[str, Optional[str]], "Task"]) -> List[Dict[str, dict]]:
    """The first `num_examples` examples, each {feature: {"ids": [...], "text": "..."}} after the transform of the
    task that trains on the split (`plug_in_of_split(kind, task)` gives its plug-in: mlm_tpu.tasks.plug_in_of_split;
    `shard_kinds`, the registry's kinds of split, say which kind the split is: mlm_tpu.tasks.shard_kinds()),
    and what the task's model adds to it (ELECTRA's replacements); token ids (the task's `token_features`) also as
    text, an encoder's labels by name, other features (token types, the sparse masked-LM head's masked_lm_positions,
    targets_left_out) as numbers; labels only where they take a loss. A masked LM's examples (and ELECTRA's) add
    "masked": the masked positions, and the original text with the masked pieces in brackets
    (tokenizer/encode.marked_words)."""
    from mlm_tpu.shards.pipeline import evaluation_batches
    from mlm_tpu.shards.reading import check_tokenizer, find_shards
    from mlm_tpu.tokenizer.encode import marked_words
    from mlm_tpu.tokenizer.load import load_tokenizer

    check_ranges(config)
    shards = find_shards(config.dataset, shard_kinds, None, None, "--dataset")
    tokenizer = load_tokenizer(config.tokenizer)
    check_tokenizer(shards, tokenizer, "--dataset", f"--tokenizer {config.tokenizer}")
    task = plug_in_of_split(shards.kind.name, config.task)
    if bool(config.model) != task.inspects_with_a_model:
        raise UserError(f"--task {task.name} shows what its trained model adds to the examples: give --model, the "
                        "--output-dir of its training run" if task.inspects_with_a_model else
                        f"--task {task.name} shows a split without a model: drop --model")
    task.prepare_inspection(config, tokenizer, shards)
    transform = task.make_transform(tokenizer)(config.seed)
    count = min(config.num_examples, shards.records)
    batch = task.inspected(next(iter(evaluation_batches(shards, count, transform, len(tokenizer)))))
    label_names = (shards.manifest or {}).get("settings", {}).get("labels") if shards.kind.labelled else None
    examples = []
    for row in range(count):
        example = {}
        for name, values in batch.items():
            # ints, without the positions that hold no token (unscored labels); a regression's scores stay floats
            ids = [value for value in values[row].numpy().tolist() if value != IGNORE_INDEX]
            if name in task.token_features:
                example[name] = {"ids": ids, "text": tokenizer.decode(ids, skip_special_tokens=False)}
            elif name == "labels":  # an encoder's labels, by name when they have names
                example[name] = {"ids": ids, "text": " ".join(label_names[value] if label_names else str(value)
                                                              for value in ids)}
            elif name != "attention_mask":  # token types, the sparse head's positions: numbers
                example[name] = {"ids": ids}
        masks = task.masks({name: values[row].numpy().tolist() for name, values in batch.items()})
        if masks is not None:
            original = batch["input_ids"][row].numpy().tolist()
            for position, token in masks.items():
                original[position] = token
            example["masked"] = {"ids": sorted(masks), "text": marked_words(tokenizer, original, masks)}
        examples.append(example)
    return examples
