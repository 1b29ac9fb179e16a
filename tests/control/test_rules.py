"""Fault rules without clients: parsing (400 errors naming the valid choices), matching, how often."""

from __future__ import annotations

import pytest

from broker.control.faults import BadRule, FaultInjector, parse_rule
from broker.dispatch import build_registry
from broker.dispatch.registry import ClientInfo
from broker.protocol.errors import ErrorCode
from broker.protocol.generated import heartbeat, produce

REGISTRY = build_registry()
PRODUCE = REGISTRY.apis[0]
HEARTBEAT = REGISTRY.apis[12]


class _Topics:
    def by_id(self, topic_id):
        return None


class _Services:
    topics = _Topics()
    registry = REGISTRY
    node_id = 1
    rack = None

    def advertised_address(self, listener):
        return ("127.0.0.1", 9092)


def injector() -> FaultInjector:
    return FaultInjector(REGISTRY, _Services())


def produce_request(topic: str = "t", partitions=(0,)):
    return produce.ProduceRequest(
        acks=-1,
        timeout_ms=1000,
        topic_data=[
            produce.TopicProduceData(
                name=topic, partition_data=[produce.PartitionProduceData(index=p) for p in partitions]
            )
        ],
    )


def client(cid: str = "app-1", conn: int = 7, sw: str | None = None) -> ClientInfo:
    return ClientInfo(peer="127.0.0.1:1", client_id=cid, connection_id=conn, software_name=sw)


@pytest.mark.parametrize(
    ("spec", "message", "valid"),
    [
        ({"api": "Prodce", "error": "NOT_LEADER_OR_FOLLOWER"}, "unknown API 'Prodce'", "Produce"),
        (
            {"api": "Produce", "error": "NOT_A_LEADER"},
            "unknown error 'NOT_A_LEADER'",
            "NOT_LEADER_OR_FOLLOWER",
        ),
        ({"api": "Fetch", "delay_ms": "2 seconds"}, "bad duration for delay_ms", None),
        ({"api": "Fetch", "delay_ms": -5}, "bad duration for delay_ms", None),
        ({"api": "Produce", "errors": ["NOT_LEADER_OR_FOLLOWER", "BOGUS"]}, "unknown error 'BOGUS'", "NONE?"),
        ({"api": "Produce", "close": "during"}, "close must be", "before"),
        ({"api": "Produce"}, "the rule has no action", "delay_ms"),
        ({"api": "Produce", "error": "NOT_CONTROLLER", "drop": True}, "choose one of", None),
        ({"error": "NOT_CONTROLLER"}, "an error rule must name its api", "Produce"),
        ({"api": "Produce", "delay_ms": 5, "colour": "red"}, "unknown rule field 'colour'", "topic"),
        ({"api": "Produce", "delay_ms": 5, "client_id": "("}, "not a valid regular expression", None),
        ({"api": "Produce", "delay_ms": 5, "probability": 2}, "probability must be", None),
    ],
)
def test_bad_rules_name_the_valid_choices(spec, message, valid):
    with pytest.raises(BadRule) as e:
        parse_rule(spec, REGISTRY)
    assert message in e.value.message
    if valid == "NONE?":
        assert "NONE" not in e.value.valid and "NOT_LEADER_OR_FOLLOWER" in e.value.valid
    elif valid is not None:
        assert valid in e.value.valid


def test_names_and_durations_are_forgiving():
    r = parse_rule({"api": "produce", "error": "not_leader_or_follower", "delay_ms": "2s"}, REGISTRY)
    assert (r.match.api_key, r.action.error, r.action.delay_ms) == (0, ErrorCode.NOT_LEADER_OR_FOLLOWER, 2000)
    nested = parse_rule(
        {"match": {"api": 12, "group": "g"}, "action": {"close": "after"}, "times": 2}, REGISTRY
    )
    assert (nested.match.api_key, nested.match.group, nested.action.close, nested.times) == (
        12,
        "g",
        "after",
        2,
    )


def test_match_fields_and_next_n():
    inj = injector()
    inj.add(
        {
            "api": "Produce",
            "topic": "t",
            "partition": 1,
            "client_id": "^app-",
            "error": "NOT_LEADER_OR_FOLLOWER",
            "times": 2,
        }
    )
    assert inj.fire(PRODUCE, 9, produce_request("t", (0,)), client()) is None  # other partition
    assert inj.fire(PRODUCE, 9, produce_request("u", (1,)), client()) is None  # other topic
    assert inj.fire(PRODUCE, 9, produce_request("t", (1,)), client("other")) is None  # client id
    hits = [inj.fire(PRODUCE, 9, produce_request("t", (0, 1)), client()) for _ in range(3)]
    assert [h is not None for h in hits] == [True, True, False]
    assert inj.rules == []  # spent rules go


def test_versions_connection_software_and_group():
    inj = injector()
    inj.add(
        {
            "api": "Heartbeat",
            "min_version": 2,
            "max_version": 3,
            "connection": 7,
            "client_software_name": "librdkafka",
            "group": "g",
            "error": "REBALANCE_IN_PROGRESS",
        }
    )
    req = heartbeat.HeartbeatRequest(group_id="g", generation_id=1, member_id="m")
    sw = client(sw="librdkafka")
    assert inj.fire(HEARTBEAT, 1, req, sw) is None
    assert inj.fire(HEARTBEAT, 2, req, client(conn=8, sw="librdkafka")) is None
    assert inj.fire(HEARTBEAT, 2, req, client()) is None
    assert inj.fire(HEARTBEAT, 2, heartbeat.HeartbeatRequest(group_id="h"), sw) is None
    rule, action = inj.fire(HEARTBEAT, 3, req, sw)
    assert action.error == ErrorCode.REBALANCE_IN_PROGRESS and rule.fired == 1


def test_error_sequence_in_order_then_gone():
    inj = injector()
    inj.add(
        {"api": "Produce", "errors": ["NOT_LEADER_OR_FOLLOWER", "REQUEST_TIMED_OUT", "NOT_ENOUGH_REPLICAS"]}
    )
    got = [inj.fire(PRODUCE, 9, produce_request(), client()) for _ in range(4)]
    assert [g[1].error.name if g else None for g in got] == [
        "NOT_LEADER_OR_FOLLOWER",
        "REQUEST_TIMED_OUT",
        "NOT_ENOUGH_REPLICAS",
        None,
    ]


def test_probability_is_reproducible_with_a_seed():
    def run() -> list[bool]:
        inj = injector()
        inj.add({"api": "Produce", "drop": True, "probability": 0.5, "seed": 42})
        return [inj.fire(PRODUCE, 9, produce_request(), client()) is not None for _ in range(50)]

    first = run()
    assert first == run() and 10 < sum(first) < 40
    assert injector().rules == []


def test_pipeline_sees_faults_only_while_rules_exist(broker):
    pipeline = broker.broker.pipeline
    assert pipeline.faults is None
    r = broker.control.add_rule(api="Metadata", delay_ms=10)
    assert pipeline.faults is not None
    broker.control.remove_rule(r["id"])
    assert pipeline.faults is None
    broker.control.add_rule(api="Metadata", error="UNKNOWN_SERVER_ERROR", times=1)
    assert broker.control.clear_rules() == 1 and pipeline.faults is None


def test_add_rules_is_all_or_nothing(broker):
    with pytest.raises(BadRule):
        broker.control.add_rules([{"api": "Produce", "drop": True}, {"api": "Nope", "drop": True}])
    assert broker.control.rules() == []


def test_error_response_at_the_request_version_has_leader_hints():
    from broker.control.faults import error_response

    resp = error_response(
        PRODUCE, 10, produce_request("t", (0, 1)), ErrorCode.NOT_LEADER_OR_FOLLOWER, _Services()
    )
    parts = resp.responses[0].partition_responses
    assert [(p.index, p.error_code, p.current_leader.leader_id) for p in parts] == [(0, 6, 1), (1, 6, 1)]
    assert [(n.node_id, n.port) for n in resp.node_endpoints] == [(1, 9092)]
    old = error_response(PRODUCE, 9, produce_request(), ErrorCode.NOT_LEADER_OR_FOLLOWER, _Services())
    assert old.node_endpoints == []
    # encodable at every version the broker serves
    for v in range(PRODUCE.min_version, PRODUCE.max_version + 1):
        PRODUCE.encoders[v](
            error_response(PRODUCE, v, produce_request(), ErrorCode.NOT_LEADER_OR_FOLLOWER, _Services())
        )


def test_fetch_errors_are_per_partition_and_session_errors_top_level():
    from broker.control.faults import error_response
    from broker.protocol.generated import fetch

    fetch_api = REGISTRY.apis[1]
    req = fetch.FetchRequest(
        session_id=5,
        topics=[
            fetch.FetchTopic(
                topic="t", partitions=[fetch.FetchPartition(partition=0), fetch.FetchPartition(partition=2)]
            )
        ],
    )
    resp = error_response(fetch_api, 12, req, ErrorCode.NOT_LEADER_OR_FOLLOWER, _Services())
    assert resp.error_code == 0 and resp.session_id == 5
    parts = resp.responses[0].partitions
    assert [(p.partition_index, p.error_code, p.current_leader.leader_id) for p in parts] == [
        (0, 6, 1),
        (2, 6, 1),
    ]
    session = error_response(fetch_api, 12, req, ErrorCode.FETCH_SESSION_ID_NOT_FOUND, _Services())
    assert (session.error_code, session.session_id, session.responses) == (70, 0, [])
    for v in range(fetch_api.min_version, fetch_api.max_version + 1):
        fetch_api.encoders[v](
            error_response(fetch_api, v, req, ErrorCode.NOT_LEADER_OR_FOLLOWER, _Services())
        )
