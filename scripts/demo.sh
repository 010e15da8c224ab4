#!/usr/bin/env bash
# Set up (if needed: the package and its [downstream] extra, no test or docs tool) and run the whole mlm_tpu
# pipeline on the built-in offline corpus.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
exec .venv/bin/python -m mlm_tpu.demo "$@"
