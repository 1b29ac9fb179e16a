"""Build and run the franz-go probe (``tests/go``, kgo + kadm) for the integration tests.

``scripts/clients.sh`` downloads the pinned modules (``tests/go/go.sum``) into Go's module cache; the
probe is built once per source state into ``.reference/go-bin/franzprobe-<hash>`` (the hash covers
the sources, go.mod, go.sum and the go binary), so a re-run with nothing changed skips ``go build``::

    franz = require_franz()                          # pytest.fail (never skip) if it cannot be had
    with franz.session(bootstrap) as s:             # one process, JSON commands over stdin
        s.ok({"op": "produce", "topic": "t", "records": [...]})

Each command is one JSON object per line; the answer is one JSON line with ``ok`` and the results.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.support.java import JavaSession
from tests.support.reference import REFERENCE_DIR, REPO_ROOT

GO_SRC = REPO_ROOT / "tests" / "go"


class FranzUnavailable(RuntimeError):
    """go is missing, or the probe does not build."""


class FranzSession(JavaSession):
    """The probe process: :meth:`request` sends one command, :meth:`ok` also checks it succeeded."""

    def send(self, op: str, timeout: float | None = None, **fields: object) -> dict:
        return self.request(json.dumps({"op": op, **fields}), timeout)

    def ok(self, op: str, timeout: float | None = None, **fields: object) -> dict:
        got = self.send(op, timeout, **fields)
        assert got.get("ok") is True, (
            f"franz-go {op} failed: {got.get('error')}\nstderr:\n{self.stderr[-3000:]}"
        )
        return got


class Franz:
    def __init__(self, binary: Path):
        self.binary = binary

    def session(self, bootstrap: str, timeout: float = 60.0) -> FranzSession:
        return FranzSession([str(self.binary), bootstrap], timeout)


def build(src: Path = GO_SRC, reference_dir: Path = REFERENCE_DIR) -> Franz:
    """Build the probe (cached by content hash) and return a runner."""
    go = shutil.which("go")
    if go is None:
        raise FranzUnavailable("go is not on PATH (Go 1.25+ is required for the franz-go tests)")
    go = os.path.realpath(go)
    h = hashlib.sha256(go.encode())
    for name in ("go.mod", "go.sum", *sorted(p.name for p in src.glob("*.go"))):
        h.update(name.encode() + b"\0" + (src / name).read_bytes() + b"\0")
    out = reference_dir / "go-bin" / f"franzprobe-{h.hexdigest()[:16]}"
    if not out.is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=out.name + ".", dir=out.parent)
        os.close(fd)
        try:
            try:
                proc = subprocess.run(
                    [go, "build", "-o", tmp, "."], cwd=src, capture_output=True, text=True, timeout=900
                )
            except (OSError, subprocess.TimeoutExpired) as e:
                raise FranzUnavailable(f"go build could not run: {e}") from e
            if proc.returncode != 0:
                raise FranzUnavailable(f"go build failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")
            os.replace(tmp, out)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return Franz(out)


@functools.cache
def _cached() -> Franz | FranzUnavailable:
    try:
        return build()
    except FranzUnavailable as e:
        return e


def require_franz() -> Franz:
    """The built probe for this session; fails the calling test (never skips) if unavailable."""
    import pytest

    got = _cached()
    if isinstance(got, FranzUnavailable):
        pytest.fail(
            f"the franz-go tests need go and the modules from scripts/clients.sh: {got}", pytrace=False
        )
    return got
