"""Fixtures of the differential suite: pykbroker (in-process, session-long) beside the real Kafka
(tests/conftest.py ``real_kafka``), as two :class:`engine.Peer` s; the per-API table at the end is
printed by tests/conftest.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.differential.engine import Peer
from tests.support.real_kafka import TEST_SETTINGS, RealKafka

#: pykbroker gets the same small-test settings as the reference (those it has).
OUR_SETTINGS = {
    k: v
    for k, v in TEST_SETTINGS.items()
    if k
    in (
        "group.initial.rebalance.delay.ms",
        "num.partitions",
        "default.replication.factor",
        "auto.create.topics.enable",
        "log.segment.bytes",
        "log.cleaner.backoff.ms",
    )
}


@pytest.fixture(scope="session")
def our_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from broker.testing import running_broker

    with running_broker(tmp_path_factory.mktemp("differential-ours"), OUR_SETTINGS) as bt:
        yield bt


@pytest.fixture(scope="session")
def peers(our_broker: Any, real_kafka: RealKafka) -> Iterator[tuple[Peer, Peer]]:
    ours = Peer("pykbroker", our_broker.port, 1)
    theirs = Peer("kafka", real_kafka.port, real_kafka.node_id)
    yield ours, theirs
    ours.close()
    theirs.close()
