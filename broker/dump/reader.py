"""Read a data directory with the construct declarations of formats.py: plain dicts, ready for JSON."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from construct import ConstructError, Container, ListContainer

from broker.dump import formats as F
from broker.log.batch import record_timestamp
from broker.log.crc import crc32c
from broker.log.records import decompress  # the codecs only; the format itself is read here

COORDINATOR_TOPICS = ("__consumer_offsets",)
TEXT_FILES = ("meta.properties", "recovery-point-offset-checkpoint")
JSON_FILES = ("topics.json",)
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def plain(obj: Any) -> Any:
    """construct's containers as dicts and lists (private ``_io`` entries dropped), bytes as text
    when UTF-8 and ``{"hex": ...}`` otherwise."""
    if isinstance(obj, Container | dict):
        return {k: plain(v) for k, v in obj.items() if not k.startswith("_")}
    if isinstance(obj, ListContainer | list | tuple):
        return [plain(v) for v in obj]
    if isinstance(obj, bytes | bytearray):
        try:
            return bytes(obj).decode("utf-8")
        except UnicodeDecodeError:
            return {"hex": bytes(obj).hex()}
    return obj


def read_batches(data: bytes) -> Iterator[dict[str, Any]]:
    """Every batch of a segment with its records (decompressed, offsets and timestamps resolved)."""
    pos = 0
    while pos < len(data):
        try:
            batch = F.RecordBatch.parse(data[pos:])
        except ConstructError as e:
            yield {"position": pos, "error": f"not a batch: {str(e).splitlines()[0]}"}
            return
        size = 12 + batch.batch_length
        attributes = batch.attributes
        codec = attributes & 0x07
        control = bool(attributes & 0x20)
        log_append_time = bool(attributes & 0x08)
        raw = decompress(codec, batch.records_data) if codec else batch.records_data
        records = []
        for r in F.records_of(batch.records_count).parse(raw):
            rec: dict[str, Any] = {
                "offset": batch.base_offset + r.offset_delta,
                "timestamp": batch.max_timestamp
                if log_append_time
                else record_timestamp(batch.base_timestamp, r.timestamp_delta),
                "key": r.key,
                "value": r.value,
                "headers": [(h.key, h.value) for h in r.headers],
            }
            if control and r.key is not None and len(r.key) >= 4:
                ck = F.ControlKey.parse(r.key)
                rec["control"] = {"type": F.CONTROL_TYPES.get(ck.type, ck.type), "version": ck.version}
                if r.value:
                    rec["control"]["coordinator_epoch"] = F.ControlValue.parse(r.value).coordinator_epoch
            records.append(rec)
        yield {
            "position": pos,
            "size": size,
            "base_offset": batch.base_offset,
            "last_offset": batch.base_offset + batch.last_offset_delta,
            "partition_leader_epoch": batch.partition_leader_epoch,
            "crc_ok": crc32c(data[pos + 21 : pos + size]) == batch.crc,
            "compression": CODECS[codec] if codec < len(CODECS) else codec,
            "timestamp_type": "LogAppendTime" if log_append_time else "CreateTime",
            "transactional": bool(attributes & 0x10),
            "control": control,
            "base_timestamp": batch.base_timestamp,
            "max_timestamp": batch.max_timestamp,
            "producer_id": batch.producer_id,
            "producer_epoch": batch.producer_epoch,
            "base_sequence": batch.base_sequence,
            "records": records,
        }
        pos += size


def coordinator_record(key: bytes | None, value: bytes | None) -> dict[str, Any]:
    """A ``__consumer_offsets`` record: its type, key and value (``None`` for a tombstone)."""
    if key is None:
        return {"error": "no key"}
    k = F.CoordinatorKey.parse(key)
    out: dict[str, Any] = {"type": F.COORDINATOR_TYPES.get(k.type, str(k.type)), "key": plain(k.key)}
    if not value:
        out["value"] = None
        return out
    decl = F.coordinator_value(k.type)
    if decl is None:
        out["value"] = {"hex": bytes(value).hex()}
        return out
    v = decl.parse(value)
    body = plain(v.value)
    body["version"] = v.version
    for tagged in v.value.get("tagged_fields") or []:
        if k.type in F.OFFSET_COMMIT_TYPES and tagged.tag == 0 and len(tagged.data) == 16:
            body["topic_id"] = str(uuid.UUID(bytes=bytes(tagged.data)))
    body.pop("tagged_fields", None)
    out["value"] = body
    return out


def dump_partition(directory: Path) -> dict[str, Any]:
    coordinator = directory.name.rsplit("-", 1)[0] in COORDINATOR_TOPICS
    segments = []
    for log in sorted(directory.glob("*.log")):
        batches = list(read_batches(log.read_bytes()))
        if coordinator:
            for b in batches:
                if not b.get("control") and "records" in b:
                    for r in b["records"]:
                        r["coordinator"] = coordinator_record(r["key"], r["value"])
        segment: dict[str, Any] = {"file": log.name, "batches": batches}
        index = log.with_suffix(".index")
        if index.exists():
            segment["index"] = plain(F.OffsetIndex.parse(index.read_bytes()))
        segments.append(segment)
    out: dict[str, Any] = {"partition": directory.name, "segments": segments}
    for name in sorted(p.name for p in directory.iterdir() if p.suffix == ".json"):
        out[name] = json.loads((directory / name).read_text())
    return out


def dump_data_dir(path: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"path": str(path), "files": {}, "partitions": []}
    for name in TEXT_FILES:
        if (path / name).exists():
            out["files"][name] = (path / name).read_text().splitlines()
    for name in JSON_FILES:
        if (path / name).exists():
            out["files"][name] = json.loads((path / name).read_text())
    for d in sorted(p for p in path.iterdir() if p.is_dir() and any(p.glob("*.log"))):
        out["partitions"].append(dump_partition(d))
    return out
