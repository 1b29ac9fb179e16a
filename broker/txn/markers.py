"""Transaction markers: the control batch a commit or abort writes to each partition of the
transaction (Kafka's EndTransactionMarker, written there by WriteTxnMarkers).

A marker is a batch with the control and transactional bits, the producer's id and epoch, base
sequence -1, and one record: key ``int16 version 0, int16 type`` (0 abort, 1 commit), value
``int16 version 0, int32 coordinator epoch``. Appending one ends the producer's transaction in
that partition (broker/log/producers.py). The markers of ``__consumer_offsets`` go through the
group coordinator, which makes the transaction's offset commits visible or drops them.
"""

from __future__ import annotations

from struct import Struct
from typing import Any

from broker.log.batch import iter_batches
from broker.log.records import Record, build_batch

OFFSETS_TOPIC = "__consumer_offsets"
ABORT, COMMIT = 0, 1
_KEY = Struct(">hh")
_VALUE = Struct(">hi")
#: this node has always been the coordinator of every transactional id
COORDINATOR_EPOCH = 0


def marker_batch(pid: int, epoch: int, commit: bool, now_ms: int) -> bytes:
    key = _KEY.pack(0, COMMIT if commit else ABORT)
    value = _VALUE.pack(0, COORDINATOR_EPOCH)
    return build_batch(
        [Record(0, 0, key, value, [])],
        base_timestamp=now_ms,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=-1,
        transactional=True,
        control=True,
    )


def parse_marker(key: bytes | None) -> bool | None:
    """True for a commit marker's key, False for an abort, None for anything else."""
    if key is None or len(key) < 4:
        return None
    _version, kind = _KEY.unpack_from(key, 0)
    return {COMMIT: True, ABORT: False}.get(kind)


async def write(
    logs: Any, groups: Any, pid: int, epoch: int, commit: bool, partitions: list[tuple[str, int]]
) -> None:
    """Append a marker to every partition (a deleted one is skipped, as Kafka skips partitions it
    no longer knows) and wait until all of them are durable."""
    now = logs.now_ms()
    waits = []
    for topic, partition in partitions:
        if topic == OFFSETS_TOPIC:
            if groups is not None:
                out = groups.txn_marker(pid, epoch, commit)
                if out is not None:
                    waits.append(out)
            continue
        plog = logs.get(topic, partition)
        if plog is None:
            continue
        data = bytearray(marker_batch(pid, epoch, commit, now))
        plog.append(data, list(iter_batches(data, verify_crc=False)), now)
        fut = logs.appended(plog)
        if fut is not None:
            waits.append(fut)
    for w in waits:
        await w
