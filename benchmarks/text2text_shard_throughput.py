"""Text-to-text (T5) sharding throughput and memory: `mlm_tpu.shard --task text2text` against the reference.

Rows made from WikiText-2 validation (../shared): each paragraph as "body", its section heading as
"title", its first sentence as "summary"; repeated to at least 10 MB, and a copy 4x larger. For
each, in fresh processes: `python -m mlm_tpu.shard --task text2text` (inputs "summarize: title\\nbody"
of 512 tokens, 64-token targets, 1,000 per shard) and the reference method
(benchmarks/reference_text2text_sharding.py: datasets.map + tokenizer padding/truncation +
tf.train.Example). Prints rows/s of the work itself and of the whole command, peak memory and the
ratios. (The reference keeps only the head of long inputs; ours keeps head and tail: same shapes.)
Usage: python benchmarks/text2text_shard_throughput.py
"""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from shard_throughput import ROOT, SMALL_BYTES, WIKITEXT, measure, subprocess_environment

PREFIX, MAX_LENGTH, MAX_TARGET_LENGTH = "summarize:", 512, 64


def wikitext_rows():
    """(title, body, summary) of every paragraph of WikiText-2 validation."""
    title = ""
    for line in WIKITEXT.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line.startswith("="):
            title = line.strip("= ")
        elif line:
            yield {"title": title, "body": line, "summary": line.split(" . ")[0] + " ."}


def make_rows(path: Path, minimum_bytes: int) -> int:
    text = "".join(json.dumps(row) + "\n" for row in wikitext_rows())
    copies = -(-minimum_bytes // len(text.encode()))
    path.write_text(text * copies, encoding="utf-8")
    return text.count("\n") * copies


def main() -> None:
    python, env = sys.executable, subprocess_environment()
    peaks = {}
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        small, large = work / "small.jsonl", work / "large.jsonl"
        rows = {"small": make_rows(small, SMALL_BYTES), "4x larger": make_rows(large, 4 * SMALL_BYTES)}
        tokenizer = work / "tokenizer"
        subprocess.run([python, "-m", "mlm_tpu.tokenizer", "train", "--template", "t5", "--text-files", WIKITEXT,
                        "--vocab-size", "8000", "--output-dir", tokenizer], check=True, env=env, capture_output=True,
                       cwd=ROOT)
        for label, corpus in (("small", small), ("4x larger", large)):
            ours = measure([python, "-m", "mlm_tpu.shard", "--task", "text2text", "--tokenizer", tokenizer,
                            "--text-files", corpus, "--input-column", "title", "--input-column", "body",
                            "--target-column", "summary", "--source-prefix", PREFIX, "--max-length", MAX_LENGTH,
                            "--max-target-length", MAX_TARGET_LENGTH, "--output-dir", work / f"ours-{label}"], env)
            reference = measure([python, ROOT / "benchmarks" / "reference_text2text_sharding.py", tokenizer, corpus,
                                 work / f"reference-{label}", PREFIX, MAX_LENGTH, MAX_TARGET_LENGTH],
                                {**env, "HF_DATASETS_CACHE": str(work / f"cache-{label}")})
            peaks[label] = (ours[2], reference[2])
            count = rows[label]
            print(f"\n{label} corpus: {corpus.stat().st_size / 2**20:.1f} MB of JSON lines, {count:,} rows")
            print(f"  {'method':<44}{'work s':>8}{'rows/s':>10}{'whole s':>9}{'rows/s':>10}{'peak MB':>9}")
            for name, (own, wall, peak) in (("mlm_tpu.shard --task text2text", ours),
                                             ("reference (datasets.map + padding + Example)", reference)):
                print(f"  {name:<44}{own:>8.2f}{count / own:>10,.0f}{wall:>9.2f}{count / wall:>10,.0f}{peak:>9.0f}")
            print(f"  mlm_tpu / reference: {reference[0] / ours[0]:.2f}x on the work, "
                  f"{reference[1] / ours[1]:.2f}x whole command")
    print(f"\nPeak memory, 4x larger corpus / small: mlm_tpu.shard {peaks['4x larger'][0] / peaks['small'][0]:.2f}x, "
          f"reference {peaks['4x larger'][1] / peaks['small'][1]:.2f}x")


if __name__ == "__main__":
    main()
