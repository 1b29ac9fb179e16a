#!/usr/bin/env bash
# Build a base image for the Dockerfile without a container registry: a minimal Debian bookworm
# (debootstrap, from Debian's packages) with python3, pip and python-is-python3, imported into the
# local Docker daemon. For machines that reach Debian's packages and PyPI but not Docker Hub:
#
#   scripts/docker-base.sh [TAG]          (default: pykbroker-base:bookworm; needs root, debootstrap)
#   docker build --network host --build-arg BASE_IMAGE=pykbroker-base:bookworm -t pykbroker .
#
# The image trusts this machine's CA bundle (copied from /etc/ssl/certs, PIP_CERT set), so pip
# inside the build works behind the same TLS-intercepting proxy as the host, and pip may install
# into the system Python (Debian's EXTERNALLY-MANAGED marker is removed: the image is a
# single-purpose one, as python:3.11-slim is). tests/integration/test_container_image.py uses it.
set -euo pipefail
tag=${1:-pykbroker-base:bookworm}
command -v debootstrap >/dev/null || { echo "debootstrap is missing (apt-get install debootstrap)" >&2; exit 2; }
rootfs=$(mktemp -d /tmp/pykbroker-rootfs.XXXXXX)
trap 'rm -rf "$rootfs"' EXIT
debootstrap --variant=minbase --include=python3,python3-pip,python-is-python3,ca-certificates \
  bookworm "$rootfs" >/dev/null
rm -f "$rootfs"/usr/lib/python3*/EXTERNALLY-MANAGED
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
tar -C "$rootfs" -c . | docker import -c 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' \
  -c 'CMD ["python3"]' - "$tag" >/dev/null
echo "$tag"
