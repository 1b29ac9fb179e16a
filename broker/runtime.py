"""Run-time conveniences of ``pykbroker serve``: the ready file and JSON log lines."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

import orjson

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


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
