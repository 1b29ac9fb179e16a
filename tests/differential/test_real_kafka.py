"""The reference Kafka broker itself: it starts, answers on its bootstrap address, and a real client
round-trips records through it (so a differential failure is never a broken reference)."""

from __future__ import annotations

from broker.protocol.generated.api_versions import ApiVersionsRequest
from tests.support.real_kafka import RealKafka
from tests.support.wire import WireClient


def test_reference_broker_answers_api_versions(real_kafka: RealKafka) -> None:
    with WireClient(real_kafka.port) as c:
        resp = c.call(18, 3, ApiVersionsRequest("differential", "1"))
    assert resp.error_code == 0
    keys = {k.api_key for k in resp.api_keys}
    assert {0, 1, 3, 11, 18, 68} <= keys


def test_reference_broker_round_trips_records(real_kafka: RealKafka) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    topic = "rk-smoke"
    producer = KafkaProducer(bootstrap_servers=real_kafka.bootstrap)
    for i in range(5):
        producer.send(topic, key=b"k%d" % i, value=b"v%d" % i)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(
        topic, bootstrap_servers=real_kafka.bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=10000
    )
    got = [(m.key, m.value) for m in consumer]
    consumer.close()
    assert got == [(b"k%d" % i, b"v%d" % i) for i in range(5)]
