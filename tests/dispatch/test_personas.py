"""Kafka version personas (kafka.version): the broker advertises, and serves, exactly the APIs and
versions of that Kafka release that it implements -- the intersection of broker/personas.py with its
own handlers -- and refuses the rest as an unsupported version."""

from __future__ import annotations

import pytest

from broker.config import ConfigError
from broker.dispatch import build_registry
from broker.personas import PERSONAS
from broker.protocol.generated.api_versions import ApiVersionsRequest
from broker.protocol.generated.offset_commit import OffsetCommitRequest
from tests.support.inprocess import ConnectionClosed

OURS = {k: (lo, hi) for k, lo, hi in build_registry().ranges()}


def expected(release: str) -> dict[int, tuple[int, int]]:
    out = {}
    for key, (lo, hi) in OURS.items():
        if key in PERSONAS[release]:
            plo, phi = PERSONAS[release][key]
            if max(lo, plo) <= min(hi, phi):
                out[key] = (max(lo, plo), min(hi, phi))
    return out


@pytest.mark.parametrize("release", sorted(PERSONAS))
def test_api_versions_advertise_the_release_ranges_we_serve(node_factory, release):
    node = node_factory({"kafka.version": release})
    with node.client() as c:
        resp = c.call(18, 3, ApiVersionsRequest("persona", "1"))
    assert {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys} == expected(release)


def test_releases_differ_where_kafka_did():
    # KIP-896 (Kafka 4.0) removed old versions; 3.9 had not yet the newest ones
    assert expected("3.9")[8] == (0, 9) and expected("4.0")[8] == (2, 9)  # OffsetCommit
    assert expected("3.9")[1][1] == 17 and expected("4.3")[1][1] == 18  # Fetch
    assert 68 in expected("3.9") and expected("3.9")[68] == (0, 0)  # ConsumerGroupHeartbeat v0 only
    assert expected("4.3") != OURS  # even the newest release serves less than every version we know


def test_a_version_the_release_does_not_serve_is_refused(node_factory):
    node = node_factory({"kafka.version": "4.0"})
    commit = OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=-1, member_id="", topics=[])
    with node.client() as c:
        assert c.call(8, 2, commit).topics == []  # v2 is Kafka 4.0's lowest
        with pytest.raises(ConnectionClosed, match="unsupported OffsetCommit version 1"):
            c.call(8, 1, commit)


def test_an_unknown_release_is_a_config_error(node_factory):
    with pytest.raises(ConfigError, match="kafka.version"):
        node_factory({"kafka.version": "2.8"})
