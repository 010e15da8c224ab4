"""`python -m mlm_tpu.export` (also `mlm-tpu export`): a model folder -> one every library loads."""

import argparse
from typing import Optional, Sequence

from mlm_tpu.cli.flags import ConfigFlags, add_verbose_flag
from mlm_tpu.console import import_tensorflow, quiet_libraries
from mlm_tpu.model_folder import export
from mlm_tpu.model_folder.export import ExportConfig

FLAGS = ConfigFlags(ExportConfig)


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=export.__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    FLAGS.add(parser, "--model", "--model-name-or-path", required=True,
              help="A TensorFlow save_pretrained folder: `python train.py`'s --output-dir, or one holding tf_model.h5, "
                   "config.json and the tokenizer files (as the 🤗 TPU example saves them); or a ModernBERT folder, in "
                   "transformers 5's layout already: exported as it is, its weights checked, its card refreshed.")
    FLAGS.add(parser, "--output-dir",
              help="Where the exported folder goes (default: --model itself, the files added beside the TensorFlow "
                   "ones). Other files there are left alone; files of the names it writes are refused, unless "
                   "--overwrite; a folder holding another model is refused.")
    FLAGS.add(parser, "--overwrite", action="store_true",
              help="Replace what an earlier mlm_tpu command wrote there (an earlier export, the trainer's weights and "
                   "card). A file mlm_tpu did not write (or that was changed since) is never replaced, even so.")
    FLAGS.add(parser, "--merge", action="store_true",
              help="--model is a LoRA or IA3 adapter folder (`train.py --delta lora|ia3`): fold the delta into its "
                   "base model's weights and write the full model (tf_model.h5, model.safetensors, card) into "
                   "--output-dir (required). Prompt, prefix and bottleneck adapters add to the model: not mergeable.")
    FLAGS.add(parser, "--base-model",
              help="With --merge: the adapter's base model, in place of the one its adapter_config.json names.")
    FLAGS.add(parser, "--hub-model-id", help="Then push the exported folder to this 🤗 Hub repo (e.g. me/my-model).")
    add_verbose_flag(parser)
    return parser


def main(argv: Optional[Sequence[str]] = None, prog: str = "python -m mlm_tpu.export") -> None:
    args = build_parser(prog).parse_args(argv)
    config = FLAGS.build(args)
    import_tensorflow(args.verbose)
    quiet_libraries(args.verbose)
    from mlm_tpu.tasks import export_saved_model

    export_saved_model(config)
