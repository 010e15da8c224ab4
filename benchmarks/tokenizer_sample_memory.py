"""Tokenizer training memory against the sample: `tokenizer train --sample-documents N` on WikiText-2 validation
(../shared) repeated 10 times, for several N, and on the whole corpus.

Each run is a fresh child of this small process, so that its peak resident memory (wait4's ru_maxrss) is its own
(a child's peak counts the memory of the process it was forked from). Prints the peak, the seconds, and the sample's characters; then the memory each extra MB of sampled
text cost, the figure the tokenizers guide's C4 arithmetic starts from. The 10x corpus repeats its text, so the trainer's word
counts do not grow past one copy: the whole corpus costs little more than one copy's worth, and a sample of new
text (a real large corpus) costs what the slope says.
Usage: python benchmarks/tokenizer_sample_memory.py
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from shard_throughput import ROOT, WIKITEXT, subprocess_environment

SAMPLES = (250, 500, 1000, 2000, None)  # None: the whole corpus


def main() -> None:
    env = subprocess_environment()
    rows = []
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        corpus = work / "wikitext-10x.txt"
        corpus.write_text(WIKITEXT.read_text(encoding="utf-8") * 10, encoding="utf-8")
        for sample in SAMPLES:
            output = work / f"tokenizer-{sample}"
            started = time.perf_counter()
            with tempfile.TemporaryFile() as err:
                process = subprocess.Popen([sys.executable, "-m", "mlm_tpu.tokenizer", "train", "--text-files", corpus,
                                            "--vocab-size", "2000", "--output-dir", output,
                                            *(["--sample-documents", str(sample)] if sample else [])],
                                           env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err)
                _, status, usage = os.wait4(process.pid, 0)
                if os.waitstatus_to_exitcode(status):
                    err.seek(0)
                    sys.exit(err.read().decode()[-2000:])
            info = json.loads((output / "tokenizer_training.json").read_text())
            rows.append((sample, info["documents"], info["characters"], usage.ru_maxrss / 1024,
                         time.perf_counter() - started))
    print(f"{'--sample-documents':>18}{'documents':>11}{'MB of text':>12}{'peak MB':>9}{'seconds':>9}")
    for sample, documents, characters, peak, seconds in rows:
        print(f"{sample or 'whole corpus':>18}{documents:>11,}{characters / 2**20:>12.2f}{peak:>9.0f}{seconds:>9.1f}")
    (_, _, small_text, small_peak, _), (_, _, large_text, large_peak, _) = rows[0], rows[len(SAMPLES) - 2]
    print(f"\nextra memory per extra MB of sampled (new) text, {rows[0][0]} -> {rows[len(SAMPLES) - 2][0]} documents: "
          f"{(large_peak - small_peak) / ((large_text - small_text) / 2**20):.1f} MB")


if __name__ == "__main__":
    main()
