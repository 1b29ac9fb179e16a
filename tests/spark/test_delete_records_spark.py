"""After DeleteRecords, Spark agrees with the broker on where the partition starts: Spark's Kafka
connector (ListOffsets EARLIEST) and the data-directory source (the log-start-offset checkpoint)
both read from the new log start offset."""

from __future__ import annotations

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from broker.testing import running_broker
from tests.integration.test_delete_records import TOPIC, produce


def test_spark_reads_from_the_moved_log_start(spark, kafka_format, tmp_path):
    data = tmp_path / "data"
    with running_broker(data, {"group.initial.rebalance.delay.ms": 0}) as b:
        b.call(b.broker.create_topic, TOPIC, 1)
        produce(b.bootstrap, 10)
        admin = AdminClient({"bootstrap.servers": b.bootstrap})  # kept: its futures need it alive
        [deleted] = admin.delete_records([TopicPartition(TOPIC, 0, 4)]).values()
        assert deleted.result(10).low_watermark == 4
        live = (
            spark.read.format(kafka_format)
            .option("kafka.bootstrap.servers", b.bootstrap)
            .option("subscribe", TOPIC)
            .option("startingOffsets", "earliest")
            .load()
        )
        assert sorted(r.offset for r in live.select("offset").collect()) == list(range(4, 10))
    # the broker has stopped: its data directory, read offline
    offline = spark.read.format("pykbroker").option("path", str(data)).option("subscribe", TOPIC).load()
    rows = sorted((r.offset, bytes(r.value)) for r in offline.select("offset", "value").collect())
    assert rows == [(i, b"v%d" % i) for i in range(4, 10)]
