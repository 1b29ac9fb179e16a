"""KIP-219 over a socket: a Produce above its client's byte-rate quota is answered at once with
``throttle_time_ms``, and the connection then handles no further request until the throttle time
is over (the next request waits in its queue); other connections are not held up."""

from __future__ import annotations

import time

from broker.log.records import simple_batch
from broker.protocol.generated.api_versions import ApiVersionsRequest
from broker.protocol.generated.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from broker.quotas import entity_of
from tests.support.wire import WireClient

PRODUCE, API_VERSIONS = 0, 18


def _produce(size: int) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout_ms=5000,
        topic_data=[
            TopicProduceData(name="t", partition_data=[PartitionProduceData(0, simple_batch([b"x" * size]))])
        ],
    )


def _connections(broker) -> list:
    return broker.call(lambda: sorted(broker.broker.connections, key=lambda c: c.client.connection_id))


def test_throttled_connection_waits_before_its_next_request(broker):
    broker.call(broker.broker.create_topic, "t", 1)
    quotas = broker.broker.services.quotas
    # WireClient's client id is "wire"
    broker.call(quotas.alter, [(entity_of([("client-id", "wire")]), [("producer_byte_rate", 1000.0)])], False)
    with WireClient(broker.port) as c, WireClient(broker.port) as other:
        resp = c.call(PRODUCE, 9, _produce(50_000))
        assert resp.responses[0].partition_responses[0].error_code == 0
        # 50 kB (and the batch's header) over the 10 s Kafka counts at least: 5000 B/s, (5000 - 1000)
        # / 1000 * 10 s
        assert 40_000 <= resp.throttle_time_ms < 40_200
        c.send(API_VERSIONS, 3, ApiVersionsRequest("probe", "1.0"))
        conn = _connections(broker)[0]
        deadline = time.monotonic() + 10
        while broker.call(lambda: len(conn.queue)) == 0 and time.monotonic() < deadline:
            time.sleep(0.01)  # waiting for the request to arrive, not for a timeout
        assert broker.call(lambda: (conn.busy, len(conn.queue))) == (True, 1)  # muted: not handled
        # another connection (no quota hit) is answered meanwhile
        assert other.call(API_VERSIONS, 3, ApiVersionsRequest("probe", "1.0")).error_code == 0
        broker.call(conn._unmute)  # the throttle time is over: the waiting request is handled
        _cid, answer = c.recv(API_VERSIONS, 3)
        assert answer.error_code == 0
