"""What each --masking costs the input pipeline: CPU milliseconds to mask one batch (token, whole-word, span, and
--task electra's token masking), and their ratios to token masking, on real text.

Rows are WikiText-2 validation packed as the shard command packs it (documents framed by their special tokens, cut
every --length tokens), tokenized by a byte-level BPE tokenizer trained on it (--vocab-size pieces, 8,000; or
--tokenizer), --batch-size rows a batch. Each mode's masker runs in a tf.function, as tf.data runs it inside its map,
with the sparse head's default slots. The machine is shared: the modes are timed in alternation, --rounds rounds of
--steps batches each after a warm-up batch, and the best round of each kept; CPU time of the process (all its
threads).
Usage: python benchmarks/masking.py [--length 128] [--batch-size 256] [--steps 20] [--rounds 3] [--tokenizer DIR]
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
WIKITEXT = ROOT.parent / "shared" / "data" / "wikitext-2" / "valid.txt"
MODES = ("token", "whole-word", "span", "electra")  # electra: --task electra's token masking (ELECTRA_MASKING)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--tokenizer", help="a tokenizer folder (default: byte-level BPE trained on WikiText-2)")
    args = parser.parse_args()

    import mlm_tpu
    import tensorflow as tf

    from mlm_tpu.mlm.masking import ELECTRA_MASKING, Masking
    from mlm_tpu.shards.packing import BatchTokenizer, ChunkPacker
    from mlm_tpu.tokenizer.load import load_tokenizer
    from mlm_tpu.tokenizer.word_starts import word_starts

    if args.tokenizer:
        tokenizer = load_tokenizer(args.tokenizer)
    else:
        with tempfile.TemporaryDirectory() as scratch:
            tokenizer = load_tokenizer(mlm_tpu.train_tokenizer(scratch, algorithm="bpe", text_files=[str(WIKITEXT)],
                                                               vocab_size=args.vocab_size, overwrite=True))
    documents = [line.strip() for line in WIKITEXT.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = ChunkPacker(args.length).add(BatchTokenizer(tokenizer, 1).encode(documents))
    batches = [tf.constant(rows[start:start + args.batch_size])
               for start in range(0, len(rows) - args.batch_size + 1, args.batch_size)]
    maskers = {}
    for mode in MODES:
        masking = ELECTRA_MASKING if mode == "electra" else Masking(mode)
        masker = masking.masker(tokenizer, seed=0, prediction_slots=masking.default_slots(args.length))
        maskers[mode] = tf.function(lambda step, ids, masker=masker: masker(step, {"input_ids": ids,
                                                                               "attention_mask": tf.ones_like(ids)}))
        maskers[mode](tf.constant(0, tf.int64), batches[0])  # traced once, as tf.data does
    best = {mode: float("inf") for mode in MODES}
    for _ in range(args.rounds):
        for mode in MODES:
            start = time.process_time()
            for step in range(args.steps):
                maskers[mode](tf.constant(step, tf.int64), batches[step % len(batches)])
            best[mode] = min(best[mode], (time.process_time() - start) / args.steps)
    print(f"{len(batches)} batches of {args.batch_size} x {args.length} tokens (WikiText-2 validation, "
          f"{len(tokenizer):,}-piece {word_starts(tokenizer).family} tokenizer); CPU ms per batch, "
          f"best of {args.rounds} rounds of {args.steps}")
    for mode in MODES:
        print(f"{mode:<11} {best[mode] * 1000:8.1f} ms   {best[mode] / best['token']:5.2f}x token")


if __name__ == "__main__":
    main()
