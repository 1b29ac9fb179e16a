"""Writing a transaction's markers (broker/log/control.py) to every partition it touched: Kafka's
TransactionMarkerChannelManager and WriteTxnMarkers, on one node. Appending a marker ends the
producer's transaction in that partition (broker/log/producers.py); the marker of
``__consumer_offsets`` goes through the group coordinator, which makes the transaction's offset
commits visible or drops them.
"""

from __future__ import annotations

from typing import Any

from broker.log.batch import iter_batches
from broker.log.control import marker_batch

OFFSETS_TOPIC = "__consumer_offsets"


async def write(
    logs: Any, groups: Any, pid: int, epoch: int, commit: bool, partitions: list[tuple[str, int]]
) -> None:
    """Append a marker to every partition (a deleted one is skipped, as Kafka skips partitions it
    no longer knows) and wait until all of them are durable."""
    now = logs.now_ms()
    waits = []
    for topic, partition in partitions:
        if topic == OFFSETS_TOPIC:
            out = groups.txn_marker(pid, epoch, commit)
            if out is not None:
                waits.append(out)
            continue
        plog = logs.get(topic, partition)
        if plog is None:
            continue
        data = bytearray(marker_batch(pid, epoch, commit, now))
        plog.append(data, iter_batches(data, verify_crc=False), now)
        fut = logs.appended(plog)
        if fut is not None:
            waits.append(fut)
    for w in waits:
        await w
