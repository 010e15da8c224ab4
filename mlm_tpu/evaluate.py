"""`python -m mlm_tpu.evaluate`: masked-LM loss, perplexity and masked-token accuracy on shards,
or a T5 model's validation scores on text-to-text shards.

Masked LM: masks come from the trainer's seeded masker, keyed by (seed, batch number), so the
same model, shards, seed and batch size give the same figures on every run. The loss is the mean
cross-entropy over all masked tokens (not a mean of per-batch means), and the perplexity is its
exponential. T5: the trainer's validation (accuracy and per-class precision, recall and F1 for a
classifier; exact match, token F1 and ROUGE for generation), for the task the model was trained
for. Every example counts once: the last partial batch is filled up with unscored rows, keeping
shapes fixed as TPUs need.
"""

import argparse
import json
from dataclasses import asdict
from typing import Optional, Sequence

from mlm_tpu.cli import add_flag, run_command
from mlm_tpu.errors import UserError
from mlm_tpu.hardware_flags import add_hardware_flags


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m mlm_tpu.evaluate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flag(parser, "--model", "--model-name-or-path", required=True,
             help="The trained model: `python train.py`'s --output-dir, a save_pretrained folder or a Hub name.")
    add_flag(parser, "--eval-dataset", required=True, help="Folder (local or gs://) of shards to evaluate on.")
    add_flag(parser, "--max-length", type=int, default=None,
             help="Tokens per example; checked against the shards (default: what the shards hold).")
    add_flag(parser, "--per-replica-batch-size", type=int, default=8, help="Examples per replica per step "
             "(default: 8). Masks depend on it: compare runs made with the same batch size.")
    add_flag(parser, "--mlm-probability", type=float, default=None,
             help="Masked LM: share of tokens masked (default: 0.15).")
    add_flag(parser, "--seed", type=int, default=42, help="Masked LM: seed of the masks (default: 42).")
    add_flag(parser, "--json", action="store_true", help="Print the figures as one JSON object on stdout.")
    add_hardware_flags(parser)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = build_parser().parse_args(argv)
    if args.per_replica_batch_size < 1:
        raise UserError(f"--per-replica-batch-size must be at least 1, not {args.per_replica_batch_size}")
    if args.mlm_probability is not None and not 0 < args.mlm_probability < 1:
        raise UserError(f"--mlm-probability must be between 0 and 1, not {args.mlm_probability}")
    if model_type(args.model) == "t5":
        return evaluate_text2text(args)
    from mlm_tpu.evaluation import run_evaluation  # TensorFlow loads here, after the flags are checked

    scores = run_evaluation(args)
    if args.json:
        print(json.dumps({"model": args.model, "eval_dataset": args.eval_dataset, "seed": args.seed,
                          "per_replica_batch_size": args.per_replica_batch_size, **asdict(scores)}))
    else:
        print(f"examples          {scores.examples:,}\nmasked tokens     {scores.masked_tokens:,}\n"
              f"loss              {scores.loss:.4f}\nperplexity        {scores.perplexity:.2f}\n"
              f"masked accuracy   {scores.masked_accuracy:.2%}")


def model_type(name_or_path: str) -> Optional[str]:
    """The saved model's type from its config (None when there is none to read: loading will say why)."""
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(name_or_path).model_type
    except (OSError, ValueError):
        return None


def evaluate_text2text(args: argparse.Namespace) -> None:
    if args.mlm_probability is not None:
        raise UserError(f"--mlm-probability is for masked LMs; {args.model} is a T5 model")
    from mlm_tpu.t5.evaluation import run_text2text_evaluation

    task, scores = run_text2text_evaluation(args)
    if args.json:
        print(json.dumps({"model": args.model, "eval_dataset": args.eval_dataset, "task": task, **scores}))
    else:
        print("\n".join(f"{name:<22}{value:.4f}" for name, value in scores.items()))


if __name__ == "__main__":
    run_command(main)
