"""On the wire (real TCP, no client library): KIP-368 session lifetimes, re-authentication on the
same connection and the close of an expired session (the authenticator's clock is replaced by a
manual one: no waiting); OAUTHBEARER's error round trip; SCRAM users created through
AlterUserScramCredentials authenticating at once."""

from __future__ import annotations

import base64
import json
import os

import pytest
import scramp

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from broker.protocol.generated.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
    UserName,
)
from broker.protocol.generated.metadata import MetadataRequest
from broker.protocol.generated.sasl_authenticate import SaslAuthenticateRequest
from broker.protocol.generated.sasl_handshake import SaslHandshakeRequest
from broker.security.scram_store import salted_password
from tests.support.wire import WireClient

METADATA, HANDSHAKE, AUTHENTICATE, DESCRIBE_SCRAM, ALTER_SCRAM = 3, 17, 36, 50, 51
NOW_MS = 1_700_000_000_000

CONFIG = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.users": "alice:alice-secret,bob:bob-secret",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
    "connection.failed.authentication.delay.ms": 0,
    "connections.max.reauth.ms": 10000,
}


@pytest.fixture
def broker(broker_factory):
    b = broker_factory(CONFIG)
    b.ports = {x.endpoint.name: x.port for x in b.broker.listener.bound}
    b.clock = [NOW_MS]
    b.broker.listener.security["SASL_PLAINTEXT"].sasl.clock = lambda: b.clock[0]
    return b


def _metadata(c: WireClient) -> int:
    return len(c.call(METADATA, 4, MetadataRequest(topics=[], allow_auto_topic_creation=False)).brokers)


def _plain(c: WireClient, user: str = "alice", password: str = "alice-secret", version: int = 2):
    assert c.call(HANDSHAKE, 1, SaslHandshakeRequest("PLAIN")).error_code == 0
    return c.call(
        AUTHENTICATE, version, SaslAuthenticateRequest(b"\x00" + user.encode() + b"\x00" + password.encode())
    )


def _b64(obj: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


def _oauth_first(claims: dict) -> bytes:
    token = _b64({"alg": "none"}) + "." + _b64(claims) + "."
    return f"n,,\x01auth=Bearer {token}\x01\x01".encode()


def test_session_lifetime_reauthentication_and_expiry(broker):
    with WireClient(broker.ports["SASL_PLAINTEXT"]) as c:
        resp = _plain(c)
        assert (resp.error_code, resp.session_lifetime_ms) == (0, 10000)
        assert _metadata(c) == 1
        broker.clock[0] += 6000
        resp = _plain(c)  # re-authentication on the same connection (KIP-368)
        assert (resp.error_code, resp.session_lifetime_ms) == (0, 10000)
        broker.clock[0] += 6000  # past the first session's end, within the second's
        assert _metadata(c) == 1
        broker.clock[0] += 4001  # the second session is over: the next request closes the connection
        c.send(METADATA, 4, MetadataRequest(topics=[], allow_auto_topic_creation=False))
        assert c.is_closed_by_peer()
    with WireClient(broker.ports["SASL_PLAINTEXT"]) as c:  # the broker serves others
        assert _plain(c).error_code == 0 and _metadata(c) == 1


def test_reauthentication_keeps_principal_and_mechanism(broker):
    with WireClient(broker.ports["SASL_PLAINTEXT"]) as c:
        assert _plain(c).error_code == 0
        broker.clock[0] += 2000
        resp = _plain(c, "bob", "bob-secret")
        assert resp.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert (
            resp.error_message
            == "Cannot change principals during re-authentication from User.alice: User.bob"
        )
        assert c.is_closed_by_peer()
    with WireClient(broker.ports["SASL_PLAINTEXT"]) as c:
        assert _plain(c).error_code == 0
        broker.clock[0] += 2000
        resp = c.call(HANDSHAKE, 1, SaslHandshakeRequest("SCRAM-SHA-256"))
        assert resp.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert c.is_closed_by_peer()


def test_oauthbearer_expired_token_is_answered_with_the_json_error_then_fails(broker):
    with WireClient(broker.ports["SASL_PLAINTEXT"]) as c:
        assert c.call(HANDSHAKE, 1, SaslHandshakeRequest("OAUTHBEARER")).error_code == 0
        first = c.call(
            AUTHENTICATE, 2, SaslAuthenticateRequest(_oauth_first({"sub": "alice", "exp": NOW_MS / 1000 - 1}))
        )
        assert first.error_code == 0 and bytes(first.auth_bytes) == b'{"status":"invalid_token"}'
        final = c.call(AUTHENTICATE, 2, SaslAuthenticateRequest(b"\x01"))
        assert (final.error_code, final.error_message) == (
            ErrorCode.SASL_AUTHENTICATION_FAILED,
            '{"status":"invalid_token"}',
        )
        assert c.is_closed_by_peer()
    with WireClient(broker.ports["SASL_PLAINTEXT"]) as c:
        assert c.call(HANDSHAKE, 1, SaslHandshakeRequest("OAUTHBEARER")).error_code == 0
        ok = c.call(
            AUTHENTICATE, 2, SaslAuthenticateRequest(_oauth_first({"sub": "carol", "exp": NOW_MS / 1000 + 5}))
        )
        assert (ok.error_code, ok.session_lifetime_ms) == (0, 5000)  # the token's lifetime, under the 10 s
        assert _metadata(c) == 1
        principals = broker.call(lambda: {x.client.principal for x in broker.broker.connections})
        assert "User:carol" in principals


def _upsert(name: str, mech: int, password: str, iterations: int = 4096) -> ScramCredentialUpsertion:
    salt = os.urandom(16)
    m = "SCRAM-SHA-256" if mech == 1 else "SCRAM-SHA-512"
    return ScramCredentialUpsertion(
        name, mech, iterations, salt, salted_password(m, password, salt, iterations)
    )


def _scram(c: WireClient, mech: str, user: str, password: str):
    client = scramp.ScramClient([mech], user, password)
    assert c.call(HANDSHAKE, 1, SaslHandshakeRequest(mech)).error_code == 0
    first = c.call(AUTHENTICATE, 2, SaslAuthenticateRequest(client.get_client_first().encode()))
    if first.error_code:
        return first
    client.set_server_first(bytes(first.auth_bytes).decode())
    final = c.call(AUTHENTICATE, 2, SaslAuthenticateRequest(client.get_client_final().encode()))
    if final.error_code == 0:
        client.set_server_final(bytes(final.auth_bytes).decode())  # the server proved it knows the key
    return final


def test_credentials_altered_over_the_wire_apply_at_once(broker):
    with WireClient(broker.ports["PLAINTEXT"]) as admin:
        resp = admin.call(
            ALTER_SCRAM,
            0,
            AlterUserScramCredentialsRequest(
                deletions=[ScramCredentialDeletion("bob", 2)],
                upsertions=[_upsert("dave", 1, "dave-secret"), _upsert("eve", 2, "x", iterations=100)],
            ),
        )
        assert sorted((r.user, r.error_code, r.error_message) for r in resp.results) == [
            ("bob", 0, None),
            ("dave", 0, None),
            ("eve", ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        ]
        described = admin.call(
            DESCRIBE_SCRAM,
            0,
            DescribeUserScramCredentialsRequest(users=[UserName("dave"), UserName("bob"), UserName("eve")]),
        )
        got = {
            r.user: (r.error_code, [(i.mechanism, i.iterations) for i in r.credential_infos])
            for r in described.results
        }
        assert got == {
            "dave": (0, [(1, 4096)]),
            "bob": (0, [(1, 4096)]),
            "eve": (ErrorCode.RESOURCE_NOT_FOUND, []),
        }
    with WireClient(broker.ports["SASL_PLAINTEXT"]) as c:
        assert _scram(c, "SCRAM-SHA-256", "dave", "dave-secret").error_code == 0
    with WireClient(broker.ports["SASL_PLAINTEXT"]) as c:  # bob's SHA-512 credential is gone
        assert (
            _scram(c, "SCRAM-SHA-512", "bob", "bob-secret").error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        )
    with WireClient(broker.ports["SASL_PLAINTEXT"]) as c:  # his SHA-256 one stays
        assert _scram(c, "SCRAM-SHA-256", "bob", "bob-secret").error_code == 0
