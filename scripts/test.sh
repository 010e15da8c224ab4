#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite; extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh --dev  # the test and docs tools too
# Two processes, each taking whole test files (their module fixtures are trained once): most tests wait on a
# subprocess that uses one core, so a 2-core machine runs the suite in about 60% of the time. `-n 0`: one process.
# --durations=25: every run (CI's too) ends with its 25 slowest tests, so a test that grows shows who it is.
exec .venv/bin/python -m pytest -n 2 --dist loadfile --durations=25 "$@"
