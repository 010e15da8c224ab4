"""The sharder as an Apache Beam pipeline on this machine (FnApiRunner, 1 and 2 worker processes) against the local
sharder: tokens/s and peak memory, on the same corpus and settings (512-token examples, 1,000 per shard).

Corpora: WikiText-2 validation (../shared) repeated to at least 10 MB, and a copy 4x larger, one file each, read by
Beam in 1 MiB parts (--text-part-bytes). Each command runs in a fresh process; the figures:
- whole s: the command's wall time, start-up included (Beam starts its worker processes, which import
  Beam, transformers and the tokenizer, then runs its stages one after another);
- CPU s: user + system time of the command and every process under it (Beam's workers): what a cluster bills,
  and, unlike wall time, little changed by other work on a shared machine;
- marginal tokens/s and tokens per CPU-second: the larger corpus' extra tokens over its extra seconds: the rate
  once started;
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

from shard_throughput import ROOT, SMALL_BYTES, corpora_and_tokenizer, subprocess_environment

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
    """Run a command; (wall seconds, CPU seconds of its process tree, peak MB of the tree, peak MB of one process)."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        process = subprocess.Popen([str(part) for part in command], env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                                   stderr=err)
        total = single = 0
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)  # usage counts the children it waited for
            if pid:
                break
            summed, largest = _tree_rss(process.pid)
            total, single = max(total, summed), max(single, largest)
            time.sleep(0.1)
        wall = time.perf_counter() - started
        if os.waitstatus_to_exitcode(status):
            err.seek(0)
            sys.exit(f"benchmark step failed: {' '.join(map(str, command))}\n{err.read().decode()[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, total / 2**20, single / 2**20


def main() -> None:
    python, env = sys.executable, subprocess_environment()
    methods = {"local sharder (mlm_tpu.shard)": [], "Beam FnApiRunner, 1 process": [*BEAM, "--direct_num_workers", "1"],
               "Beam FnApiRunner, 2 processes": [*BEAM, "--direct_num_workers", "2"]}
    results, bytes_per_token = {}, 0.0
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        small, large, tokenizer = corpora_and_tokenizer(work, env)
        for label, corpus in (("small", small), ("4x larger", large)):
            for index, (method, flags) in enumerate(methods.items()):
                output = work / f"{label}-{index}"
                measured = run([python, "-m", "mlm_tpu.shard", "--tokenizer", tokenizer, "--text-files", corpus,
                                "--output-dir", output, "--max-length", 512, "--shard-size", 1000, *flags], env)
                manifest = json.loads((output / "train" / "manifest.json").read_text())
                results[label, method] = (manifest["corpus_tokens"], *measured)
                bytes_per_token = sum(shard["bytes"] for shard in manifest["shards"]) / manifest["tokens"]
                if index and manifest["shards"] != json.loads((work / f"{label}-0" / "train" /
                                                               "manifest.json").read_text())["shards"]:
                    sys.exit(f"{method} wrote other shards than the local sharder")
    print(f"{os.cpu_count()} cores; corpora of {SMALL_BYTES / 2**20:.0f} MB and 4x that; every Beam run wrote the "
          "local sharder's shards (crc32c)")
    print(f"{'method':<34}{'corpus':>10}{'tokens':>13}{'whole s':>9}{'tokens/s':>11}{'CPU s':>8}{'peak MB':>9}"
          f"{'1 process':>10}")
    for (label, method), (tokens, wall, cpu, total, single) in results.items():
        print(f"{method:<34}{label:>10}{tokens:>13,}{wall:>9.1f}{tokens / wall:>11,.0f}{cpu:>8.1f}{total:>9.0f}"
              f"{single:>10.0f}")
    local = "local sharder (mlm_tpu.shard)"
    print("\nonce started (the larger corpus' extra tokens over its extra seconds), and against the local sharder:")
    print(f"  {'method':<34}{'tokens/s':>11}{'x local':>9}{'start-up s':>12}{'tokens/CPU-s':>14}{'x local':>9}")
    rates, per_cpu = {}, {}
    for method in methods:
        (small_tokens, small_wall, small_cpu, *_), (large_tokens, large_wall, large_cpu, *_) = (
            results["small", method], results["4x larger", method])
        rates[method] = (large_tokens - small_tokens) / (large_wall - small_wall)
        per_cpu[method] = (large_tokens - small_tokens) / (large_cpu - small_cpu)
        start_up = small_wall - small_tokens / rates[method]
        print(f"  {method:<34}{rates[method]:>11,.0f}{rates[method] / rates[local]:>9.2f}{start_up:>12.1f}"
              f"{per_cpu[method]:>14,.0f}{per_cpu[method] / per_cpu[local]:>9.2f}")
    print(f"\nshards: {bytes_per_token:.2f} bytes a token (TFRecord files, input_ids and attention_mask)")


if __name__ == "__main__":
    main()
