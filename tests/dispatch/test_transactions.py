"""Transaction APIs through the request pipeline of an in-process broker (no sockets)."""

from __future__ import annotations

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.find_coordinator import FindCoordinatorRequest
from broker.protocol.generated.init_producer_id import InitProducerIdRequest

INIT, FIND = 22, 10


def _init(c, tid, version=4, timeout=60_000, pid=-1, epoch=-1):
    return c.call(INIT, version, InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=timeout,
                                                        producer_id=pid, producer_epoch=epoch))  # fmt: skip


def test_init_producer_id_with_a_transactional_id(node_factory, tmp_path):
    node = node_factory(data_dir=tmp_path / "d")
    with node.client() as c:
        first = _init(c, "tx-a", version=0)
        assert first.error_code == 0 and first.producer_epoch == 0
        again = _init(c, "tx-a", version=5)
        assert (again.error_code, again.producer_id, again.producer_epoch) == (0, first.producer_id, 1)
        other = _init(c, "tx-b")
        assert other.producer_id != first.producer_id
        assert _init(c, "tx-a", timeout=900_001).error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT
        assert _init(c, "", version=3).error_code == ErrorCode.INVALID_REQUEST
        # idempotent producers are unchanged
        assert _init(c, None).producer_epoch == 0
    plog = node.broker.logs.get("__transaction_state", 0)
    assert plog is not None and node.broker.topics.get("__transaction_state").internal
    node.stop()
    node = node_factory(data_dir=tmp_path / "d")
    with node.client() as c:
        after = _init(c, "tx-a", version=3, pid=first.producer_id, epoch=1)
        assert (after.error_code, after.producer_id, after.producer_epoch) == (0, first.producer_id, 2)
        # KIP-360 with a producer id the transactional id never had: fenced (INVALID_PRODUCER_EPOCH < v4)
        assert (
            _init(c, "tx-a", version=3, pid=999_999, epoch=0).error_code == ErrorCode.INVALID_PRODUCER_EPOCH
        )
        assert _init(c, "tx-a", version=4, pid=999_999, epoch=0).error_code == ErrorCode.PRODUCER_FENCED


def test_find_coordinator_for_a_transactional_id(node):
    with node.client() as c:
        resp = c.call(FIND, 4, FindCoordinatorRequest(key_type=1, coordinator_keys=["tx-a"]))
        (coord,) = resp.coordinators
        assert coord.error_code == 0 and coord.node_id == node.broker.node_id
