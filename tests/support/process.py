"""A broker as a real process (``python -m broker serve``) for tests, and a look at its sockets."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

GUARD = 30.0  # seconds: hang guard only


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_port_pair() -> int:
    """A port P such that P and P + 1 are both free now (for a broker whose second listener takes
    the next port)."""
    while True:
        port = free_port()
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port


def serve(data: Path, port: int, *config: str) -> subprocess.Popen:
    args = ["--port", str(port), "--data-dir", str(data)]
    for pair in config:
        args += ["--config", pair]
    return serve_args(args, port)


def serve_args(args: list[str], port: int, preexec_fn: Callable[[], None] | None = None) -> subprocess.Popen:
    """``python -m broker serve ARGS``; returns once ``port`` (which ARGS make it listen on) accepts.
    ``preexec_fn`` runs in the child before the broker starts (e.g. to lower its limits)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "broker", "serve", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=preexec_fn,
    )
    deadline = time.monotonic() + GUARD
    while True:
        if proc.poll() is not None:
            raise AssertionError(f"broker exited early ({proc.returncode}): {proc.stderr.read()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            assert time.monotonic() < deadline, "hang guard: the broker did not start"
            time.sleep(0.02)


def unread_bytes(pid: int, broker_port: int, client_port: int) -> int | None:
    """Bytes the broker process has not yet read from the connection (its socket's receive
    queue, from /proc/<pid>/net/tcp), or None if the socket is not listed."""
    local, remote = f"0100007F:{broker_port:04X}", f"0100007F:{client_port:04X}"
    for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1] == local and fields[2] == remote:
            return int(fields[4].split(":")[1], 16)
    return None
