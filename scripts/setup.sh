#!/usr/bin/env bash
# Create .venv (if needed) and install the broker; with "test", also the test tools, the Kafka
# reference schemas and Java client jars, the [spark] extra (PySpark tests) with Spark's Kafka
# connector (Maven), a JDK 17, Maven and Go when missing, the newer clients (scripts/clients.sh:
# kafka-clients 4.x, Kafka Streams, franz-go) and a released Kafka broker (scripts/kafka.sh, the
# differential tests' reference). Idempotent.
#
#   scripts/setup.sh           # runtime only
#   scripts/setup.sh test      # everything the test suite needs
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

apt_install() {
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
  else
    echo "setup: please install: $*" >&2
    exit 1
  fi
}

py=${PYTHON:-python3}
command -v "$py" >/dev/null 2>&1 || apt_install python3 python3-venv python3-pip
if [ ! -x .venv/bin/python ]; then
  "$py" -m venv .venv 2>/dev/null || { apt_install python3-venv; rm -rf .venv; "$py" -m venv .venv; }
fi
# the install also compiles broker/log/_native.c and broker/coordinator/_replay.c (setup.py): a change
# to any of them installs again
stamp=.venv/.installed-$(cat pyproject.toml setup.py broker/log/_native.c broker/log/_varint.h broker/coordinator/_replay.c | sha1sum | cut -c1-12)-${1:-run}
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null
  # setuptools' notices about editable installs (a page of asterisks on every first run) say nothing
  # a user of this script needs to act on (compat mode's is answered by the fallback below)
  export PYTHONWARNINGS="ignore:Editable installation,ignore:Compat editable installs"
  extras=""
  [ "${1:-}" = test ] && extras="[test,spark]"
  # -e in setuptools' compat mode: the checkout goes on sys.path as one plain path in a .pth file,
  # not setuptools' default editable finder, an import hook module every Python start in this venv
  # would import (pathlib, re, urllib.parse, importlib.util: ~20 ms of each start, issue 19). The
  # default mode is the fallback should a setuptools ever drop compat mode.
  .venv/bin/python -m pip install -q --disable-pip-version-check -e ".$extras" \
      --config-settings editable_mode=compat \
    || .venv/bin/python -m pip install -q --disable-pip-version-check -e ".$extras"
  touch "$stamp"
fi
# Bytecode for the package, written here: on machines that set PYTHONDONTWRITEBYTECODE every start
# would otherwise compile every module again (the generated codecs are large). Only changed files are
# recompiled, so this is quick after the first run.
.venv/bin/python -m compileall -q -j 0 broker codegen >/dev/null
if [ "${1:-}" = test ]; then
  command -v javac >/dev/null 2>&1 || apt_install openjdk-17-jdk-headless
  command -v mvn >/dev/null 2>&1 || apt_install maven
  command -v go >/dev/null 2>&1 || apt_install golang-go  # an older go fetches go.mod's toolchain itself
  command -v kcat >/dev/null 2>&1 || apt_install kcat  # the kcat SASL tests (tests/integration)
  PYTHON=.venv/bin/python scripts/reference.sh >/dev/null
  PYTHON=.venv/bin/python scripts/spark-kafka.sh
  scripts/kafka.sh >/dev/null
  scripts/clients.sh
  scripts/kafkajs.sh  # kafkajs (npm) into .reference/kafkajs
fi
