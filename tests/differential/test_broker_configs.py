"""DescribeConfigs on the BROKER resource beside Apache Kafka 4.3: every property Kafka lists, this
broker lists too, with Kafka's type; those it does not use carry Kafka's default (the same as the
real broker's default synonym), are read-only and say they have no effect here. PASSWORD values are
never shown."""

from __future__ import annotations

from broker.protocol.generated.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from tests.support.wire import WireClient

BROKER, DEFAULT_CONFIG, PASSWORD = 4, 5, 9


def _all(port: int, node_id: int) -> dict:
    req = DescribeConfigsRequest([DescribeConfigsResource(BROKER, str(node_id), None)], True, True)
    with WireClient(port) as c:
        [result] = c.call(32, 4, req).results
    assert result.error_code == 0
    return {e.name: e for e in result.configs}


def test_every_kafka_broker_property_is_listed_with_its_type_and_default(peers):
    from broker.config import SETTINGS

    ours, theirs = peers
    mine, kafka = _all(ours.port, ours.node_id), _all(theirs.port, theirs.node_id)
    # an internal setting of Kafka's, listed only because the reference broker sets it
    # (tests/support/real_kafka.py TEST_SETTINGS); a Kafka broker does not list it otherwise
    kafka.pop("log.initial.task.delay.ms", None)
    assert set(kafka) <= set(mine), sorted(set(kafka) - set(mine))
    wrong_types = {
        n: (mine[n].config_type, k.config_type)
        for n, k in kafka.items()
        if mine[n].config_type != k.config_type
    }
    assert not wrong_types
    for name, k in kafka.items():
        e = mine[name]
        assert e.read_only, name
        if name in SETTINGS:
            continue
        kafka_default = [s.value for s in k.synonyms if s.source == DEFAULT_CONFIG]
        our_default = [s.value for s in e.synonyms if s.source == DEFAULT_CONFIG]
        assert our_default == kafka_default, name
        assert e.config_source == DEFAULT_CONFIG and "no effect" in e.documentation, name
        if e.config_type == PASSWORD:
            assert e.value is None and e.is_sensitive
