"""Fixtures shared by the integration modules (real clients over TCP against a broker the test starts).

``broker`` (tests/conftest.py's, for tests that need no module settings) starts without the initial
rebalance delay too: a classic group's first JoinGroup is answered at once instead of after Kafka's
default 3 s (which tests/coordinator and tests/server test with the injectable clock).

A module describes its broker with module-level names, read by ``bt``:

- ``BROKER_CONFIG``: config overrides (default: no initial rebalance delay, so groups form at once);
- ``TOPIC`` and ``PARTITIONS``: a topic created before the test (none if the module has no ``TOPIC``);
- ``STATIC_SESSION_MS``: the KIP-848 session timeout of ``static_bt`` (room to restart a member).
"""

from __future__ import annotations

import pytest

from tests.support.groups import MemberPool

DEFAULT_CONFIG = {"group.initial.rebalance.delay.ms": 0}


@pytest.fixture
def pool():
    """Client members in their own processes; whatever is still running is killed afterwards."""
    p = MemberPool()
    yield p
    p.cleanup()


@pytest.fixture
def broker(broker_factory):
    """A started broker with ``DEFAULT_CONFIG`` (no initial rebalance delay)."""
    return broker_factory(DEFAULT_CONFIG)


def _module_broker(request, broker_factory, **overrides):
    module = request.module
    b = broker_factory({**getattr(module, "BROKER_CONFIG", DEFAULT_CONFIG), **overrides})
    topic = getattr(module, "TOPIC", None)
    if topic is not None:
        b.call(b.broker.create_topic, topic, module.PARTITIONS)
    return b


@pytest.fixture
def bt(request, broker_factory):
    """A started broker configured by the test module (see the module docstring)."""
    return _module_broker(request, broker_factory)


@pytest.fixture
def static_bt(request, broker_factory):
    """As ``bt``, with the KIP-848 session timeout at the module's ``STATIC_SESSION_MS``."""
    session_ms = str(request.module.STATIC_SESSION_MS)
    return _module_broker(request, broker_factory, **{"group.consumer.session.timeout.ms": session_ms})
