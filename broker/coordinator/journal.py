"""The rebalance journal: ``<data dir>/group-rebalances.jsonl``, one JSON line each time a classic
group starts a rebalance (enters PreparingRebalance): ``{"group", "generation", "join_started_ms"}``,
the generation being formed and the coordinator clock's time (the same clock that timestamps the
coordinator log's records).

Kafka's GroupMetadata record carries the time the group entered its current state, which for the
record written at the end of a rebalance is the end of the join phase; the join phase itself -- often
most of a rebalance, members waiting for each other's next heartbeat -- leaves no trace in the log.
The Spark timeline job reads this file (when reading a data directory) to measure rebalances from
their first JoinGroup. A diagnostic side channel like the broker's own log: appended without fsync,
rotated at ``MAX_BYTES`` (one older file kept), never read back by the broker.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import orjson

log = logging.getLogger(__name__)

FILE = "group-rebalances.jsonl"
MAX_BYTES = 8 * 1024 * 1024


class RebalanceJournal:
    def __init__(self, data_dir: Path, max_bytes: int = MAX_BYTES):
        self.path = Path(data_dir) / FILE
        self.max_bytes = max_bytes
        self._file = None
        self._size = 0
        self.failed = False

    def __call__(self, group_id: str, generation: int, now_ms: int) -> None:
        if self.failed:
            return
        line = orjson.dumps({"group": group_id, "generation": generation, "join_started_ms": now_ms}) + b"\n"
        try:
            if self._file is None:
                self._file = open(self.path, "ab", buffering=0)  # noqa: SIM115 (kept open, closed by close())
                self._size = self._file.tell()
            if self._size + len(line) > self.max_bytes:
                self._file.close()
                os.replace(self.path, self.path.with_name(FILE + ".1"))
                self._file = open(self.path, "ab", buffering=0)  # noqa: SIM115
                self._size = 0
            self._file.write(line)
            self._size += len(line)
        except OSError as e:  # diagnostics only: the broker goes on without them
            log.warning("rebalance journal %s disabled: %s", self.path, e)
            self.failed = True

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
