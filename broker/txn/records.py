"""``__transaction_state`` records: Kafka's TransactionLogKey and TransactionLogValue.

In the log a record's key is ``int16 key version (0) + TransactionLogKey`` and its value
``int16 value version + TransactionLogValue`` (empty: a tombstone, the transactional id expired), as
Kafka's TransactionLog writes them. The value version is Kafka's choice: 0 while the finalized
``transaction.version`` is 0, else 1 (flexible: the previous and next producer ids and the client's
transaction version are tagged fields of it); both are read.
"""

from __future__ import annotations

from dataclasses import dataclass
from struct import Struct

from broker.log.records import Record as LogRecord
from broker.log.records import build_batch, iter_records

from .generated import transaction_log_key as _key
from .generated import transaction_log_value as _value
from .generated.transaction_log_key import TransactionLogKey
from .generated.transaction_log_value import PartitionsSchema, TransactionLogValue

__all__ = ["PartitionsSchema", "RecordError", "TransactionLogValue", "TxnRecord", "decode", "to_batch"]

_I16 = Struct(">h")
KEY_VERSION = 0
_VALUE_ENCODERS = {0: _value.encode_v0, 1: _value.encode_v1}
_VALUE_DECODERS = {0: _value.decode_v0, 1: _value.decode_v1}


class RecordError(ValueError):
    """A transaction log record that cannot be decoded."""


@dataclass(slots=True)
class TxnRecord:
    """A transaction log record: a transactional id and its value (None: a tombstone)."""

    transactional_id: str
    value: TransactionLogValue | None  # None: tombstone
    #: not written (Kafka keeps it in memory only): the epoch before a KIP-360 bump; -1 on load
    last_producer_epoch: int = -1
    #: the version its value is written at (0 or 1); on load, the version it was read at
    value_version: int = 0

    def key_bytes(self) -> bytes:
        return _I16.pack(KEY_VERSION) + _key.encode_v0(
            TransactionLogKey(transactional_id=self.transactional_id)
        )

    def value_bytes(self) -> bytes | None:
        if self.value is None:
            return None
        return _I16.pack(self.value_version) + _VALUE_ENCODERS[self.value_version](self.value)


def decode(key: bytes | None, value: bytes | None) -> TxnRecord:
    if key is None or len(key) < 2:
        raise RecordError("transaction log record without a key")
    version = _I16.unpack_from(key, 0)[0]
    if version != KEY_VERSION:
        raise RecordError(f"unknown transaction log key version {version}")
    k, _ = _key.decode_v0(bytes(key), 2)
    if value is None or len(value) == 0:
        return TxnRecord(k.transactional_id, None)
    vv = _I16.unpack_from(value, 0)[0]
    decoder = _VALUE_DECODERS.get(vv)
    if decoder is None:
        raise RecordError(f"unknown transaction log value version {vv}")
    v, _ = decoder(bytes(value), 2)
    return TxnRecord(k.transactional_id, v, value_version=vv)


def to_batch(records: list[TxnRecord], now_ms: int) -> bytes:
    """One uncompressed batch of ``records`` (offsets are assigned by the log)."""
    return build_batch(
        [LogRecord(i, 0, r.key_bytes(), r.value_bytes(), []) for i, r in enumerate(records)],
        base_timestamp=now_ms,
    )


def from_batches(data: bytes) -> list[tuple[int, TxnRecord]]:
    """(offset, record) for every record of ``data`` (whole batches; control batches skipped)."""
    return [(off, decode(k, v)) for off, _ts, k, v, _h, info in iter_records(data) if not info.is_control]
