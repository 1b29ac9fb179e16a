"""Idempotent-producer state of one partition: per producer id, its epoch and its last five batches.

``check`` decides what to do with an incoming batch before it is appended: accept it, answer it as a
duplicate of a batch already in the log (with that batch's offsets), or refuse it with
OUT_OF_ORDER_SEQUENCE_NUMBER / INVALID_PRODUCER_EPOCH, as Kafka's ProducerStateManager does.
``record`` applies an appended batch. The state is rebuilt after a restart by replaying batch
headers from the log (see PartitionLog), starting from a snapshot when one is present.
``remove_expired`` forgets producers that have not written for ``producer.id.expiration.ms`` (by
their last batch's timestamp, as Kafka; never one whose transaction is open).
"""

from __future__ import annotations

from typing import NamedTuple

from broker.protocol.errors import ErrorCode, KafkaError

from .batch import CONTROL_MASK, TRANSACTIONAL_MASK, BatchInfo

MAX_CACHED_BATCHES = 5
SEQ_MOD = 1 << 31


class CachedBatch(NamedTuple):  # not a dataclass: see broker.config.Setting
    """A producer's recent batch, kept to answer a retried one as a duplicate."""

    first_seq: int
    last_seq: int
    base_offset: int
    last_offset: int
    timestamp: int


class ProducerEntry:
    """One producer's state in one partition. A plain slotted class (one is made for each partition
    a new producer writes to: one record into each of 10,000 partitions makes 10,000 of them), with
    no per-instance default factory to call."""

    __slots__ = ("epoch", "batches", "txn_first_offset", "coordinator_epoch", "last_timestamp")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        #: its last MAX_CACHED_BATCHES batches, oldest first (a retry of one is answered as a
        #: duplicate); a list, not a bounded deque, whose first block of 64 slots a new entry
        #: would allocate for at most five
        self.batches: list[CachedBatch] = []
        #: first offset of the producer's open transaction in this partition, -1 when none
        self.txn_first_offset = -1
        #: the coordinator epoch of the last marker written for it (-1: none yet)
        self.coordinator_epoch = -1
        #: the max timestamp of its last batch or marker (Kafka's lastTimestamp: expiry counts from it)
        self.last_timestamp = -1

    def __repr__(self) -> str:
        return (
            f"ProducerEntry(epoch={self.epoch}, batches={list(self.batches)!r}, "
            f"txn_first_offset={self.txn_first_offset}, coordinator_epoch={self.coordinator_epoch}, "
            f"last_timestamp={self.last_timestamp})"
        )

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


class ProducerState:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        #: producer id -> first offset of its open transaction (Kafka's ongoingTxns)
        self.ongoing: dict[int, int] = {}

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction (the last stable offset's bound)."""
        return min(self.ongoing.values()) if self.ongoing else None

    def check(self, b: BatchInfo) -> CachedBatch | None:
        """None to append; a CachedBatch when ``b`` duplicates one already written; raises to refuse.
        (Runs once per appended batch: BatchInfo's properties and the entry's are computed inline.)"""
        pid = b.producer_id
        if pid < 0:
            return None
        entry = self.producers.get(pid)
        if entry is None:
            # any first sequence, as Kafka: the partition may have lost the producer's batches to
            # retention or DeleteRecords (or never had them: its producer expired)
            return None
        epoch = b.producer_epoch
        if epoch != entry.epoch:
            if epoch < entry.epoch:
                raise KafkaError(
                    ErrorCode.INVALID_PRODUCER_EPOCH,
                    f"producer {pid} epoch {epoch} is older than {entry.epoch}",
                )
            if b.base_sequence != 0:
                raise KafkaError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {pid} epoch {epoch} must start at sequence 0",
                )
            return None
        seq = b.base_sequence
        batches = entry.batches
        for cached in batches:
            if cached.first_seq == seq and cached.last_seq == b.last_sequence:
                return cached
        expected = (batches[-1].last_seq + 1) % SEQ_MOD if batches else 0
        if seq != expected:
            raise KafkaError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {pid}: sequence {seq} but {expected} was expected",
            )
        return None

    def record(self, b: BatchInfo) -> int | None:
        """Apply an appended batch; for a transaction marker, returns the first offset of the
        transaction it ends (the marker's own offset when the producer wrote nothing here).
        (BatchInfo's derived properties are computed inline: this runs once per appended batch.)"""
        pid = b.producer_id
        if pid < 0:
            return None
        entry = self.producers.get(pid)
        attributes = b.attributes
        epoch = b.producer_epoch
        if attributes & CONTROL_MASK:
            # a transaction marker (Kafka's appendEndTxnMarker): ends the open transaction and
            # moves the epoch; it has no sequence
            first = self.ongoing.pop(pid, b.base_offset)
            if entry is None or epoch > entry.epoch:
                entry = self.producers[pid] = ProducerEntry(epoch)
            entry.txn_first_offset = -1
            entry.coordinator_epoch = 0  # this node has always coordinated every transaction
            entry.last_timestamp = b.max_timestamp
            return first
        if entry is None or epoch > entry.epoch:
            entry = self.producers[pid] = ProducerEntry(epoch)
        base = b.base_offset
        if attributes & TRANSACTIONAL_MASK and entry.txn_first_offset < 0:
            entry.txn_first_offset = base
            self.ongoing[pid] = base
        delta = b.last_offset_delta
        seq = b.base_sequence
        timestamp = b.max_timestamp
        batches = entry.batches
        batches.append(
            CachedBatch(seq, -1 if seq < 0 else (seq + delta) % SEQ_MOD, base, base + delta, timestamp)
        )
        if len(batches) > MAX_CACHED_BATCHES:
            del batches[0]
        entry.last_timestamp = timestamp
        return None

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget every producer whose last write is ``expiration_ms`` or more before ``now_ms`` and
        that has no open transaction here (Kafka's removeExpiredProducers); returns how many. A
        forgotten producer may write again at any sequence (see ``check``)."""
        expired = [
            pid
            for pid, e in self.producers.items()
            if e.txn_first_offset < 0 and now_ms - e.last_timestamp >= expiration_ms
        ]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    def to_json(self) -> dict:
        return {
            str(pid): {
                "epoch": e.epoch,
                "batches": [
                    [c.first_seq, c.last_seq, c.base_offset, c.last_offset, c.timestamp] for c in e.batches
                ],
                **({"txn": e.txn_first_offset} if e.txn_first_offset >= 0 else {}),
                **({"ce": e.coordinator_epoch} if e.coordinator_epoch >= 0 else {}),
                "ts": e.last_timestamp,
            }
            for pid, e in self.producers.items()
        }

    @classmethod
    def from_json(cls, doc: dict) -> ProducerState:
        st = cls()
        for pid, e in doc.items():
            entry = ProducerEntry(e["epoch"])
            for fs, ls, bo, lo, ts in e["batches"][-MAX_CACHED_BATCHES:]:
                entry.batches.append(CachedBatch(fs, ls, bo, lo, ts))
            entry.txn_first_offset = e.get("txn", -1)
            entry.coordinator_epoch = e.get("ce", -1)
            # (snapshots written before "ts": the last cached batch's timestamp)
            entry.last_timestamp = e.get("ts", entry.batches[-1].timestamp if entry.batches else -1)
            st.producers[int(pid)] = entry
            if entry.txn_first_offset >= 0:
                st.ongoing[int(pid)] = entry.txn_first_offset
        return st

    def truncate_after(self, offset: int) -> None:
        """Forget batches at or beyond ``offset`` (after a log truncation)."""
        for pid in list(self.producers):
            e = self.producers[pid]
            if e.txn_first_offset >= offset:
                e.txn_first_offset = -1
                self.ongoing.pop(pid, None)
            kept = [c for c in e.batches if c.last_offset < offset]
            if not kept and e.txn_first_offset < 0:
                del self.producers[pid]
            else:
                e.batches = kept
