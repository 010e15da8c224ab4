"""What the model is fed (`python -m mlm_tpu.inspect`): the first examples of a split, after the transform its task
applies while training (masking, span corruption, or none), as ids and as text.

Span corruption's inputs and targets are hard to picture from a description: `<extra_id_0>` stands in
the input where the target says what was there. Reading a few examples settles it, and shows a
wrong tokenizer or a wrong kind of split at once. The transform is the one the task's plug-in makes
for training, so what is shown is what the model gets.
"""

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Dict, List, Optional

from mlm_tpu.configuration import check_ranges, setting
from mlm_tpu.shards.format import ENCODER_KINDS, IGNORE_INDEX

if TYPE_CHECKING:  # task.py reads shards, which loads TensorFlow: `inspect --help` needs neither
    from mlm_tpu.training.task import Task

TOKEN_FEATURES = ("input_ids", "labels")  # shown as text too


@dataclass
class InspectionConfig:
    """What `python -m mlm_tpu.inspect` shows."""

    dataset: str  # a split's folder (local or gs://)
    tokenizer: str  # the tokenizer the shards were made with
    num_examples: int = setting(3, low=1, high=1000)
    mlm_probability: Optional[float] = setting(None, low=0, high=1, low_open=True, high_open=True)  # mlm: 0.15
    seed: int = setting(42, low=0)  # of the masks or spans (training draws from seed + input pipeline)


def examples_as_fed(config: InspectionConfig, plug_in_of_split: Callable[[str], "Task"]) -> List[Dict[str, dict]]:
    """The first `num_examples` examples, each {feature: {"ids": [...], "text": "..."}} after the transform of the
    task that trains on the split (`plug_in_of_split(kind)` gives its plug-in: mlm_tpu.tasks.plug_in_of_split);
    labels show only the positions that take a loss; features that are not tokens (the sparse masked-LM head's
    masked_lm_positions, targets_left_out) have ids and no text."""
    from mlm_tpu.shards.pipeline import evaluation_batches
    from mlm_tpu.shards.reading import check_tokenizer, find_shards
    from mlm_tpu.tokenizer.load import load_tokenizer

    check_ranges(config)
    shards = find_shards(config.dataset, None, None, "--dataset")
    tokenizer = load_tokenizer(config.tokenizer)
    check_tokenizer(shards, tokenizer, "--dataset", f"--tokenizer {config.tokenizer}")
    task = plug_in_of_split(shards.kind)
    task.prepare_inspection(config, tokenizer, shards)
    transform = task.make_transform(tokenizer)(config.seed)
    count = min(config.num_examples, shards.records)
    batch = next(iter(evaluation_batches(shards, count, transform, len(tokenizer))))
    label_names = (shards.manifest or {}).get("settings", {}).get("labels") if shards.kind in ENCODER_KINDS else None
    examples = []
    for row in range(count):
        example = {}
        for name, values in batch.items():
            ids = values[row].numpy().tolist()  # ints; a regression's scores stay floats
            if name == "labels":
                ids = [value for value in ids if value != IGNORE_INDEX]
            if name in TOKEN_FEATURES and not (name == "labels" and shards.kind in ENCODER_KINDS):
                example[name] = {"ids": ids, "text": tokenizer.decode(ids, skip_special_tokens=False)}
            elif name == "labels":  # an encoder's labels, by name when they have names
                example[name] = {"ids": ids, "text": " ".join(label_names[value] if label_names else str(value)
                                                              for value in ids)}
            elif name != "attention_mask":  # token types, the sparse head's positions: numbers
                example[name] = {"ids": ids}
        examples.append(example)
    return examples
