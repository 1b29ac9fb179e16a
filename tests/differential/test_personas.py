"""The persona table of Kafka 4.3 (read off its kafka-clients jar by codegen/personas.py) against
what a running Apache Kafka 4.3 broker advertises: the same, but for the two things a broker adds at
run time -- Produce v0-2, which Kafka 4 keeps for old librdkafka clients, and the client telemetry
APIs (71, 72), advertised only when a metrics plugin is configured. pykbroker serves neither, so a
4.3 persona advertises what Kafka 4.3 does for every API both implement."""

from __future__ import annotations

from broker.personas import PERSONAS
from broker.protocol.generated.api_versions import ApiVersionsRequest
from tests.support.wire import WireClient


def test_the_4_3_persona_is_what_kafka_4_3_advertises(real_kafka):
    with WireClient(real_kafka.port) as c:
        resp = c.call(18, 3, ApiVersionsRequest("persona", "1"))
    real = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    table = dict(PERSONAS["4.3"])
    assert real.pop(0) == (0, table.pop(0)[1])  # Produce: Kafka 4 advertises v0-2 for old librdkafka
    assert {71, 72} <= set(table) and not {71, 72} & set(real)  # telemetry: only with a metrics plugin
    del table[71], table[72]
    assert real == table
