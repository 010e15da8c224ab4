#!/usr/bin/env bash
# Create .venv if it is missing and install into it what a command needs:
#   bash scripts/setup.sh         mlm_tpu (editable) with its [downstream] extra and the reference encoder's folder
#                                 (requirements-reference.txt, without its requirements): what the demo runs (demo.sh)
#   bash scripts/setup.sh --dev   that and the test and docs tools of requirements-dev.txt (test.sh, docs.sh)
# Each set re-installs only when the files that list it change, so re-running is cheap, and the demo then the
# tests install the tools once, on top.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

case "${1:-}" in
  "") dev=false ;;
  --dev) dev=true ;;
  *) echo "error: scripts/setup.sh takes --dev (the test and docs tools too) or nothing, not '$1'" >&2; exit 2 ;;
esac

python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  if ! "$python" -c 'import sys; sys.exit(not (3, 10) <= sys.version_info[:2] <= (3, 13))' 2>/dev/null; then
    echo "error: mlm_tpu needs Python 3.10 to 3.13 (TensorFlow 2.21's range); set PYTHON=/path/to/python3.x" >&2
    exit 2
  fi
  echo "==> Creating the virtual environment .venv ($("$python" --version))"
  "$python" -m venv .venv
fi

# A stamp holds the digest of the files its set was installed from; the full set's also covers the package's, and
# keeps the name and digest of earlier versions' one stamp (a .venv they made installs nothing again).
package=$(cat requirements.txt requirements-reference.txt pyproject.toml | sha256sum | cut -d' ' -f1)
full=$(cat requirements.txt requirements-reference.txt requirements-dev.txt pyproject.toml | sha256sum | cut -d' ' -f1)
package_stamp=.venv/.mlm_tpu-package-installed
full_stamp=.venv/.mlm_tpu-installed
installed() { [ "$(cat "$1" 2>/dev/null)" = "$2" ]; }

if $dev; then
  if ! installed "$full_stamp" "$full"; then
    echo "==> Installing mlm_tpu, TensorFlow, 🤗 Transformers and the test and docs tools into .venv (first time: a" \
         "few minutes)"
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet -r requirements-dev.txt -e ".[downstream]"
    .venv/bin/python -m pip install --quiet --no-deps -r requirements-reference.txt
    echo "$full" > "$full_stamp"
  fi
elif ! installed "$package_stamp" "$package" && ! installed "$full_stamp" "$full"; then
  echo "==> Installing mlm_tpu, TensorFlow and 🤗 Transformers into .venv (first time: a few minutes)"
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e ".[downstream]"
  .venv/bin/python -m pip install --quiet --no-deps -r requirements-reference.txt
  echo "$package" > "$package_stamp"
fi
