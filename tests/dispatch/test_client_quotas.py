"""DescribeClientQuotas (48) and AlterClientQuotas (49) at every version through the broker's own
pipeline (no socket), Kafka's validation and filters, durability across a restart; the quota rate
and throttle time of broker.quotas with an injected clock; a throttled Produce and Fetch."""

from __future__ import annotations

import pytest

from broker.log.records import simple_batch
from broker.protocol.errors import ErrorCode
from broker.protocol.generated.alter_client_quotas import (
    AlterClientQuotasRequest,
    OpData,
)
from broker.protocol.generated.alter_client_quotas import (
    AlterClientQuotasRequestEntityData as AlterEntity,
)
from broker.protocol.generated.alter_client_quotas import (
    AlterClientQuotasRequestEntryData as AlterEntry,
)
from broker.protocol.generated.describe_client_quotas import ComponentData, DescribeClientQuotasRequest
from broker.protocol.generated.fetch import FetchPartition, FetchRequest, FetchTopic
from broker.protocol.generated.produce import (
    RESPONSE_DECODERS,
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from broker.quotas import ByteRateQuota, ClientQuotas, Rate, entity_of
from tests.support.inprocess import InProcessClient

PRODUCE, FETCH, DESCRIBE, ALTER = 0, 1, 48, 49
VERSIONS = (0, 1)


def alter(client, version, *entries, validate_only=False):
    req = AlterClientQuotasRequest(
        entries=[
            AlterEntry(
                entity=[AlterEntity(t, n) for t, n in entity],
                ops=[OpData(k, 0.0 if v is None else v, v is None) for k, v in ops],
            )
            for entity, ops in entries
        ],
        validate_only=validate_only,
    )
    resp = client.call(ALTER, version, req)
    return {
        tuple((e.entity_type, e.entity_name) for e in entry.entity): (entry.error_code, entry.error_message)
        for entry in resp.entries
    }


def describe(client, version, *components, strict=False):
    req = DescribeClientQuotasRequest(components=[ComponentData(*c) for c in components], strict=strict)
    resp = client.call(DESCRIBE, version, req)
    if resp.error_code:
        assert resp.entries is None
        return resp.error_code, resp.error_message
    return {
        tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
        for entry in resp.entries
    }


@pytest.mark.parametrize("version", VERSIONS)
def test_alter_then_describe_with_every_match_type(node, version):
    c = InProcessClient(node)
    assert alter(
        c,
        version,
        ([("client-id", "app")], [("producer_byte_rate", 1024.0), ("consumer_byte_rate", 2048.0)]),
        ([("client-id", None)], [("producer_byte_rate", 500.0)]),
        ([("user", "alice"), ("client-id", "app")], [("request_percentage", 12.5)]),
        ([("user", None)], [("consumer_byte_rate", 9000.0)]),
        ([("ip", "127.0.0.1")], [("connection_creation_rate", 10.0)]),
    ) == {
        (("client-id", "app"),): (0, None),
        (("client-id", None),): (0, None),
        (("client-id", "app"), ("user", "alice")): (0, None),
        (("user", None),): (0, None),
        (("ip", "127.0.0.1"),): (0, None),
    }
    everything = describe(c, version)
    assert len(everything) == 5
    assert everything[(("client-id", "app"),)] == {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0}
    # exact: every entity with that client id (strict: only the client-id entity itself)
    assert set(describe(c, version, ("client-id", 0, "app"))) == {
        (("client-id", "app"),),
        (("client-id", "app"), ("user", "alice")),
    }
    assert set(describe(c, version, ("client-id", 0, "app"), strict=True)) == {(("client-id", "app"),)}
    # default entity
    assert describe(c, version, ("client-id", 1, None), strict=True) == {
        (("client-id", None),): {"producer_byte_rate": 500.0}
    }
    # any entity of the type (the default included, as Kafka's image matches)
    assert set(describe(c, version, ("user", 2, None))) == {
        (("client-id", "app"), ("user", "alice")),
        (("user", None),),
    }
    assert set(describe(c, version, ("ip", 2, None))) == {(("ip", "127.0.0.1"),)}
    assert describe(c, version, ("user", 0, "bob")) == {}


@pytest.mark.parametrize("version", VERSIONS)
def test_remove_validate_only_and_unchanged_values(node, version):
    c = InProcessClient(node)
    app = [("client-id", "app")]
    assert alter(c, version, (app, [("producer_byte_rate", 100.0)]), validate_only=True) == {
        (("client-id", "app"),): (0, None)
    }
    assert describe(c, version) == {}
    alter(c, version, (app, [("producer_byte_rate", 100.0), ("consumer_byte_rate", 200.0)]))
    alter(c, version, (app, [("producer_byte_rate", None)]))
    assert describe(c, version) == {(("client-id", "app"),): {"consumer_byte_rate": 200.0}}
    # removing a key never set is no error; removing the last one removes the entity
    assert alter(c, version, (app, [("consumer_byte_rate", None), ("request_percentage", None)])) == {
        (("client-id", "app"),): (0, None)
    }
    assert describe(c, version) == {}


@pytest.mark.parametrize(
    "entity, ops, message",
    [
        ([], [("producer_byte_rate", 1.0)], "Invalid empty client quota entity"),
        ([("group", "g")], [("producer_byte_rate", 1.0)], "Unhandled client quota entity type: group"),
        ([("user", "")], [("producer_byte_rate", 1.0)], "Empty user not supported"),
        ([("client-id", "a")], [("nonsense", 1.0)], "Invalid configuration key nonsense"),
        (
            [("client-id", "a")],
            [("connection_creation_rate", 1.0)],
            "Invalid configuration key connection_creation_rate",
        ),
        (
            [("ip", "127.0.0.1")],
            [("producer_byte_rate", 1.0)],
            "Invalid configuration key producer_byte_rate",
        ),
        (
            [("client-id", "a")],
            [("producer_byte_rate", 0.0)],
            "Quota producer_byte_rate must be greater than 0",
        ),
        (
            [("client-id", "a")],
            [("producer_byte_rate", 1.5)],
            "producer_byte_rate cannot be a fractional value.",
        ),
        (
            [("ip", "1.2.3.4")],
            [("connection_creation_rate", 1e10)],
            "Proposed value for connection_creation_rate is too large for an INT.",
        ),
        ([("ip", None), ("user", "u")], [("connection_creation_rate", 1.0)], None),
        ([("client-id", "a")], [("producer_byte_rate", 1.0), ("producer_byte_rate", 2.0)], None),
    ],
)
def test_invalid_alterations_are_invalid_request_and_change_nothing(node, entity, ops, message):
    c = InProcessClient(node)
    ok = [("client-id", "fine")]
    results = alter(c, 1, (entity, ops), (ok, [("request_percentage", 50.0)]))
    code, text = results[entity_of(entity)]
    assert code == ErrorCode.INVALID_REQUEST
    if message is not None:
        assert text == message
    assert results[(("client-id", "fine"),)] == (0, None)  # other entities still change
    assert describe(c, 1) == {(("client-id", "fine"),): {"request_percentage": 50.0}}


@pytest.mark.parametrize(
    "components, code, message",
    [
        ([("", 0, "x")], ErrorCode.INVALID_REQUEST, "Invalid empty entity type."),
        ([("group", 2, None)], ErrorCode.UNSUPPORTED_VERSION, "Unsupported entity type group"),
        (
            [("user", 0, None)],
            ErrorCode.INVALID_REQUEST,
            "Request specified MATCH_TYPE_EXACT, but set match string to null.",
        ),
        ([("user", 1, "x")], ErrorCode.INVALID_REQUEST, None),
        ([("user", 2, "x")], ErrorCode.INVALID_REQUEST, None),
        ([("user", 7, None)], ErrorCode.INVALID_REQUEST, "Unknown match type 7"),
        ([("user", 2, None), ("user", 1, None)], ErrorCode.INVALID_REQUEST, None),
        ([("ip", 2, None), ("client-id", 2, None)], ErrorCode.INVALID_REQUEST, None),
    ],
)
def test_bad_filters(node, components, code, message):
    c = InProcessClient(node)
    got_code, got_message = describe(c, 1, *components)
    assert got_code == code
    if message is not None:
        assert got_message == message


def test_quotas_survive_a_restart(node_factory, tmp_path):
    data = tmp_path / "d"
    first = node_factory(data_dir=data)
    alter(InProcessClient(first), 1, ([("user", "u"), ("client-id", None)], [("producer_byte_rate", 4096.0)]))
    first.stop()
    second = node_factory(data_dir=data)
    assert describe(InProcessClient(second), 0) == {
        (("client-id", None), ("user", "u")): {"producer_byte_rate": 4096.0}
    }
    assert second.broker.services.quotas.produce.enabled


# ---------------------------------------------------------------------- rate and throttle time


def test_rate_counts_at_least_n_minus_1_windows():
    r = Rate(11, 1000)
    r.record(10_000, 0.0)
    # one sample, elapsed 0: the window is taken as 10 whole windows
    assert r.window_size(0.0) == 10_000
    assert r.measure(0.0) == pytest.approx(1000.0)
    r.record(10_000, 12_500.0)  # the first sample is older than 11 windows: purged
    assert r.measure(12_500.0) == pytest.approx(1000.0)


def test_throttle_time_is_kafkas_formula():
    now = [0.0]
    quotas: dict = {entity_of([("client-id", "c")]): {"producer_byte_rate": 1000.0}}
    q = ByteRateQuota("producer_byte_rate", quotas, lambda: now[0], 11, 1000)
    q.refresh()
    assert q.record("ANONYMOUS", "c", 5_000) == 0  # 500 B/s over 10 s
    # 25000 bytes in the window: 2500 B/s; (2500 - 1000) / 1000 * 10000 ms
    assert q.record("ANONYMOUS", "c", 20_000) == 15_000
    assert q.record("ANONYMOUS", "other", 1_000_000) == 0  # no quota for that client id
    assert q.max_in_window("ANONYMOUS", "c") == 10_000


def test_precedence_of_entities():
    quotas = ClientQuotas(None)
    for entity, value in [
        ([("client-id", None)], 1.0),
        ([("client-id", "c")], 2.0),
        ([("user", None)], 3.0),
        ([("user", "u")], 4.0),
        ([("user", "u"), ("client-id", None)], 5.0),
        ([("user", "u"), ("client-id", "c")], 6.0),
    ]:
        quotas.alter([(entity_of(entity), [("producer_byte_rate", value)])], False)
    p = quotas.produce
    assert p.resolve("u", "c") == (("u", "c"), 6.0)
    assert p.resolve("u", "d") == (("u", "d"), 5.0)
    assert p.resolve("v", "c") == (("v", ""), 3.0)  # the default user is above every client-id quota
    quotas.alter([(entity_of([("user", None)]), [("producer_byte_rate", None)])], False)
    assert p.resolve("v", "c") == (("", "c"), 2.0)
    assert p.resolve("v", "x") == (("", "x"), 1.0)


def _produce(n: int, size: int) -> ProduceRequest:
    batch = simple_batch([b"x" * size])
    return ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout_ms=5000,
        topic_data=[TopicProduceData(name="t", partition_data=[PartitionProduceData(0, batch)])],
    )


def test_throttled_produce_and_fetch_carry_throttle_time_and_mute(node):
    node.call(node.broker.create_topic, "t", 1, {})
    c = InProcessClient(node, client_id="slow")
    alter(
        c,
        1,
        ([("client-id", "slow")], [("producer_byte_rate", 1000.0), ("consumer_byte_rate", 1000.0)]),
    )
    first = c.call(PRODUCE, 9, _produce(1, 100))
    assert first.throttle_time_ms == 0 and c.info.mute_ms == 0
    second = c.call(PRODUCE, 9, _produce(1, 50_000))
    assert second.responses[0].partition_responses[0].error_code == 0  # written all the same
    assert second.throttle_time_ms > 0
    assert c.info.mute_ms == second.throttle_time_ms  # the connection mutes for as long
    c.info.mute_ms = 0
    fetch = FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=50 << 20,
        isolation_level=0,
        topics=[
            FetchTopic(
                topic="t",
                partitions=[FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)],
            )
        ],
    )
    got = c.call(FETCH, 11, fetch)  # capped to 10 windows of 1000 B: the small first batch only
    assert got.throttle_time_ms == 0
    assert 0 < len(got.responses[0].partitions[0].records) < 1000
    fetch.topics[0].partitions[0].fetch_offset = 1
    # the big batch (returned whole though above the cap, KIP-74) exceeds the quota: empty, throttled
    throttled = c.call(FETCH, 11, fetch)
    assert throttled.throttle_time_ms > 0 and throttled.responses == []
    assert c.info.mute_ms == throttled.throttle_time_ms
    other = InProcessClient(node, client_id="fast")  # other clients are not limited
    assert other.call(PRODUCE, 9, _produce(1, 50_000)).throttle_time_ms == 0


def test_idle_rates_are_forgotten_and_quota_changes_keep_the_rate(monkeypatch):
    import broker.quotas as q

    monkeypatch.setattr(q, "MAX_IDLE_RATES", 3)
    now = [0.0]
    quotas = ClientQuotas(None, clock=lambda: now[0])
    quotas.alter([(entity_of([("client-id", None)]), [("producer_byte_rate", 1000.0)])], False)
    p = quotas.produce
    assert p.record("ANONYMOUS", "a", 20_000) > 0
    # raising the quota keeps what was measured: 2000 B/s, now within it
    quotas.alter([(entity_of([("client-id", None)]), [("producer_byte_rate", 5000.0)])], False)
    assert p.record("ANONYMOUS", "a", 0) == 0
    p.record("ANONYMOUS", "b", 1)
    p.record("ANONYMOUS", "c", 1)
    now[0] = 30.0  # 30 s later every rate is idle: the next new client drops them
    p.record("ANONYMOUS", "d", 1)
    assert set(p._rates) == {("", "d")}


def test_nan_and_infinite_quotas_never_throttle():
    now = [0.0]
    quotas = ClientQuotas(None, clock=lambda: now[0])
    results = quotas.alter(
        [
            (entity_of([("client-id", "n")]), [("producer_byte_rate", float("nan"))]),
            (entity_of([("client-id", "i")]), [("request_percentage", float("inf"))]),
            (entity_of([("client-id", "j")]), [("producer_byte_rate", float("inf"))]),
        ],
        False,
    )
    # as Kafka's checks let them through (NaN) or not (infinity above a LONG)
    assert [code for _e, code, _m in results] == [ErrorCode.NONE, ErrorCode.NONE, ErrorCode.INVALID_REQUEST]
    assert quotas.produce.record("ANONYMOUS", "n", 1e9) == 0
    assert quotas.produce.max_in_window("ANONYMOUS", "n") is None


def test_before_kip_219_the_throttled_answer_itself_waits(node):
    """Produce v3-5 and Fetch v4-7 clients do not wait out throttle_time_ms: the throttled answer is
    held back (a pending outcome) instead of going out at once."""
    from broker.dispatch.registry import ClientInfo
    from broker.server.pipeline import Pending
    from tests.support.wire import request_bytes

    node.call(node.broker.create_topic, "t", 1)
    c = InProcessClient(node, client_id="old")
    alter(c, 1, ([("client-id", "old")], [("producer_byte_rate", 1000.0), ("consumer_byte_rate", 1000.0)]))
    info = ClientInfo(peer="in-process")

    def outcome(api: int, version: int, body):
        async def handle():
            return node.pipeline.handle(request_bytes(api, version, body, 7, "old")[4:], info)

        return node.loop.run_until_complete(handle())

    # a 50 kB batch written by another client (no quota)
    assert InProcessClient(node).call(PRODUCE, 9, _produce(1, 50_000)).throttle_time_ms == 0
    fetch = FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=50 << 20,
        isolation_level=0,
        topics=[
            FetchTopic(
                topic="t",
                partitions=[FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)],
            )
        ],
    )
    held = outcome(FETCH, 7, fetch)
    assert type(held) is Pending and not held.deferred and info.mute_ms == 0  # parked: nothing else runs
    held.awaitable.close()
    assert type(outcome(FETCH, 8, fetch)) is bytes and info.mute_ms > 0  # answered, then muted
    info.mute_ms = 0
    first = outcome(PRODUCE, 5, _produce(1, 100))  # within the quota: waits for its flush only
    answer, _end = RESPONSE_DECODERS[5](node.loop.run_until_complete(first.awaitable))  # encoded
    assert answer.throttle_time_ms == 0
    held = outcome(PRODUCE, 5, _produce(1, 50_000))
    assert type(held) is Pending and held.deferred and info.mute_ms > 0
    held.awaitable.close()
