"""SASL on the wire, frame by frame (real TCP, no client library): the pre-authentication gate,
SaslHandshake v0/v1, SaslAuthenticate, the v0 bare-token flow, failures and their close."""

from __future__ import annotations

import struct

import pytest
import scramp

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.api_versions import ApiVersionsRequest
from broker.protocol.generated.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from broker.protocol.generated.metadata import MetadataRequest
from broker.protocol.generated.sasl_authenticate import SaslAuthenticateRequest
from broker.protocol.generated.sasl_handshake import SaslHandshakeRequest
from broker.security.sasl import PLAIN_FAILED, scram_failed
from tests.support.wire import WireClient

API_VERSIONS, METADATA, HANDSHAKE, AUTHENTICATE = 18, 3, 17, 36

CONFIG = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.users": "alice:alice-secret",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret" user_admin="admin-secret";'
    ),
    "connection.failed.authentication.delay.ms": 0,
}


@pytest.fixture
def sasl_broker(broker_factory):
    b = broker_factory(CONFIG)
    b.ports = {x.endpoint.name: x.port for x in b.broker.listener.bound}
    return b


def _metadata(c: WireClient) -> None:
    resp = c.call(METADATA, 4, MetadataRequest(topics=[], allow_auto_topic_creation=False))
    assert resp.brokers and resp.brokers[0].node_id == 1


def _handshake(c: WireClient, mechanism: str, version: int = 1) -> None:
    resp = c.call(HANDSHAKE, version, SaslHandshakeRequest(mechanism))
    assert resp.error_code == ErrorCode.NONE
    assert resp.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


def _plain(user: str, password: str) -> bytes:
    return b"\x00" + user.encode() + b"\x00" + password.encode()


@pytest.mark.parametrize("version", [0, 1, 2])
@pytest.mark.parametrize("user, password", [("alice", "alice-secret"), ("admin", "admin-secret")])
def test_plain_then_requests_are_served(sasl_broker, version, user, password):
    with WireClient(sasl_broker.ports["SASL_PLAINTEXT"]) as c:
        assert c.call(API_VERSIONS, 3, ApiVersionsRequest("t", "1")).error_code == 0
        _handshake(c, "PLAIN")
        resp = c.call(AUTHENTICATE, version, SaslAuthenticateRequest(_plain(user, password)))
        assert (resp.error_code, resp.error_message, bytes(resp.auth_bytes)) == (0, None, b"")
        _metadata(c)
        # authenticated: another handshake or token is out of sequence, as Kafka answers
        assert c.call(HANDSHAKE, 1, SaslHandshakeRequest("PLAIN")).error_code == ErrorCode.ILLEGAL_SASL_STATE
        again = c.call(AUTHENTICATE, version, SaslAuthenticateRequest(b""))
        assert again.error_code == ErrorCode.ILLEGAL_SASL_STATE
        _metadata(c)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_exchange_and_server_signature(sasl_broker, mechanism):
    client = scramp.ScramClient([mechanism], "alice", "alice-secret")
    with WireClient(sasl_broker.ports["SASL_PLAINTEXT"]) as c:
        _handshake(c, mechanism)
        first = c.call(AUTHENTICATE, 2, SaslAuthenticateRequest(client.get_client_first().encode()))
        assert first.error_code == 0
        client.set_server_first(bytes(first.auth_bytes).decode())
        final = c.call(AUTHENTICATE, 2, SaslAuthenticateRequest(client.get_client_final().encode()))
        assert final.error_code == 0
        client.set_server_final(bytes(final.auth_bytes).decode())  # raises unless the server knew the key
        _metadata(c)


@pytest.mark.parametrize(
    "mechanism, message",
    [("PLAIN", PLAIN_FAILED), ("SCRAM-SHA-256", scram_failed("SCRAM-SHA-256"))],
)
@pytest.mark.parametrize("user", ["alice", "mallory"])
def test_wrong_password_or_unknown_user_fails_then_closes(sasl_broker, mechanism, message, user):
    with WireClient(sasl_broker.ports["SASL_PLAINTEXT"]) as c:
        _handshake(c, mechanism)
        if mechanism == "PLAIN":
            resp = c.call(AUTHENTICATE, 1, SaslAuthenticateRequest(_plain(user, "wrong")))
        else:
            client = scramp.ScramClient([mechanism], user, "wrong")
            first = c.call(AUTHENTICATE, 1, SaslAuthenticateRequest(client.get_client_first().encode()))
            if first.error_code == 0:  # a known user: the proof is what fails
                client.set_server_first(bytes(first.auth_bytes).decode())
                resp = c.call(AUTHENTICATE, 1, SaslAuthenticateRequest(client.get_client_final().encode()))
            else:
                resp = first
        assert resp.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert resp.error_message == message
        assert c.is_closed_by_peer()
    with WireClient(sasl_broker.ports["SASL_PLAINTEXT"]) as c:  # the broker serves others
        _handshake(c, "PLAIN")
        assert (
            c.call(AUTHENTICATE, 1, SaslAuthenticateRequest(_plain("alice", "alice-secret"))).error_code == 0
        )


@pytest.mark.parametrize(
    "first",
    [
        (METADATA, 4, MetadataRequest(topics=[], allow_auto_topic_creation=False)),
        (AUTHENTICATE, 1, SaslAuthenticateRequest(_plain("alice", "alice-secret"))),
    ],
    ids=["metadata", "authenticate-before-handshake"],
)
def test_requests_before_authentication_close_the_connection(sasl_broker, first):
    with WireClient(sasl_broker.ports["SASL_PLAINTEXT"]) as c:
        c.send(*first)
        assert c.is_closed_by_peer()


def test_request_after_handshake_but_before_authenticate_closes(sasl_broker):
    with WireClient(sasl_broker.ports["SASL_PLAINTEXT"]) as c:
        _handshake(c, "PLAIN")
        c.send(METADATA, 4, MetadataRequest(topics=[], allow_auto_topic_creation=False))
        assert c.is_closed_by_peer()


def test_unsupported_mechanism_lists_ours_then_closes(sasl_broker):
    with WireClient(sasl_broker.ports["SASL_PLAINTEXT"]) as c:
        resp = c.call(HANDSHAKE, 1, SaslHandshakeRequest("GSSAPI"))
        assert resp.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert resp.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert c.is_closed_by_peer()


def _raw_token(c: WireClient, token: bytes) -> bytes:
    c.send_raw(struct.pack(">i", len(token)) + token)
    return c.recv_frame()


def test_handshake_v0_then_bare_tokens(sasl_broker):
    with WireClient(sasl_broker.ports["SASL_PLAINTEXT"]) as c:
        _handshake(c, "PLAIN", version=0)
        assert _raw_token(c, _plain("alice", "alice-secret")) == b""
        _metadata(c)
    client = scramp.ScramClient(["SCRAM-SHA-512"], "alice", "alice-secret")
    with WireClient(sasl_broker.ports["SASL_PLAINTEXT"]) as c:
        _handshake(c, "SCRAM-SHA-512", version=0)
        client.set_server_first(_raw_token(c, client.get_client_first().encode()).decode())
        client.set_server_final(_raw_token(c, client.get_client_final().encode()).decode())
        _metadata(c)
    with WireClient(sasl_broker.ports["SASL_PLAINTEXT"]) as c:  # v0 failure: closed, no answer
        _handshake(c, "PLAIN", version=0)
        token = _plain("alice", "wrong-pw")
        c.send_raw(struct.pack(">i", len(token)) + token)
        assert c.is_closed_by_peer()


def test_plaintext_listener_needs_no_authentication_and_refuses_handshakes(sasl_broker):
    with WireClient(sasl_broker.ports["PLAINTEXT"]) as c:
        _metadata(c)
        resp = c.call(HANDSHAKE, 1, SaslHandshakeRequest("PLAIN"))
        assert (resp.error_code, resp.mechanisms) == (ErrorCode.ILLEGAL_SASL_STATE, [])
        _metadata(c)


def test_a_large_frame_before_authentication_closes(sasl_broker):
    with WireClient(sasl_broker.ports["SASL_PLAINTEXT"]) as c:
        c.send_raw(struct.pack(">i", 524289) + b"\x00" * 64)
        assert c.is_closed_by_peer()
    with WireClient(sasl_broker.ports["PLAINTEXT"]) as c:  # the usual limit elsewhere
        _metadata(c)


def test_secrets_are_described_as_sensitive(sasl_broker):
    with WireClient(sasl_broker.ports["PLAINTEXT"]) as c:
        resp = c.call(
            32, 4, DescribeConfigsRequest([DescribeConfigsResource(4, "1", ["sasl.users"])], True, True)
        )
    (entry,) = resp.results[0].configs
    assert (entry.name, entry.value, entry.is_sensitive, entry.config_type) == ("sasl.users", None, True, 9)
    assert [s.value for s in entry.synonyms] == [None]


def test_api_versions_retry_after_unsupported_version_then_only_once(sasl_broker):
    # ApiVersions v9 (newer than we serve): answered UNSUPPORTED_VERSION; the client may retry
    frame = struct.pack(">hhih", 18, 9, 42, 4) + b"wire" + b"\x00" + b"\x01\x01\x00"
    with WireClient(sasl_broker.ports["SASL_PLAINTEXT"]) as c:
        c.send_raw(struct.pack(">i", len(frame)) + frame)
        assert struct.unpack_from(">ih", c.recv_frame()) == (42, ErrorCode.UNSUPPORTED_VERSION)
        assert c.call(API_VERSIONS, 3, ApiVersionsRequest("t", "1")).error_code == 0
        c.send(API_VERSIONS, 3, ApiVersionsRequest("t", "1"))  # a second answered one: Kafka closes
        assert c.is_closed_by_peer()
