#!/usr/bin/env bash
# Set up (first run only) and start the broker on 127.0.0.1:9092 with data in ./kafka-data.
# Extra arguments go to `python -m broker serve` (see --help).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
cd "$root"
exec .venv/bin/python -m broker serve "$@"
