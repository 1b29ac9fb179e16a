"""``pykbroker dump``: the construct declarations (broker/dump/formats.py) read what the broker wrote
exactly as the broker's own decoders do (cross_check), for user topics in every codec, headers,
keys, control batches, indexes and the coordinator log of classic groups."""

from __future__ import annotations

from pathlib import Path

import confluent_kafka
import orjson
import pytest
from click.testing import CliRunner
from kafka import KafkaConsumer, KafkaProducer

from broker.cli import main
from broker.coordinator.records import decode_record
from broker.dump.reader import dump_data_dir, dump_partition, plain
from broker.log.records import build_batch, iter_records
from broker.log.segment import Segment
from broker.testing import running_broker


def _text(b: bytes | None):
    return plain(b) if b is not None else None


def cross_check(data_dir: Path) -> int:
    """Compare the dump of every partition with the broker's decoders; returns the records checked."""
    checked = 0
    dumped = {p["partition"]: p for p in dump_data_dir(data_dir)["partitions"]}
    for part_dir in sorted(p for p in data_dir.iterdir() if p.is_dir() and any(p.glob("*.log"))):
        segments = {s["file"]: s for s in dumped[part_dir.name]["segments"]}
        for log in sorted(part_dir.glob("*.log")):
            ours = [r for b in segments[log.name]["batches"] for r in b["records"]]
            assert all(b["crc_ok"] for b in segments[log.name]["batches"])
            theirs = list(iter_records(log.read_bytes()))
            assert len(ours) == len(theirs)
            for mine, (offset, ts, key, value, headers, info) in zip(ours, theirs, strict=True):
                assert (mine["offset"], mine["timestamp"]) == (offset, ts)
                assert (mine["key"], mine["value"]) == (key, value)
                assert mine["headers"] == [(k, v) for k, v in headers]
                if "coordinator" in mine and not info.is_control:
                    _same_coordinator_record(mine["coordinator"], decode_record(key, value))
                checked += 1
    return checked


def _same_coordinator_record(mine: dict, theirs) -> None:
    assert list(mine["key"].values()) == [getattr(theirs.key, f) for f in theirs.key._fields]
    if theirs.value is None:
        assert mine["value"] is None
        return
    if "hex" in mine["value"]:  # a KIP-848 value: not declared, only its key is read
        return
    for name, v in mine["value"].items():
        if name in ("version", "topic_id"):
            continue
        expected = getattr(theirs.value, name)
        if name == "members":
            assert [m["member_id"] for m in v] == [m.member_id for m in expected]
            assert [m["session_timeout"] for m in v] == [m.session_timeout for m in expected]
        else:
            assert v == expected, name
    if "topic_id" in mine["value"]:
        assert mine["value"]["topic_id"] == str(theirs.value.topic_id)


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Path:
    """A data directory with every codec, keys, headers, nulls, and a classic group's commits."""
    data = tmp_path_factory.mktemp("dump") / "data"
    with running_broker(data, {"group.initial.rebalance.delay.ms": 0}) as b:
        for codec in ("gzip", "snappy", "lz4", "zstd", None):
            producer = KafkaProducer(bootstrap_servers=b.bootstrap, compression_type=codec, linger_ms=20)
            for i in range(5):
                producer.send(
                    f"t-{codec}",
                    key=None if i == 0 else f"k{i}".encode(),
                    value=None if i == 4 else bytes([i, 255]) + b"x" * 500,
                    headers=[("h", b"v"), ("n", b"")] if i == 2 else None,
                )
            producer.flush()
            producer.close()
        consumer = KafkaConsumer(
            "t-None",
            bootstrap_servers=b.bootstrap,
            group_id="g",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        got = 0
        while got < 5:
            got += sum(len(v) for v in consumer.poll(timeout_ms=500).values())
        consumer.commit()
        consumer.close()
        # a KIP-848 group: the coordinator's ConsumerGroup* records (types 3-8)
        modern = confluent_kafka.Consumer(
            {"bootstrap.servers": b.bootstrap, "group.id": "g848", "group.protocol": "consumer",
             "auto.offset.reset": "earliest", "enable.auto.commit": False}
        )  # fmt: skip
        modern.subscribe(["t-gzip"])
        got = 0
        while got < 5:
            msg = modern.poll(0.5)
            got += msg is not None and msg.error() is None
        modern.commit(asynchronous=False)
        modern.close()
    return data


def test_dump_reads_what_the_broker_decodes(written):
    assert cross_check(written) >= 25 + 2
    d = dump_data_dir(written)
    parts = {p["partition"]: p for p in d["partitions"]}
    batches = [b for s in parts["t-zstd-0"]["segments"] for b in s["batches"]]
    assert {b["compression"] for b in batches} == {"zstd"}
    recs = [r for b in batches for r in b["records"]]
    assert (
        recs[2]["headers"] == [("h", b"v"), ("n", b"")]
        and recs[4]["value"] is None
        and recs[0]["key"] is None
    )
    coordinator = [
        r["coordinator"]
        for s in parts["__consumer_offsets-0"]["segments"]
        for b in s["batches"]
        for r in b["records"]
    ]
    commits = [c for c in coordinator if c["type"] == "OffsetCommit" and c["key"]["group"] == "g"]
    assert commits[-1]["key"] == {"group": "g", "topic": "t-None", "partition": 0}
    assert commits[-1]["value"]["offset"] == 5
    assert any(c["type"] == "GroupMetadata" and c["value"] and c["value"]["members"] for c in coordinator)
    member = next(c for c in coordinator if c["type"] == "ConsumerGroupMemberMetadata")
    assert member["key"]["group"] == "g848" and member["key"]["member_id"]
    # a small log (one segment, one index entry) is stopped without an index (its open scans it);
    # the broker's own index, once written, is what the dump reads
    assert "index" not in parts["t-None-0"]["segments"][0]
    seg = Segment(written / "t-None-0", 0)
    seg.recover(verify_crc=True, truncate_bad_tail=False)
    seg.write_index()
    seg.close()
    index = dump_partition(written / "t-None-0")["segments"][0]["index"]
    assert index["entries"][0] == {"offset": 0, "position": 0}
    (written / "t-None-0" / f"{0:020d}.index").unlink()  # (the module's other tests: as stopped)
    assert "recovery-point-offset-checkpoint" in d["files"] and "topics.json" in d["files"]


def test_control_batches_and_log_append_time(tmp_path):
    part = tmp_path / "t-0"
    part.mkdir()
    data = build_batch([(b"k", b"v")], base_offset=0, producer_id=7, producer_epoch=1, base_sequence=0,
                       transactional=True)  # fmt: skip
    commit_marker = (b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x05")  # COMMIT, coordinator epoch 5
    data += build_batch([commit_marker], base_offset=1, producer_id=7, producer_epoch=1, transactional=True,
                        control=True)  # fmt: skip
    data += build_batch(
        [(None, b"x")], base_offset=2, base_timestamp=1000, max_timestamp=5000, timestamp_type=1
    )
    (part / "00000000000000000000.log").write_bytes(data)
    (batch, control, appended) = dump_partition(part)["segments"][0]["batches"]
    assert batch["transactional"] and not batch["control"]
    assert control["control"] and control["records"][0]["control"] == {
        "type": "COMMIT",
        "version": 0,
        "coordinator_epoch": 5,
    }
    assert appended["timestamp_type"] == "LogAppendTime" and appended["records"][0]["timestamp"] == 5000
    assert cross_check(tmp_path) == 3


def test_dump_command(written):
    runner = CliRunner()
    text = runner.invoke(main, ["dump", str(written)], catch_exceptions=False)
    assert text.exit_code == 0
    assert "== __consumer_offsets-0 ==" in text.stdout and " OffsetCommit {" in text.stdout
    assert "crc BAD" not in text.stdout
    js = runner.invoke(main, ["dump", str(written), "--json", "-p", "t-lz4-0"], catch_exceptions=False)
    doc = orjson.loads(js.stdout)
    assert [p["partition"] for p in doc["partitions"]] == ["t-lz4-0"]
    assert doc["partitions"][0]["segments"][0]["batches"][0]["records"][1]["value"] == {
        "hex": "01ff" + "78" * 500
    }
    one = runner.invoke(main, ["dump", str(written / "t-gzip-0"), "--no-records"], catch_exceptions=False)
    assert one.exit_code == 0 and "gzip" in one.stdout and "value" not in one.stdout
