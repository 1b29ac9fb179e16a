"""The aborted-transaction index of a partition, persisted per segment as Kafka's ``.txnindex``.

An entry is an aborted transaction: its producer id, its first offset in this partition, the offset
of its abort marker (``last_offset``) and the partition's last stable offset when the marker was
written. A read_committed Fetch returns the entries that overlap the fetched range
(``aborted_transactions``), and the consumer skips those producers' batches from their first offset
until their marker. On disk each segment's file holds the entries whose marker lies in it, as
Kafka writes them: 34 bytes each, ``int16 version 0, int64 producer id, int64 first offset, int64
last offset, int64 last stable offset``. The partition log rebuilds the files that are missing,
or that lie past its producer-state snapshot, from the log itself (broker/log/partition.py).
"""

from __future__ import annotations

import os
from bisect import bisect_left
from pathlib import Path
from struct import Struct
from typing import NamedTuple

ENTRY = Struct(">hqqqq")  # 34 bytes
SUFFIX = ".txnindex"


class AbortedTxn(NamedTuple):  # not a dataclass: see broker.config.Setting
    """An aborted transaction's entry in a segment's transaction index."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def read_file(path: Path) -> list[AbortedTxn]:
    """The entries of one ``.txnindex`` file (a torn last entry is ignored)."""
    data = path.read_bytes()
    out = []
    for pos in range(0, len(data) - ENTRY.size + 1, ENTRY.size):
        version, pid, first, last, lso = ENTRY.unpack_from(data, pos)
        if version != 0:
            break
        out.append(AbortedTxn(pid, first, last, lso))
    return out


def write_file(path: Path, entries: list[AbortedTxn]) -> None:
    """Replace ``path`` with ``entries`` (removed when there are none)."""
    if not entries:
        path.unlink(missing_ok=True)
        return
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(
        b"".join(
            ENTRY.pack(0, e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset) for e in entries
        )
    )
    os.replace(tmp, path)


def append_file(path: Path, entry: AbortedTxn) -> None:
    with open(path, "ab") as f:
        f.write(
            ENTRY.pack(0, entry.producer_id, entry.first_offset, entry.last_offset, entry.last_stable_offset)
        )


class AbortedIndex:
    """A partition's aborted transactions in marker order."""

    def __init__(self) -> None:
        self.entries: list[AbortedTxn] = []
        self._lasts: list[int] = []

    def add(self, entry: AbortedTxn) -> None:
        if self._lasts and entry.last_offset < self._lasts[-1]:
            i = bisect_left(self._lasts, entry.last_offset)
            self.entries.insert(i, entry)
            self._lasts.insert(i, entry.last_offset)
            return
        self.entries.append(entry)
        self._lasts.append(entry.last_offset)

    def overlapping(self, start: int, upper: int) -> list[AbortedTxn]:
        """Aborted transactions a read of ``[start, upper)`` must know: marker at or after
        ``start`` and first offset below ``upper`` (Kafka's collectAbortedTransactions)."""
        i = bisect_left(self._lasts, start)
        return [e for e in self.entries[i:] if e.first_offset < upper]

    def between(self, lo: int, hi: int) -> list[AbortedTxn]:
        """Entries whose marker lies in ``[lo, hi)`` (one segment's file)."""
        return self.entries[bisect_left(self._lasts, lo) : bisect_left(self._lasts, hi)]

    def replace(self, lo: int, hi: int, entries: list[AbortedTxn]) -> None:
        """Put ``entries`` (markers in ``[lo, hi)``, in marker order) in place of the entries whose
        marker lies there (a cleaned range)."""
        i, j = bisect_left(self._lasts, lo), bisect_left(self._lasts, hi)
        self.entries[i:j] = entries
        self._lasts[i:j] = [e.last_offset for e in entries]

    def truncate(self, offset: int) -> None:
        """Forget markers at or beyond ``offset`` (a log truncation)."""
        i = bisect_left(self._lasts, offset)
        del self.entries[i:], self._lasts[i:]

    def drop_below(self, offset: int) -> None:
        """Forget markers below ``offset`` (segments deleted)."""
        i = bisect_left(self._lasts, offset)
        del self.entries[:i], self._lasts[:i]
