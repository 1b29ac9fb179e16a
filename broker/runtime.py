"""Run-time conveniences of ``pykbroker serve``: the ready file, JSON log lines and the collector's
settings once started."""

from __future__ import annotations

import gc
import logging
import os
import time
from pathlib import Path
from typing import Any

import orjson

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

#: The cyclic collector's thresholds while serving (CPython's are 700, 10, 10). A request waiting
#: for its group commit (Produce) lives across thousands of allocations; with 700 every one of them
#: reaches the oldest generation, whose full passes then walk every partition's objects: with one
#: record into each of 10,000 partitions that was half the CPU of a request (produce_cpu_bench
#: --one-each, 10,000 partitions: 173 us a request with 700, 90-120 with 3,000-20,000).
GC_THRESHOLD = (10_000, 10, 10)


def tune_collector() -> None:
    """What ``serve`` does to the collector once listening: what start-up built (modules, classes,
    the loaded logs and groups) lives as long as the process, out of the generations (a full pass no
    longer walks it again and again); the first generation collected every ``GC_THRESHOLD[0]``
    allocations, so requests in flight die young instead of being promoted."""
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``ts`` (UTC, ISO 8601), ``level``, ``logger``, ``message`` and, for
    an exception, ``exception`` (its traceback as text)."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(out).decode()


def configure_logging(level: str, fmt: str, stream: Any) -> None:
    """The root logger at ``level`` on ``stream``, as text (Kafka-like lines) or JSON lines."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(level.upper())


def write_ready_file(path: Path, addresses: list[tuple[str, int]]) -> None:
    """Write ``host:port`` of each bound listener, one a line (the first: the default listener), by
    an atomic rename: whoever sees the file sees all of it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text("".join(f"{host}:{port}\n" for host, port in addresses))
    os.replace(tmp, path)


def remove_ready_file(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
