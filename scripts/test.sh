#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite; extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest "$@"
