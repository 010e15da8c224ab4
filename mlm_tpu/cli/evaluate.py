"""`python -m mlm_tpu.evaluate` (also `mlm-tpu evaluate`): score a trained model on shards.

Masked LM: masked-LM loss (the mean cross-entropy over every masked token, not a mean of batch
means), its exponential the perplexity, and masked-token accuracy. Masks come from the trainer's
masker, keyed by (seed, batch number), so the same model, shards, seed and batch size give the
same figures on every run, on 1 or N replicas. T5: the trainer's validation for the task the model
was trained for (accuracy and per-class precision, recall and F1 for a classifier; exact match,
token F1 and ROUGE for generation). Encoder classifiers: their validation (accuracy, macro F1, Matthews
correlation; Pearson and Spearman for scores; entity precision, recall and F1 for tags), the shards' label
names matched to the model's. Every example counts once: the last partial batch is filled up with
unscored rows, keeping shapes fixed as TPUs need.
"""

import argparse
import json
from typing import Optional, Sequence

from mlm_tpu.cli.flags import ConfigFlags, add_flag, add_hardware_flags, add_masking_flags, add_verbose_flag
from mlm_tpu.console import import_tensorflow, quiet_libraries
from mlm_tpu.shards.format import check_local_shards
from mlm_tpu.training.config import MAX_SEED
from mlm_tpu.training.config import EvaluationConfig

FLAGS = ConfigFlags(EvaluationConfig)


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    FLAGS.add(parser, "--model", "--model-name-or-path", required=True,
              help="The trained model: `python train.py`'s --output-dir, a save_pretrained folder or a Hub name; "
                   "or an adapter folder (`train.py --delta`), run on its base model.")
    FLAGS.add(parser, "--base-model",
              help="An adapter folder's base model (a folder or Hub name), in place of the one its adapter_config.json "
                   "names (base_model_name_or_path).")
    FLAGS.add(parser, "--eval-dataset", required=True, help="Folder (local or gs://) of shards to evaluate on.")
    FLAGS.add(parser, "--max-length", type=int,
              help="Tokens per example; checked against the shards (default: what the shards hold).")
    FLAGS.add(parser, "--per-replica-batch-size", type=int,
              help="Examples per replica per step (default: 8). Masks depend on it: compare runs made with the same "
                   "batch size.")
    add_masking_flags(FLAGS, parser, "Masked LM")
    FLAGS.add(parser, "--seed", type=int, help=f"Seed of the masks, 0 to {MAX_SEED} (default: 42).")
    add_flag(parser, "--json", action="store_true", help="Print the figures as one JSON object on stdout.")
    add_hardware_flags(FLAGS, parser)
    add_verbose_flag(parser)
    return parser


def main(argv: Optional[Sequence[str]] = None, prog: str = "python -m mlm_tpu.evaluate") -> None:
    args = build_parser(prog).parse_args(argv)
    config = FLAGS.build(args)
    check_local_shards(config.eval_dataset, "--eval-dataset")  # before TensorFlow's seconds of start-up
    import_tensorflow(args.verbose)
    quiet_libraries(args.verbose)
    from mlm_tpu.tasks import plug_in_of_saved_model
    from mlm_tpu.training.evaluation import evaluate_model

    result = evaluate_model(config, plug_in_of_saved_model(config.model, config.base_model))
    if args.json:
        print(json.dumps({"model": config.model, "eval_dataset": config.eval_dataset, "task": result.task,
                          "seed": config.seed, "per_replica_batch_size": config.per_replica_batch_size,
                          "examples": result.examples, **result.scores}))
    elif result.task == "mlm":
        scores = result.scores
        print(f"examples          {result.examples:,}\nmasked tokens     {scores['masked_tokens']:,}\n"
              f"loss              {scores['loss']:.4f}\nperplexity        {scores['perplexity']:.2f}\n"
              f"masked accuracy   {scores['masked_accuracy']:.2%}")
    else:
        width = max(map(len, result.scores)) + 2
        print("\n".join(f"{name:<{width}}{value:,}" if isinstance(value, int) else f"{name:<{width}}{value:.4f}"
                        for name, value in result.scores.items()))
