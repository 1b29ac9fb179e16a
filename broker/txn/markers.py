"""Writing a transaction's markers (broker/log/control.py) to every partition it touched: Kafka's
TransactionMarkerChannelManager and WriteTxnMarkers, in one process. Appending a marker ends the
producer's transaction in that partition (broker/log/producers.py); the marker of
``__consumer_offsets`` goes through the group coordinator, which makes the transaction's offset
commits visible or drops them.

On a multi-node cluster (``leader_of``) every partition has one log whatever node leads it, so a
marker is appended directly, carrying the partition's current leader epoch, as its leader would
write it. A partition with no live leader cannot take its marker: as Kafka's marker channel keeps
markers for an unavailable broker queued and retries them, its marker waits (checked every
``retry_s``) until a replica leads again, and the transaction completes only then.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from broker.log.batch import iter_batches
from broker.log.control import marker_batch

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
#: how often a marker waiting for its partition to have a leader looks again (Kafka's
#: retry.backoff.ms default)
RETRY_S = 0.1


async def write(
    logs: Any,
    groups: Any,
    pid: int,
    epoch: int,
    commit: bool,
    partitions: list[tuple[str, int]],
    leader_of: Callable[[str, int], tuple[int, int]] | None = None,
    retry_s: float = RETRY_S,
) -> None:
    """Append a marker to every partition (a deleted one is skipped, as Kafka skips partitions it
    no longer knows) and wait until all of them are durable. ``leader_of``: (leader, leader epoch)
    of a partition (None: a single node, which leads everything at epoch 0)."""
    waits = []
    pending = list(partitions)
    warned = False
    while True:
        now = logs.now_ms()
        leaderless = []
        for topic, partition in pending:
            if topic == OFFSETS_TOPIC:
                out = groups.txn_marker(pid, epoch, commit)
                if out is not None:
                    waits.append(out)
                continue
            plog = logs.get(topic, partition)
            if plog is None:
                continue
            leader_epoch = -1
            if leader_of is not None:
                leader, leader_epoch = leader_of(topic, partition)
                if leader < 0 and leader_epoch < 0:
                    continue  # no longer a partition (deleted meanwhile)
                if leader < 0:
                    leaderless.append((topic, partition))
                    continue
            data = bytearray(marker_batch(pid, epoch, commit, now, leader_epoch=leader_epoch))
            plog.append(data, iter_batches(data, verify_crc=False), now)
            fut = logs.appended(plog)
            if fut is not None:
                waits.append(fut)
        if not leaderless:
            break
        if not warned:
            log.info(
                "producer %d: markers wait for a leader of %s",
                pid,
                ", ".join(f"{t}-{p}" for t, p in leaderless),
            )
            warned = True
        pending = leaderless
        await asyncio.sleep(retry_s)
    for w in waits:
        await asyncio.shield(w)  # (shared with other writers: a cancelled completion leaves it be)
