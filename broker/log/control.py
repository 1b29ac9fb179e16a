"""Transaction markers: the control batch a commit or abort writes to each partition of a
transaction (Kafka's EndTransactionMarker, which WriteTxnMarkers writes there).

A marker is a batch with the control and transactional bits, the producer's id and epoch, base
sequence -1 and one record: key ``int16 version 0, int16 type`` (0 abort, 1 commit), value
``int16 version 0, int32 coordinator epoch``.
"""

from __future__ import annotations

from struct import Struct

from .records import Record, build_batch

ABORT, COMMIT = 0, 1
_KEY = Struct(">hh")
_VALUE = Struct(">hi")


def marker_batch(
    pid: int, epoch: int, commit: bool, now_ms: int, coordinator_epoch: int = 0, leader_epoch: int = -1
) -> bytes:
    """One marker batch (offsets are assigned by the log); ``leader_epoch``: its partition leader
    epoch (the partition's current one, as Kafka's leader writes a marker)."""
    key = _KEY.pack(0, COMMIT if commit else ABORT)
    value = _VALUE.pack(0, coordinator_epoch)
    return build_batch(
        [Record(0, 0, key, value, [])],
        base_timestamp=now_ms,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=-1,
        transactional=True,
        control=True,
        partition_leader_epoch=leader_epoch,
    )


def parse_marker(key: bytes | None) -> bool | None:
    """True for a commit marker's key, False for an abort, None for any other control record."""
    if key is None or len(key) < 4:
        return None
    _version, kind = _KEY.unpack_from(key, 0)
    return {COMMIT: True, ABORT: False}.get(kind)
