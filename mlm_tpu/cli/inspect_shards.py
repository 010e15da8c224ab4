"""`python -m mlm_tpu.inspect` (also `mlm-tpu inspect`): the first examples of a split as the model receives them."""

import argparse
import json
from typing import Optional, Sequence

from mlm_tpu.cli.flags import ConfigFlags, add_flag, add_masking_flags, add_verbose_flag
from mlm_tpu.console import import_tensorflow, quiet_libraries
from mlm_tpu.tasks import TASKS
from mlm_tpu.training import inspection
from mlm_tpu.training.inspection import InspectionConfig, examples_as_fed

FLAGS = ConfigFlags(InspectionConfig)


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=inspection.__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    FLAGS.add(parser, "--dataset", required=True, help="A split's folder of shards, local or gs:// (any kind).")
    FLAGS.add(parser, "--tokenizer", "--tokenizer-name-or-path", required=True,
              help="The tokenizer the shards were made with (a folder, or a model folder holding one).")
    FLAGS.add(parser, "--num-examples", type=int, help="How many examples, from the first shard on (default: 3).")
    add_masking_flags(FLAGS, parser, "Masked-LM splits")
    FLAGS.add(parser, "--seed", type=int, help="Seed of the masks or spans (default: 42).")
    FLAGS.add(parser, "--task", choices=TASKS,
              help="Show the split as this task feeds it (default: the first task that trains on its kind: mlm for "
                   "masked-LM splits). electra: the generator's input, the masked tokens, the discriminator's input "
                   "and the tokens the generator replaced, sampled by --model's generator.")
    FLAGS.add(parser, "--model", help="--task electra: the --output-dir of `train.py --task electra` (its generator).")
    FLAGS.add(parser, "--model-config",
              help="Masked-LM splits: show the rows as a model of this shape (a preset or a config.json, as train "
                   "takes it) reads them; a family that keeps each document of a packed row to itself (ModernBERT) "
                   "adds each row's document_ids (default: none).")
    add_flag(parser, "--json", action="store_true",
             help='One JSON object per example on stdout: {feature: {"ids": [...], "text": "..."}} ("text" for '
                  'token ids only).')
    add_verbose_flag(parser)
    return parser


def main(argv: Optional[Sequence[str]] = None, prog: str = "python -m mlm_tpu.inspect") -> None:
    args = build_parser(prog).parse_args(argv)
    import_tensorflow(args.verbose)
    quiet_libraries(args.verbose)
    from mlm_tpu.tasks import plug_in_of_split, shard_kinds

    for number, example in enumerate(examples_as_fed(FLAGS.build(args), shard_kinds(), plug_in_of_split), start=1):
        if args.json:
            print(json.dumps(example, ensure_ascii=False))
            continue
        print(f"=== example {number}")
        for name, feature in example.items():
            ids = " ".join(map(str, feature["ids"]))
            print(f"{name} ({len(feature['ids'])} ids): {feature['text']}\n  ids: {ids}" if "text" in feature else
                  f"{name}: {ids}")
