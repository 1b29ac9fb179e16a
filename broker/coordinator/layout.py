"""Which layout the coordinator log's records have: Kafka's, or an earlier pykbroker's below an offset.

Before pykbroker followed Kafka's record layouts exactly, two values differed from Kafka's at the
same record version (0), so their bytes cannot say which layout they have:

- ConsumerGroupMemberMetadataValue had ServerAssignor before RebalanceTimeoutMs (Kafka: after);
- ConsumerGroupPartitionMetadataValue's TopicMetadata had no PartitionMetadata array.

So the data directory records the coordinator-log offset from which records have Kafka's layout, in
``coordinator-layout.json`` (``{"kafka_layout_from": N}``). A broker that finds no such file writes it
durably at start-up, before it can append a record: 0 when there is no coordinator log yet (a new
data directory: every record is Kafka's), else the log's end offset (every record already there was
written by an earlier version). Records below the offset are decoded with the legacy decoders
(``decode_record(..., legacy=True)``); the log cleaner keeps records' offsets, so the rule survives
compaction. Readers that never write (the Spark source) apply the same rule, treating a data
directory without the file as written entirely by an earlier version.
"""

from __future__ import annotations

from pathlib import Path

import orjson

from broker.datadir import write_durably

LAYOUT_FILE = "coordinator-layout.json"
#: what readers assume of a data directory with no layout file: every record is legacy
ALL_LEGACY = 1 << 62


class LayoutError(RuntimeError):
    """The layout file exists but cannot be read."""


def read_kafka_layout_from(data_dir: Path | str) -> int | None:
    """The offset from which the coordinator log has Kafka's layout, or None with no layout file."""
    path = Path(data_dir) / LAYOUT_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        value = orjson.loads(raw)["kafka_layout_from"]
    except (orjson.JSONDecodeError, KeyError, TypeError) as e:
        raise LayoutError(f"{path} is not a coordinator layout file: {e}") from e
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise LayoutError(f"{path}: kafka_layout_from must be a non-negative integer, got {value!r}")
    return value


def ensure_kafka_layout_from(data_dir: Path | str, log_end_offset: int | None) -> int:
    """The data directory's layout offset, written (durably) first if it has none: 0 with no
    coordinator log (``log_end_offset`` None), else the log's end offset."""
    found = read_kafka_layout_from(data_dir)
    if found is not None:
        return found
    value = 0 if log_end_offset is None else log_end_offset
    write_kafka_layout_from(data_dir, value)
    return value


def write_kafka_layout_from(data_dir: Path | str, offset: int) -> None:
    path = Path(data_dir) / LAYOUT_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    write_durably(path, orjson.dumps({"kafka_layout_from": offset}) + b"\n")


def reader_kafka_layout_from(data_dir: Path | str) -> int:
    """For readers that never write: the recorded offset, or :data:`ALL_LEGACY` without one."""
    found = read_kafka_layout_from(data_dir)
    return ALL_LEGACY if found is None else found
