#!/usr/bin/env bash
# kafkajs (the npm package pinned in scripts/clients/kafkajs/package.json) into .reference/kafkajs,
# for the kafkajs tests in tests/integration. Needs node and npm (installed with apt-get when
# missing and running as root). Idempotent: nothing is fetched when the pinned version is there.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/.reference/kafkajs"
if ! command -v npm >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
  else
    echo "kafkajs.sh: please install node and npm" >&2
    exit 1
  fi
fi
mkdir -p "$dest"
if ! cmp -s "$root/scripts/clients/kafkajs/package.json" "$dest/package.json" || [ ! -d "$dest/node_modules/kafkajs" ]; then
  cp "$root/scripts/clients/kafkajs/package.json" "$dest/package.json"
  (cd "$dest" && npm install --no-audit --no-fund --loglevel=error >/dev/null)
fi
