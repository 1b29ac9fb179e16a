"""The pytest plugin (broker/pytest_plugin.py) as a user's project meets it: pytester runs small test
files that use its fixtures, marker and helpers, once in-process and once under pytest-xdist."""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.server  # the user tests start brokers on sockets (in-process or not)

#: -p loads the plugin where the entry point is not installed yet (an editable install of an older tree)
PLUGIN_ARGS = (
    ()
    if any(ep.value == "broker.pytest_plugin" for ep in entry_points(group="pytest11"))
    else ("-p", "broker.pytest_plugin")
)

USER_TESTS = """
import threading

import pytest
from kafka import KafkaConsumer


def test_session_broker_is_shared(kafka_broker, kafka):
    assert kafka.broker is kafka_broker
    assert kafka.bootstrap == f"127.0.0.1:{kafka_broker.port}"


def test_namespace_produce_consume_group(kafka):
    topic = kafka.create_topic("orders", partitions=2)
    assert topic.startswith(kafka.prefix) and topic.endswith("orders")
    metas = kafka.produce(topic, ["a", ("k", "b")], partition=0)
    assert [m.offset for m in metas] == [0, 1]
    consumer = KafkaConsumer(topic, bootstrap_servers=kafka.bootstrap, group_id=kafka.group(),
                             auto_offset_reset="earliest")
    try:
        records = []
        while len(records) < 2:
            for batch in consumer.poll(timeout_ms=500).values():
                records.extend(r.value for r in batch)
        desc = kafka.wait_for_stable_group(kafka.group(), members=1)
        assert len(desc["members"]) == 1
    finally:
        consumer.close()
    assert records == [b"a", b"b"]


def test_wait_for_a_kip848_group(kafka):
    import confluent_kafka

    topic = kafka.create_topic("modern", partitions=2)
    consumer = confluent_kafka.Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": kafka.group(),
                                         "group.protocol": "consumer"})
    consumer.subscribe([topic])
    done = threading.Event()

    def poll():
        while not done.is_set():
            consumer.poll(0.05)

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        desc = kafka.wait_for_stable_group(kafka.group(), members=1)
        assert desc["group_state"] == "Stable"
    finally:
        done.set()
        poller.join()
        consumer.close()


def test_other_tests_topics_are_gone(kafka):
    # the previous test's topic was deleted at its end; this test sees only its own names
    assert [t for t in kafka.admin.list_topics() if "orders" in t] == []


@pytest.mark.kafka_config({"num.partitions": 4}, **{"auto.create.topics.enable": "true"})
def test_marker_gives_a_private_broker(kafka, kafka_broker):
    assert kafka.broker is not kafka_broker
    assert kafka.broker.config["num.partitions"] == 4


def test_factory_starts_more_brokers(kafka_broker_factory):
    a = kafka_broker_factory({"num.partitions": 2})
    b = kafka_broker_factory()
    assert a.port != b.port and a.config["num.partitions"] == 2 and b.config["num.partitions"] == 1
"""


def test_fixtures_marker_and_helpers(pytester):
    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS, "-p", "no:cacheprovider", "--strict-markers", "-q")
    result.assert_outcomes(passed=6)


def test_ini_settings_reach_the_session_broker(pytester):
    pytester.makeini("[pytest]\nkafka_broker_config =\n    num.partitions=3\n")
    pytester.makepyfile(
        test_ini='def test_it(kafka_broker):\n    assert kafka_broker.config["num.partitions"] == 3\n'
        '    assert kafka_broker.config["group.initial.rebalance.delay.ms"] == 50\n'
    )
    pytester.runpytest_subprocess(*PLUGIN_ARGS, "-p", "no:cacheprovider", "-q").assert_outcomes(passed=1)


def test_parallel_under_xdist(pytester):
    pytest.importorskip("xdist")
    pytester.makepyfile(
        test_par="""
import pytest

@pytest.mark.parametrize("i", range(4))
def test_each_worker_has_its_broker(kafka, i):
    topic = kafka.create_topic("same-name")
    assert [m.offset for m in kafka.produce(topic, [str(i)])] == [0]
"""
    )
    result = pytester.runpytest_subprocess(*PLUGIN_ARGS, "-p", "no:cacheprovider", "-n", "2", "-q")
    result.assert_outcomes(passed=4)


FAILING_TEST = """
def test_fails_after_talking_to_kafka(kafka):
    topic = kafka.create_topic("orders")
    kafka.produce(topic, ["a", "b"])
    assert False, "the application under test got it wrong"
"""


def test_a_failed_test_reports_what_the_broker_saw(pytester):
    pytester.makepyfile(test_failing=FAILING_TEST)
    result = pytester.runpytest(*PLUGIN_ARGS, "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "pykbroker: what the broker saw" in out, out
    assert "request(s) during the test" in out and "Produce" in out and "CreateTopics" in out, out
    assert "pykbroker: invariant violations" not in out  # the checker ran and found nothing
