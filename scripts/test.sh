#!/usr/bin/env bash
# Set up everything the tests need (first run only), then lint, check generated code, run the suite.
# Extra arguments go to pytest. The suite runs on PYKBROKER_TEST_WORKERS pytest-xdist workers (default
# 2; 0 runs it in this process); tests/conftest.py groups the tests so that each module, and the
# real Kafka broker and Spark, start once.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh" test
cd "$root"
.venv/bin/ruff check .
.venv/bin/lint-imports --no-logo --no-cache
.venv/bin/python -m codegen generate --check
exec .venv/bin/python -m pytest -q -n "${PYKBROKER_TEST_WORKERS:-2}" --dist loadscope --no-loadscope-reorder --durations=20 "$@"
