"""Peak memory of training a tokenizer on, and sharding, a corpus that is one 50 MB line with no newline.

Each command runs in its own process (as a user runs it); its peak resident memory is read from the
kernel (`ru_maxrss` of the finished child). The same text cut into ordinary lines is the reference: a
long line should cost no more than the lines it could have been (mlm_tpu 0.2 took 4.4 GB to train a
tokenizer on it and 6.1 GB to shard it, in proportion to the line's length).

    python benchmarks/long_line_memory.py [--megabytes 50]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
WIKITEXT = REPO_ROOT.parent / "shared" / "data" / "wikitext-2" / "valid.txt"


def peak_of(*command: str) -> tuple:
    """(peak resident MB, seconds) of one command run to its end in a child process."""
    started = time.perf_counter()
    pid = subprocess.Popen([sys.executable, "-m", *command], cwd=REPO_ROOT, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}).pid
    _, status, usage = os.wait4(pid, 0)
    if status:
        raise SystemExit(f"{' '.join(command)} failed (status {status})")
    return usage.ru_maxrss / 1024, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--megabytes", type=int, default=50, help="Size of the one-line corpus (default: 50).")
    args = parser.parse_args()
    words = WIKITEXT.read_text(encoding="utf-8").split()
    one_line_text = " ".join(words) + " "
    lines_text = "\n".join(" ".join(words[i:i + 200]) for i in range(0, len(words), 200)) + "\n"
    copies = args.megabytes * 2**20 // len(one_line_text) + 1
    with tempfile.TemporaryDirectory() as folder:
        # Written a copy at a time, so that this process stays small: a child's peak counts its parent's pages.
        one_line, lines = Path(folder, "one-line.txt"), Path(folder, "lines.txt")
        for path, text in ((one_line, one_line_text), (lines, lines_text)):
            with open(path, "w", encoding="utf-8") as stream:
                for _ in range(copies):
                    stream.write(text)
        print(f"corpus: {one_line.stat().st_size / 2**20:.0f} MB as one line, and as "
              f"{copies * len(lines_text.splitlines()):,} lines of 200 words")
        print(f"{'command':<34} {'one line':>16} {'lines (reference)':>20} {'ratio':>7}")
        for name, make in (("tokenizer train (vocab 8000)", lambda corpus, out: (
                "mlm_tpu.tokenizer", "train", "--text-files", str(corpus), "--vocab-size", "8000", "--output-dir", out)),
                           ("shard (128 tokens)", lambda corpus, out: (
                "mlm_tpu.shard", "--tokenizer", str(Path(folder, "tok-lines")), "--text-files", str(corpus),
                "--max-length", "128", "--output-dir", out))):
            figures = []
            for corpus, label in ((one_line, "one"), (lines, "lines")):
                out = str(Path(folder, f"{'tok' if name.startswith('tok') else 'shards'}-{label}"))
                figures.append(peak_of(*make(corpus, out)))
            (peak_one, seconds_one), (peak_lines, seconds_lines) = figures
            print(f"{name:<34} {peak_one:>8,.0f} MB {seconds_one:>4.0f} s {peak_lines:>10,.0f} MB {seconds_lines:>4.0f} s "
                  f"{peak_one / peak_lines:>6.2f}x")


if __name__ == "__main__":
    main()
