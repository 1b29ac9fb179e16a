"""Streaming over a data directory: limits per trigger, AvailableNow, checkpoint resume, the durable
bound, and retention-deleted segments."""

from __future__ import annotations

import shutil

import pytest
from kafka import KafkaProducer

from broker.spark import jobs
from broker.testing import running_broker
from tests.spark import fixture_log
from tests.spark.fixture_log import EVENTS
from tests.support.spark import available_now


@pytest.fixture
def data_dir(history, tmp_path):
    d = tmp_path / "data"
    shutil.copytree(history.data_dir, d)
    return d


def _run(spark, d, ckpt, sink, **options):
    reader = spark.readStream.format("pykbroker").option("path", str(d)).option("subscribe", EVENTS)
    return available_now(reader, sink, ckpt, **options)


def test_limit_per_trigger_and_resume_reads_exactly_the_new_records(spark, data_dir, tmp_path):
    ckpt, sink = tmp_path / "ckpt", tmp_path / "sink"
    rows = _run(spark, data_dir, ckpt, sink, startingOffsets="earliest", maxRecordsPerTrigger="70")
    assert sum(rows) == 300 and max(rows) == 70 and len([n for n in rows if n]) == 5
    assert _run(spark, data_dir, ckpt, sink, maxRecordsPerTrigger="70") in ([], [0])
    with running_broker(data_dir, fixture_log.CONFIG) as b:
        p = KafkaProducer(bootstrap_servers=b.bootstrap)
        for i in range(45):
            p.send(EVENTS, value=f"new-{i}".encode(), partition=i % 3)
        p.flush()
        p.close()
    rows = _run(spark, data_dir, ckpt, sink, maxRecordsPerTrigger="70")
    assert sum(rows) == 45
    out = spark.read.parquet(str(sink))
    assert out.count() == 345
    assert out.select("partition", "offset").distinct().count() == 345
    new = sorted(bytes(r.value).decode() for r in out.where("offset >= 100").collect())
    assert new == sorted(f"new-{i}" for i in range(45))


def test_stream_stops_at_the_durable_offset(spark, data_dir, tmp_path):
    ckpt = data_dir / "recovery-point-offset-checkpoint"
    lines = ckpt.read_text().splitlines()
    ckpt.write_text("\n".join(line.replace(f"{EVENTS} 0 100", f"{EVENTS} 0 40") for line in lines) + "\n")
    rows = _run(spark, data_dir, tmp_path / "c", tmp_path / "s", startingOffsets="earliest")
    assert sum(rows) == 240
    assert (
        spark.read.parquet(str(tmp_path / "s")).where("partition = 0").agg({"offset": "max"}).first()[0] == 39
    )


def test_deleted_segment_fails_clearly_or_is_skipped(spark, data_dir, tmp_path):
    first = sorted((data_dir / f"{EVENTS}-0").glob("*.log"))[0]
    first.unlink()  # what retention does
    with pytest.raises(Exception, match="no longer stored"):
        _run(
            spark,
            data_dir,
            tmp_path / "c1",
            tmp_path / "s1",
            startingOffsets='{"events":{"0":0,"1":0,"2":0}}',
        )
    rows = _run(
        spark,
        data_dir,
        tmp_path / "c2",
        tmp_path / "s2",
        startingOffsets='{"events":{"0":0,"1":0,"2":0}}',
        failOnDataLoss="false",
    )
    lost = int(sorted((data_dir / f"{EVENTS}-0").glob("*.log"))[0].stem)
    assert lost > 0 and sum(rows) == 300 - lost


def test_export_job_is_incremental(spark, data_dir, tmp_path):
    out = tmp_path / "export"
    assert jobs.export(spark, str(data_dir), str(out)) == 480
    assert jobs.export(spark, str(data_dir), str(out)) == 0
    assert spark.read.parquet(str(out / "records")).count() == 480
