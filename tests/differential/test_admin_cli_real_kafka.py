"""The admin commands work against the released Apache Kafka broker too (they speak only the
protocol): topics, produce/consume, groups lag and reset, cluster describe."""

from __future__ import annotations

import uuid

import orjson
from click.testing import CliRunner

from broker.cli import main
from broker.cli_admin.common import EXIT_KAFKA_ERROR


def _run(kafka, *args: str, input: str | None = None, code: int = 0):
    result = CliRunner().invoke(main, [*args, "-b", kafka.bootstrap], input=input, catch_exceptions=False)
    assert result.exit_code == code, (result.stdout, result.stderr)
    return result


def test_admin_cli_against_real_kafka(real_kafka):
    topic, group = f"cli-{uuid.uuid4().hex[:8]}", f"cli-g-{uuid.uuid4().hex[:8]}"
    # (a retention long enough that Kafka's retention check never deletes the records under a slow
    # consumer: with 60 s it did once, and the consumer then waited for them forever)
    _run(real_kafka, "topics", "create", topic, "-p", "2", "-c", "retention.ms=86400000")
    assert "TOPIC_ALREADY_EXISTS" in _run(real_kafka, "topics", "create", topic, code=EXIT_KAFKA_ERROR).stderr
    (d,) = orjson.loads(_run(real_kafka, "topics", "describe", topic, "--json").stdout)
    assert len(d["partitions"]) == 2 and d["configs"]["retention.ms"] == "86400000"
    assert topic in _run(real_kafka, "topics", "list").stdout

    _run(real_kafka, "produce", topic, "-K", ":", input="".join(f"k{i}:v{i}\n" for i in range(6)))
    # every partition, assigned (group consumption is tested against pykbroker in tests/cli_admin;
    # here a kafka-python group member once never got its records within the full suite)
    got = _run(real_kafka, "consume", topic, "--from-beginning", "-n", "6", "--idle-timeout", "60").stdout
    assert sorted(got.split()) == [f"v{i}" for i in range(6)]
    _run(real_kafka, "groups", "reset-offsets", group, "--topic", topic, "--to-latest", "--execute")
    assert orjson.loads(_run(real_kafka, "groups", "lag", group, "--json").stdout)["total_lag"] == 0
    _run(real_kafka, "groups", "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute")
    assert orjson.loads(_run(real_kafka, "groups", "lag", group, "--json").stdout)["total_lag"] == 6

    cluster = orjson.loads(_run(real_kafka, "cluster", "describe", "--json").stdout)
    assert [b["port"] for b in cluster["brokers"]] == [real_kafka.port]
    _run(real_kafka, "groups", "delete", group)
    _run(real_kafka, "topics", "delete", topic)
