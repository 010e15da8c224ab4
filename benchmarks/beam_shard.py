"""The sharder as an Apache Beam pipeline on this machine (FnApiRunner, 1 and 2 worker processes) against the local
sharder: tokens/s and peak memory, on the same corpus and settings (512-token examples, 1,000 per shard).

Corpora: WikiText-2 validation (../shared) repeated to at least 10 MB, and a copy 4x larger, one file each, read by
Beam in 1 MiB parts (--text-part-bytes). Each command runs in a fresh process; the figures:
- whole s: the command's wall time, start-up included (Beam starts its worker processes, which import
  Beam, transformers and the tokenizer, then runs its stages one after another);
- marginal tokens/s: the extra tokens of the larger corpus over the extra seconds it took: the rate once started;
- peak MB: the largest sum of resident memory over the command's process tree (launcher and Beam's workers),
  sampled every 0.1 s; and the largest single process.
Beam's shards are checked against the local ones (each shard's crc32c in the manifests).
Usage: python benchmarks/beam_shard.py
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from shard_throughput import ROOT, SMALL_BYTES, make_corpus, subprocess_environment

PAGE = os.sysconf("SC_PAGE_SIZE")
BEAM = ["--runner", "FnApiRunner", "--direct_running_mode", "multi_processing", "--text-part-bytes", str(2**20)]


def _tree_rss(root: int):
    """(sum of resident bytes of `root` and its descendants, the largest of them)."""
    parents, sizes = {}, {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parents[int(entry)] = int(stat.read().rsplit(")", 1)[1].split()[1])
                with open(f"/proc/{entry}/statm") as statm:
                    sizes[int(entry)] = int(statm.read().split()[1]) * PAGE
            except (OSError, IndexError, ValueError):
                pass
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent and pid not in tree]
        tree.update(children)
        frontier.extend(children)
    in_tree = [sizes.get(pid, 0) for pid in tree]
    return sum(in_tree), max(in_tree)


def run(command, env):
    """Run a command; (wall seconds, peak MB of its process tree, peak MB of one process)."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        process = subprocess.Popen([str(part) for part in command], env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                                   stderr=err)
        total = single = 0
        while process.poll() is None:
            summed, largest = _tree_rss(process.pid)
            total, single = max(total, summed), max(single, largest)
            time.sleep(0.1)
        wall = time.perf_counter() - started
        if process.returncode:
            err.seek(0)
            sys.exit(f"benchmark step failed: {' '.join(map(str, command))}\n{err.read().decode()[-2000:]}")
    return wall, total / 2**20, single / 2**20


def main() -> None:
    python, env = sys.executable, subprocess_environment()
    methods = {"local sharder (mlm_tpu.shard)": [], "Beam FnApiRunner, 1 process": [*BEAM, "--direct_num_workers", "1"],
               "Beam FnApiRunner, 2 processes": [*BEAM, "--direct_num_workers", "2"]}
    results = {}
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        small, large = work / "small.txt", work / "large.txt"
        make_corpus(small, SMALL_BYTES)
        make_corpus(large, 4 * small.stat().st_size)
        tokenizer = work / "tokenizer"
        subprocess.run([python, "-m", "mlm_tpu.tokenizer", "train", "--text-files", small, "--output-dir", tokenizer],
                       check=True, env=env, capture_output=True, cwd=ROOT)
        for label, corpus in (("small", small), ("4x larger", large)):
            for index, (method, flags) in enumerate(methods.items()):
                output = work / f"{label}-{index}"
                measured = run([python, "-m", "mlm_tpu.shard", "--tokenizer", tokenizer, "--text-files", corpus,
                                "--output-dir", output, "--max-length", 512, "--shard-size", 1000, *flags], env)
                manifest = json.loads((output / "train" / "manifest.json").read_text())
                results[label, method] = (manifest["corpus_tokens"], *measured)
                if index and manifest["shards"] != json.loads((work / f"{label}-0" / "train" /
                                                               "manifest.json").read_text())["shards"]:
                    sys.exit(f"{method} wrote other shards than the local sharder")
    print(f"{os.cpu_count()} cores; corpora of {SMALL_BYTES / 2**20:.0f} MB and 4x that; every Beam run wrote the "
          "local sharder's shards (crc32c)")
    print(f"{'method':<34}{'corpus':>10}{'tokens':>13}{'whole s':>9}{'tokens/s':>11}{'peak MB':>9}{'1 process':>10}")
    for (label, method), (tokens, wall, total, single) in results.items():
        print(f"{method:<34}{label:>10}{tokens:>13,}{wall:>9.1f}{tokens / wall:>11,.0f}{total:>9.0f}{single:>10.0f}")
    local = "local sharder (mlm_tpu.shard)"
    print("\nmarginal tokens/s (the larger corpus' extra tokens over its extra seconds), and against the local sharder:")
    rates = {}
    for method in methods:
        (small_tokens, small_wall, *_), (large_tokens, large_wall, *_) = (results["small", method],
                                                                          results["4x larger", method])
        rates[method] = (large_tokens - small_tokens) / (large_wall - small_wall)
        start_up = small_wall - small_tokens / rates[method]
        print(f"  {method:<34}{rates[method]:>11,.0f} tokens/s  ({rates[method] / rates[local]:.2f}x local; "
              f"start-up about {start_up:.1f} s)")


if __name__ == "__main__":
    main()
