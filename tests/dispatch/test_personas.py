"""Kafka version personas (kafka.version): the broker advertises, and serves, exactly the APIs and
versions of that Kafka release that it implements -- the intersection of broker/personas.py with its
own handlers -- and refuses the rest as an unsupported version."""

from __future__ import annotations

import base64
import uuid

import pytest

from broker.config import ConfigError
from broker.dispatch import build_registry
from broker.dispatch.registry import ClientInfo
from broker.personas import PERSONAS
from broker.personas_redpanda import REDPANDA
from broker.protocol.errors import ErrorCode
from broker.protocol.generated import api_versions as api_versions_codec
from broker.protocol.generated.api_versions import ApiVersionsRequest
from broker.protocol.generated.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from broker.protocol.generated.describe_cluster import DescribeClusterRequest
from broker.protocol.generated.metadata import MetadataRequest, MetadataRequestTopic
from broker.protocol.generated.offset_commit import OffsetCommitRequest
from tests.support.inprocess import ConnectionClosed
from tests.support.wire import request_bytes

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


# --- the Redpanda persona (persona=redpanda): broker/personas_redpanda.py, read off Redpanda's sources


def expected_redpanda() -> dict[int, tuple[int, int]]:
    out = {}
    for key, (lo, hi) in OURS.items():
        if key in REDPANDA and max(lo, REDPANDA[key][0]) <= min(hi, REDPANDA[key][1]):
            out[key] = (max(lo, REDPANDA[key][0]), min(hi, REDPANDA[key][1]))
    return out


def test_redpanda_persona_advertises_redpanda_ranges_and_no_features(node_factory):
    node = node_factory({"persona": "redpanda"})
    with node.client() as c:
        resp = c.call(18, 3, ApiVersionsRequest("persona", "1"))
    # v4 is above Redpanda's 3: answered in the v0 format with UNSUPPORTED_VERSION and the ranges
    frame = request_bytes(18, 4, ApiVersionsRequest("persona", "1"), 7, "t")[4:]
    out = node.pipeline.handle(frame, ClientInfo(peer="t"))
    too_new, _ = api_versions_codec.RESPONSE_DECODERS[0](out, 8)
    assert too_new.error_code == ErrorCode.UNSUPPORTED_VERSION and too_new.api_keys == resp.api_keys
    assert {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys} == expected_redpanda()
    # what Redpanda serves of what we implement: the classic protocol, no KIP-848, older versions
    ranges = expected_redpanda()
    assert ranges[1] == (4, 11) and ranges[3] == (0, 8) and ranges[0] == (3, 7) and ranges[8] == (1, 8)
    assert not {60, 68, 69, 75, 55, 57} & set(ranges)
    # Redpanda's ApiVersions v3 carries no feature tags (KIP-584): their defaults
    assert resp.supported_features == [] and resp.finalized_features == []
    assert resp.finalized_features_epoch == -1


@pytest.mark.parametrize(
    "key,version,request_",
    [
        (60, 0, DescribeClusterRequest()),  # Redpanda 24.3 has no DescribeCluster
        (68, 0, ConsumerGroupHeartbeatRequest(group_id="g", member_id="m", member_epoch=0)),
    ],
)
def test_redpanda_persona_answers_apis_it_lacks_as_unknown(node_factory, key, version, request_):
    # Redpanda's request dispatch throws "Unsupported API" for a key without a handler: the
    # connection is closed, as for an API key nobody knows
    node = node_factory({"persona": "redpanda"})
    with node.client() as c, pytest.raises(ConnectionClosed, match=f"unknown API key {key}"):
        c.call(key, version, request_)
    with node_factory().client() as c:  # the same request to the Kafka persona is served
        c.call(key, version, request_)


def test_redpanda_persona_cluster_id_and_auto_create_default(node_factory):
    node = node_factory({"persona": "redpanda"})
    with node.client() as c:
        md = c.call(3, 8, MetadataRequest(topics=[MetadataRequestTopic(name="nope")]))
    # Metadata's cluster id as Redpanda's: "redpanda." and the cluster's UUID
    assert (
        md.cluster_id
        == f"redpanda.{uuid.UUID(bytes=base64.urlsafe_b64decode(node.broker.cluster.cluster_id + '=='))}"
    )
    # auto_create_topics_enabled is false by default in Redpanda: the topic is not created
    assert [(t.name, t.error_code) for t in md.topics] == [("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    node2 = node_factory({"persona": "redpanda", "auto.create.topics.enable": "true"})
    with node2.client() as c:
        md = c.call(3, 8, MetadataRequest(topics=[MetadataRequestTopic(name="yes")]))
    assert [(t.name, t.error_code) for t in md.topics] == [("yes", ErrorCode.NONE)]


def test_redpanda_persona_excludes_a_kafka_version(node_factory):
    with pytest.raises(ConfigError, match="persona: redpanda cannot also act as Apache Kafka"):
        node_factory({"persona": "redpanda", "kafka.version": "4.0"})
    with pytest.raises(ConfigError, match="persona"):
        node_factory({"persona": "warpstream"})
