"""Sharding throughput and memory: mlm_tpu.shard against the reference method and the tokenizer alone.

Corpora: WikiText-2 validation (../shared) repeated to at least 10 MB, and a copy 4x larger.
For each, in fresh processes: `python -m mlm_tpu.shard` (512-token examples, 1,000 per shard),
the reference method (benchmarks/reference_sharding.py), and `encode_batch` on 2,000 lines at a
time with nothing written (the ceiling for any sharder). Prints tokens/s of the work itself
(each program's own timer, after its imports) and of the whole command, peak memory (largest
process's max RSS, children included), and the ratios.
Usage: python benchmarks/shard_throughput.py
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WIKITEXT = ROOT.parent / "shared" / "data" / "wikitext-2" / "valid.txt"
SMALL_BYTES = 10 * 1024 * 1024

TOKENIZER_ALONE = """
import sys, time
from tokenizers import Tokenizer
tokenizer = Tokenizer.from_file(sys.argv[1])
started, batch = time.perf_counter(), []
for line in open(sys.argv[2], encoding="utf-8"):
    if line.strip():
        batch.append(line.strip())
        if len(batch) == 2000:
            ids = [encoding.ids for encoding in tokenizer.encode_batch(batch)]
            batch = []
ids = [encoding.ids for encoding in tokenizer.encode_batch(batch)]
print(time.perf_counter() - started)
"""


def measure(command, env):
    """Run a command; return (its own seconds from stdout's last line or stderr, wall seconds, peak MB, stderr)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        process = subprocess.Popen([str(part) for part in command], stdout=out, stderr=err, env=env, cwd=ROOT)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"benchmark step failed: {' '.join(map(str, command))}\n{stderr[-2000:]}")
    summary = re.search(r"in ([\d.]+) s \(", stderr)  # mlm_tpu.shard's own summary line
    own = float(summary.group(1)) if summary else float(stdout.strip().splitlines()[-1])
    return own, wall, usage.ru_maxrss / 1024


def make_corpus(path: Path, minimum_bytes: int) -> None:
    text = WIKITEXT.read_text(encoding="utf-8")
    path.write_text(text * -(-minimum_bytes // len(text.encode())), encoding="utf-8")


def corpora_and_tokenizer(work: Path, env: dict):
    """In `work`: WikiText repeated to SMALL_BYTES, a copy 4x larger, and a tokenizer trained on the smaller one."""
    small, large = work / "small.txt", work / "large.txt"
    make_corpus(small, SMALL_BYTES)
    make_corpus(large, 4 * small.stat().st_size)
    tokenizer = work / "tokenizer"
    subprocess.run([sys.executable, "-m", "mlm_tpu.tokenizer", "train", "--text-files", small, "--output-dir",
                    tokenizer], check=True, env=env, capture_output=True, cwd=ROOT)
    return small, large, tokenizer


def subprocess_environment() -> dict:
    """What every benchmarked command runs with: offline, quiet, this checkout first; WikiText must be there."""
    if not WIKITEXT.is_file():
        sys.exit(f"needs {WIKITEXT}")
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(ROOT)}


def main() -> None:
    python, env = sys.executable, subprocess_environment()
    peaks = {}
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        small, large, tokenizer = corpora_and_tokenizer(work, env)
        for label, corpus in (("small", small), ("4x larger", large)):
            ours = measure([python, "-m", "mlm_tpu.shard", "--tokenizer", tokenizer, "--text-files", corpus,
                            "--output-dir", work / f"ours-{label}", "--max-length", 512, "--shard-size", 1000], env)
            manifest = json.loads((work / f"ours-{label}" / "train" / "manifest.json").read_text())
            tokens = manifest["corpus_tokens"]
            reference = measure([python, ROOT / "benchmarks" / "reference_sharding.py", tokenizer, corpus,
                                 work / f"reference-{label}"], {**env, "HF_DATASETS_CACHE": str(work / f"cache-{label}")})
            ceiling = measure([python, "-c", TOKENIZER_ALONE, tokenizer / "tokenizer.json", corpus], env)
            peaks[label] = (ours[2], reference[2])
            print(f"\n{label} corpus: {corpus.stat().st_size / 2**20:.1f} MB of text, {tokens:,} tokens, "
                  f"{manifest['records']:,} examples")
            print(f"  {'method':<40}{'work s':>8}{'tokens/s':>12}{'whole s':>9}{'tokens/s':>12}{'peak MB':>9}")
            for name, (own, wall, peak) in (("mlm_tpu.shard", ours), ("reference (datasets.map + group_texts)",
                                             reference), ("tokenizer alone (encode_batch, no writing)", ceiling)):
                print(f"  {name:<40}{own:>8.2f}{tokens / own:>12,.0f}{wall:>9.2f}{tokens / wall:>12,.0f}{peak:>9.0f}")
            print(f"  mlm_tpu.shard / reference: {reference[0] / ours[0]:.2f}x on the work, "
                  f"{reference[1] / ours[1]:.2f}x whole command (target >= 3x)")
            print(f"  mlm_tpu.shard / tokenizer alone: {ceiling[0] / ours[0]:.0%} on the work (target >= 70%)")
    print(f"\nPeak memory, 4x larger corpus / small: mlm_tpu.shard {peaks['4x larger'][0] / peaks['small'][0]:.2f}x "
          f"(target <= 1.10x), reference {peaks['4x larger'][1] / peaks['small'][1]:.2f}x")


if __name__ == "__main__":
    main()
