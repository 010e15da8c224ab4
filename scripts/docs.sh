#!/usr/bin/env bash
# The documentation site (mkdocs.yml, docs/): serve it on http://127.0.0.1:8000, rebuilt on every change,
# or with --build, build it once, strictly (a warning fails), into site/. Other arguments go to mkdocs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh --dev  # the test and docs tools too
export NO_MKDOCS_2_WARNING=1  # Material's notice about MkDocs 2, printed at every build
if [ "${1:-}" = "--build" ]; then
  shift
  exec .venv/bin/mkdocs build --strict "$@"
fi
exec .venv/bin/mkdocs serve "$@"
