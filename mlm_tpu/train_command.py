"""`python train.py`: pretrain a masked language model (RoBERTa) from scratch, or fine-tune T5, on TFRecord shards.

--head mlm (default): RoBERTa from scratch on masked-LM shards. --head t5 --task classification|
generation: TFT5ForConditionalGeneration (a preset from scratch, or --model-name-or-path) on
text-to-text shards (`python -m mlm_tpu.shard --task text2text`), scored on the validation
shards each epoch; the output folder keeps the best epoch.

Runs on a TPU (--tpu), on every GPU (MirroredStrategy) or on the CPU. Flags follow the 🤗 TPU
language-modeling example; dashes and underscores are both accepted. A preempted run resumes
from its backup when started again with the same command.
"""

import argparse
import sys
from typing import Optional, Sequence

from mlm_tpu.cli import add_flag
from mlm_tpu.hardware_flags import add_hardware_flags
from mlm_tpu.model_config import PRESETS, T5_PRESETS


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python train.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    hardware = add_hardware_flags(parser)
    add_flag(hardware, "--steps-per-execution", type=int, default=1,
             help="Training steps per call into the device (default: 1; 100s suit TPUs).")

    head = parser.add_argument_group("head")
    add_flag(head, "--head", choices=("mlm", "t5"), default="mlm",
             help="mlm: pretrain RoBERTa with masked-LM on masked-LM shards (default). t5: train "
                  "TFT5ForConditionalGeneration on text-to-text shards (needs --task).")
    add_flag(head, "--task", choices=("classification", "generation"), default=None,
             help="With --head t5. classification: each target is one class token, predicted in one decoder step; "
                  "scored by accuracy and per-class precision/recall/F1. generation: free text from XLA-compiled "
                  "generate; scored by exact match, token F1 and ROUGE-1/2/L.")
    add_flag(head, "--labels", nargs="+", default=None, metavar="LABEL",
             help="Classification: the class names, each one token of the tokenizer (default: the targets the "
                  "training shards' manifest counted).")
    add_flag(head, "--max-new-tokens", type=int, default=None,
             help="Generation: tokens generated per example in validation (default: the shards' target length).")
    add_flag(head, "--metric-for-best-model", default=None,
             help="With --head t5 and --eval-dataset: the validation score whose best epoch the output folder keeps "
                  "(classification: accuracy (default), macro_f1; generation: exact_match, f1, rouge1, rouge2, "
                  "rougeL (default)).")

    data = parser.add_argument_group("data")
    add_flag(data, "--train-dataset", required=True, help="Folder (local or gs://) of training shards.")
    add_flag(data, "--eval-dataset", default=None, help="Folder of validation shards, evaluated each epoch.")
    add_flag(data, "--tokenizer", "--tokenizer-name-or-path", default=None,
             help="The tokenizer the shards were made with (folder or Hub name); with --head t5 it defaults to "
                  "--model-name-or-path's.")
    add_flag(data, "--max-length", type=int, default=None,
             help="Tokens per example (per input, with --head t5), checked against the shards (default: what they "
                  "hold).")
    add_flag(data, "--max-target-length", type=int, default=None,
             help="With --head t5: tokens per target, checked against the shards (default: what they hold).")
    add_flag(data, "--mlm-probability", type=float, default=None,
             help="With --head mlm: share of tokens masked (default: 0.15).")
    add_flag(data, "--shuffle-buffer-size", type=int, default=2**18, help="Examples in the shuffle buffer "
             "(default: 262144).")
    add_flag(data, "--seed", type=int, default=42, help="Seed of weights, data order and masks (default: 42).")

    model = parser.add_argument_group("model and optimisation")
    add_flag(model, "--model-config", "--pretrained-model-config", default=None,
             help=f"Train from scratch with this shape: a preset ({', '.join(PRESETS)}; base is roberta-base's "
                  f"shape; with --head t5: {', '.join(T5_PRESETS)}), a config.json, or a Hub model name; vocabulary "
                  "and positions are fitted to the tokenizer (default: base, or t5-small with --head t5).")
    add_flag(model, "--model-name-or-path", default=None,
             help="With --head t5: start from these pretrained weights instead (a save_pretrained folder, or a Hub "
                  "name such as t5-small or google/t5-v1_1-base).")
    add_flag(model, "--per-replica-batch-size", type=int, default=8, help="Examples per replica per step (default: 8).")
    add_flag(model, "--num-epochs", type=int, default=1, help="Passes over the training shards (default: 1).")
    add_flag(model, "--max-steps", type=int, default=None, help="Stop after this many steps in all (default: epochs).")
    add_flag(model, "--learning-rate", type=float, default=1e-4, help="Peak learning rate (default: 1e-4).")
    add_flag(model, "--weight-decay-rate", type=float, default=1e-3, help="AdamW weight decay (default: 1e-3).")
    add_flag(model, "--warmup-ratio", type=float, default=0.05, help="Share of steps warming up (default: 0.05).")

    output = parser.add_argument_group("output")
    add_flag(output, "--output-dir", required=True,
             help="Local folder: save_pretrained model and tokenizer (each epoch; with --head t5 and --eval-dataset "
                  "only an epoch that beats the best so far), backup/ to resume, logs/ for TensorBoard.")
    add_flag(output, "--backup-steps", type=int, default=None,
             help="Write the resumable backup every N steps (default: at each epoch's end).")
    add_flag(output, "--logging-steps", type=int, default=None,
             help="Log the training loss to TensorBoard every N steps (default: once per epoch); validation "
                  "is logged at each epoch's end, against the step reached.")
    add_flag(output, "--hub-model-id", default=None,
             help="Push model and tokenizer to this 🤗 Hub repo each epoch (PushToHubCallback).")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = build_parser().parse_args(argv)
    from mlm_tpu.training import train  # TensorFlow loads here, after the flags are checked

    history = train(args)
    losses = history.history.get("loss", [])
    if losses:
        print(f"Done: loss {losses[0]:.3f} -> {losses[-1]:.3f}; model and tokenizer in {args.output_dir}",
              file=sys.stderr)
