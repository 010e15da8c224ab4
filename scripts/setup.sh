#!/usr/bin/env bash
# Create .venv if it is missing and install mlm_tpu with everything it and its tests need.
# Re-installs only when requirements*.txt or pyproject.toml change, so re-running is cheap.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  if ! "$python" -c 'import sys; sys.exit(not (3, 10) <= sys.version_info[:2] <= (3, 13))' 2>/dev/null; then
    echo "error: mlm_tpu needs Python 3.10 to 3.13 (TensorFlow 2.21's range); set PYTHON=/path/to/python3.x" >&2
    exit 2
  fi
  echo "==> Creating the virtual environment .venv ($("$python" --version))"
  "$python" -m venv .venv
fi

wanted=$(cat requirements.txt requirements-dev.txt pyproject.toml | sha256sum | cut -d' ' -f1)
stamp=.venv/.mlm_tpu-installed
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  echo "==> Installing mlm_tpu, TensorFlow, 🤗 Transformers and the test tools into .venv (first time: a few minutes)"
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -r requirements-dev.txt -e .
  echo "$wanted" > "$stamp"
fi
