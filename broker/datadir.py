"""The data directory's lock: one broker per directory, as Kafka's ``.lock`` in each log directory.

Two brokers writing one directory would both acknowledge writes, and after a restart one of them
would see the other's records as a torn tail and truncate them. So a broker takes an exclusive
advisory lock (``flock``) on ``<data dir>/.lock`` before it reads or writes anything else there, and
holds it until it stops. ``flock`` locks belong to the open file, not the process, so a second
broker inside the same process (``BrokerThread``) is refused too; the OS drops the lock when the
holder exits, however it exits (SIGKILL included), so a crash never leaves a stale lock behind.

The holder's PID is written into the file for the error message of the broker that is refused.
Readers that never write (the Spark source, ``--recover``'s dry analysis) do not take the lock.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

LOCK_FILE = ".lock"


class DataDirLocked(RuntimeError):
    """Another broker holds the data directory."""

    def __init__(self, data_dir: Path, pid: int | None):
        self.data_dir = data_dir
        self.pid = pid
        holder = f"process {pid}" if pid is not None else "another process"
        super().__init__(
            f"data directory {data_dir} is in use by another broker ({holder} holds {data_dir / LOCK_FILE})"
        )


class DataDirLock:
    """An exclusive lock on a data directory, held from ``acquire`` until ``release``."""

    def __init__(self, data_dir: Path):
        self.path = data_dir / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> DataDirLock:
        """Create the directory if needed and lock it; raises :class:`DataDirLocked` when another
        broker (in this process or another) holds it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _read_pid(fd)
            os.close(fd)
            raise DataDirLocked(self.path.parent, pid) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Unlock (the file stays, as Kafka's does: its presence means nothing without the lock)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.ftruncate(fd, 0)
            except OSError:
                pass
            os.close(fd)  # closing the last descriptor of the open file drops the flock


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def write_durably(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` atomically and durably: a temporary file, fsynced, renamed over
    it, then the directory fsynced (the small state files: topics, quotas, ACLs, credentials)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
