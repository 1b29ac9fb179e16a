"""OAUTHBEARER validation (unsecured JWS and JWKS-signed tokens), the SCRAM credential store of
AlterUserScramCredentials / DescribeUserScramCredentials, and KIP-368 session lifetimes -- all
without sockets (the session's clock is injected)."""

from __future__ import annotations

import base64
import json
import os
import time

import jwt
import pytest
import scramp
from cryptography.hazmat.primitives.asymmetric import ec

from broker.config import Config, ConfigError
from broker.protocol.errors import ErrorCode
from broker.security.listeners import listener_security
from broker.security.oauth import (
    BadClientMessage,
    InvalidToken,
    JwksValidator,
    UnsecuredValidator,
    parse_client_first,
)
from broker.security.sasl import SaslFailure
from broker.security.scram_store import (
    FILE,
    Deletion,
    ScramCredentials,
    Upsertion,
    salted_password,
)

NOW_MS = 1_700_000_000_000


def _b64(obj: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


def unsecured(claims: dict, header: dict | None = None) -> str:
    return _b64(header or {"alg": "none"}) + "." + _b64(claims) + "."


def client_first(token: str, authzid: str = "", **ext: str) -> bytes:
    extra = "".join(f"{k}={v}\x01" for k, v in ext.items())
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01{extra}\x01".encode()


def test_client_first_message_is_parsed_as_rfc_7628():
    first = parse_client_first(client_first("a.b.", "alice", traceId="123"))
    assert (first.token, first.authzid, first.extensions) == ("a.b.", "alice", {"traceId": "123"})
    for bad in (
        b"",
        b"y,,\x01auth=Bearer x\x01\x01",
        b"n,,\x01\x01",
        b"n,,\x01auth=Basic x\x01\x01",
        b"n,,\x01auth=Bearer x\x01",
        b"\xff\xfe",
    ):
        with pytest.raises(BadClientMessage):
            parse_client_first(bad)


def test_unsecured_validator_takes_sub_and_checks_exp_iat_scope():
    v = UnsecuredValidator({})
    ok = v.validate(unsecured({"sub": "alice", "iat": NOW_MS / 1000 - 10, "exp": NOW_MS / 1000 + 60}), NOW_MS)
    assert ok.principal == "alice" and ok.expires_ms == NOW_MS + 60_000
    cases = [
        ({"sub": "alice", "exp": NOW_MS / 1000 - 1}, "Expiration Time"),  # expired
        ({"sub": "alice"}, "Required claim missing: exp"),
        ({"exp": NOW_MS / 1000 + 60}, "Required claim missing: sub"),
        ({"sub": "a", "iat": NOW_MS / 1000 + 60, "exp": NOW_MS / 1000 + 120}, "Issued At"),  # from the future
        ({"sub": "a", "iat": NOW_MS / 1000 - 1, "exp": NOW_MS / 1000 - 2 + 10}, None),
    ]
    for claims, reason in cases:
        if reason is None:
            v.validate(unsecured(claims), NOW_MS)
            continue
        with pytest.raises(InvalidToken, match=reason) as e:
            v.validate(unsecured(claims), NOW_MS)
        assert e.value.json() == '{"status":"invalid_token"}'
    with pytest.raises(InvalidToken, match="'none'"):
        v.validate(unsecured({"sub": "a", "exp": NOW_MS / 1000 + 9}, {"alg": "HS256"}), NOW_MS)
    with pytest.raises(InvalidToken, match="3 dot-separated"):
        v.validate("abc", NOW_MS)
    with pytest.raises(InvalidToken, match="malformed"):
        v.validate("!!.??.", NOW_MS)


def test_unsecured_validator_options_are_kafkas():
    v = UnsecuredValidator(
        {
            "unsecuredValidatorPrincipalClaimName": "user",
            "unsecuredValidatorScopeClaimName": "scp",
            "unsecuredValidatorRequiredScope": "write read",
            "unsecuredValidatorAllowableClockSkewMs": "5000",
        }
    )
    exp = NOW_MS / 1000 - 2  # expired 2 s ago: within the 5 s skew
    assert (
        v.validate(unsecured({"user": "bob", "scp": ["read", "write"], "exp": exp}), NOW_MS).principal
        == "bob"
    )
    with pytest.raises(InvalidToken) as e:
        v.validate(unsecured({"user": "bob", "scp": "read", "exp": exp}), NOW_MS)
    assert e.value.json() == '{"status":"insufficient_scope", "scope":"[write, read]"}'
    with pytest.raises(ConfigError, match="negative"):
        UnsecuredValidator({"unsecuredValidatorAllowableClockSkewMs": "-1"})


@pytest.fixture
def jwks(tmp_path):
    key = ec.generate_private_key(ec.SECP256R1())
    jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key()))
    jwk.update(kid="k1", alg="ES256", use="sig")
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [jwk]}))
    return key, path


def test_jwks_validator_checks_signature_audience_issuer(jwks):
    key, path = jwks
    now = int(time.time())
    v = JwksValidator(path, ["kafka"], "https://issuer", "sub", "scope", 30)

    def sign(claims, k=key, kid="k1"):
        return jwt.encode(claims, k, algorithm="ES256", headers={"kid": kid})

    good = {"sub": "svc", "aud": "kafka", "iss": "https://issuer", "iat": now, "exp": now + 300}
    assert v.validate(sign(good), now * 1000).principal == "svc"
    for claims, what in [
        ({**good, "aud": "other"}, "audience"),
        ({**good, "iss": "https://evil"}, "issuer"),
        ({**good, "exp": now - 3600}, "expired"),
    ]:
        with pytest.raises(InvalidToken, match=f"(?i){what}"):
            v.validate(sign(claims), now * 1000)
    with pytest.raises(InvalidToken, match="(?i)signature"):
        v.validate(sign(good, ec.generate_private_key(ec.SECP256R1())), now * 1000)
    with pytest.raises(InvalidToken, match="kid"):
        v.validate(sign(good, kid="k2"), now * 1000)
    with pytest.raises(InvalidToken):  # an unsecured token is not accepted by the JWKS validator
        v.validate(unsecured(good), now * 1000)


def _session(clock, **config):
    c = Config(
        {
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.users": "alice:secret",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,OAUTHBEARER",
            **config,
        }
    )
    auth = listener_security(c, c.endpoints())["SASL_PLAINTEXT"].sasl
    auth.clock = lambda: clock[0]
    return auth.session()


def test_oauthbearer_session_success_and_the_error_round_trip():
    clock = [NOW_MS]
    s = _session(clock)
    assert s.handshake("OAUTHBEARER", 1)
    token = unsecured({"sub": "alice", "exp": NOW_MS / 1000 + 60})
    assert s.step(client_first(token), 2) == b"" and s.state == "done" and s.principal == "User:alice"
    assert s.session_lifetime_ms == 60_000  # the token's lifetime, without connections.max.reauth.ms
    # an expired token: the server answers the JSON error, the client's \x01 then fails it
    s = _session(clock)
    s.handshake("OAUTHBEARER", 1)
    expired = unsecured({"sub": "alice", "exp": NOW_MS / 1000 - 60})
    assert s.step(client_first(expired), 2) == b'{"status":"invalid_token"}' and not s.failed
    with pytest.raises(SaslFailure, match='{"status":"invalid_token"}'):
        s.step(b"\x01", 2)
    assert s.failed and s.principal is None
    # a client that asks for another principal than the token's
    s = _session(clock)
    s.handshake("OAUTHBEARER", 1)
    with pytest.raises(SaslFailure, match="authorization id"):
        s.step(client_first(token, "bob"), 2)
    # garbage: Kafka's generic failure
    s = _session(clock)
    s.handshake("OAUTHBEARER", 1)
    with pytest.raises(SaslFailure, match="invalid credentials with SASL mechanism OAUTHBEARER"):
        s.step(b"garbage", 2)


def test_reauth_lifetime_expiry_and_reauthentication():
    clock = [NOW_MS]
    s = _session(clock, **{"connections.max.reauth.ms": "10000"})
    assert s.expires_at_ms is None and not s.begin_reauthentication()  # not authenticated yet
    s.handshake("PLAIN", 1)
    s.step(b"\x00alice\x00secret", 1)
    assert s.session_lifetime_ms == 10_000 and not s.expired()
    clock[0] += 10_001
    assert s.expired()
    assert s.begin_reauthentication() and s.state == "handshake"
    assert s.allows(18) is not None  # no ApiVersions during re-authentication
    assert not s.handshake("SCRAM-SHA-256", 1) and s.failed  # not the mechanism of the session
    s = _session(clock, **{"connections.max.reauth.ms": "10000"})
    s.handshake("PLAIN", 1)
    s.step(b"\x00alice\x00secret", 1)
    clock[0] += 5000
    assert s.begin_reauthentication()
    assert s.handshake("PLAIN", 1)
    s.step(b"\x00alice\x00secret", 1)
    assert s.state == "done" and s.expires_at_ms == clock[0] + 10_000
    clock[0] += 500
    assert not s.begin_reauthentication()  # at most one re-authentication a second (Kafka)


def test_reauth_may_not_change_the_principal():
    clock = [NOW_MS]
    s = _session(clock, **{"connections.max.reauth.ms": "10000", "sasl.users": "alice:secret,bob:pw"})
    s.handshake("PLAIN", 1)
    s.step(b"\x00alice\x00secret", 1)
    clock[0] += 2000
    s.begin_reauthentication()
    s.handshake("PLAIN", 1)
    with pytest.raises(
        SaslFailure, match="Cannot change principals during re-authentication from User.alice"
    ):
        s.step(b"\x00bob\x00pw", 1)


def test_oauth_lifetime_is_the_smaller_of_token_and_max_reauth():
    clock = [NOW_MS]
    s = _session(clock, **{"connections.max.reauth.ms": "10000"})
    s.handshake("OAUTHBEARER", 1)
    s.step(client_first(unsecured({"sub": "alice", "exp": NOW_MS / 1000 + 3})), 1)
    assert s.session_lifetime_ms == 3000


def test_no_lifetime_without_max_reauth_or_expiring_credential():
    s = _session([NOW_MS])
    s.handshake("PLAIN", 1)
    s.step(b"\x00alice\x00secret", 1)
    assert s.session_lifetime_ms == 0 and s.expires_at_ms is None and not s.expired()


# ---------------------------------------------------------------------------- SCRAM credentials


def _upsert(name, mech=1, iterations=4096, password="pw"):
    salt = os.urandom(16)
    m = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}.get(mech, "SCRAM-SHA-256")
    return Upsertion(name, mech, iterations, salt, salted_password(m, password, salt, iterations))


def test_alter_validates_as_kafkas_controller(tmp_path):
    store = ScramCredentials()
    store.open(tmp_path)
    results = store.alter(
        [Deletion("ghost", 1), Deletion("", 1), Deletion("x", 3)],
        [
            _upsert("alice"),
            _upsert("few", iterations=4095),
            _upsert("many", iterations=16385),
            _upsert("badmech", mech=0),
            _upsert("twice"),
            _upsert("twice", 2),
        ],
    )
    by_user = {u: (c, m) for u, c, m in results}
    assert by_user["alice"] == (0, None)
    assert by_user["ghost"] == (
        ErrorCode.RESOURCE_NOT_FOUND,
        "Attempt to delete a user credential that does not exist",
    )
    assert by_user[""] == (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
    assert by_user["x"] == (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
    assert by_user["few"] == (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
    assert by_user["many"] == (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
    assert by_user["badmech"][0] == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert by_user["twice"][0] == ErrorCode.DUPLICATE_RESOURCE
    assert set(store.users["SCRAM-SHA-256"]) == {"alice"} and not store.users["SCRAM-SHA-512"]


def test_credentials_are_salted_durable_and_used_by_scram(tmp_path):
    store = ScramCredentials()
    store.open(tmp_path)
    up = _upsert("alice", 2, 8192, "alice-secret")
    assert store.alter([], [up]) == [("alice", 0, None)]
    text = (tmp_path / FILE).read_text()
    assert "alice-secret" not in text and base64.b64encode(up.salted_password).decode() not in text
    again = ScramCredentials()
    again.open(tmp_path)  # what a restarted broker reads
    assert again.describe(None) == [("alice", 0, None, [(2, 8192)])]
    # the stored keys authenticate a real SCRAM client
    server = scramp.ScramMechanism("SCRAM-SHA-512").make_server(lambda n: again.users["SCRAM-SHA-512"][n])
    client = scramp.ScramClient(["SCRAM-SHA-512"], "alice", "alice-secret")
    server.set_client_first(client.get_client_first())
    client.set_server_first(server.get_server_first())
    server.set_client_final(client.get_client_final())
    client.set_server_final(server.get_server_final())


def test_deleting_a_configured_user_survives_restart(tmp_path):
    configured = {"SCRAM-SHA-256": {"alice": (b"s", b"k", b"k", 4096)}}
    store = ScramCredentials(configured)
    store.open(tmp_path)
    assert store.alter([Deletion("alice", 1)], []) == [("alice", 0, None)]
    again = ScramCredentials({"SCRAM-SHA-256": {"alice": (b"s", b"k", b"k", 4096)}})
    again.open(tmp_path)
    assert "alice" not in again.users["SCRAM-SHA-256"]
    assert again.describe(["alice"])[0][1] == ErrorCode.RESOURCE_NOT_FOUND


def test_describe_as_kafkas_scram_image():
    store = ScramCredentials()
    store.alter([], [_upsert("a"), _upsert("b", 2)])
    assert sorted(store.describe([])) == [("a", 0, None, [(1, 4096)]), ("b", 0, None, [(2, 4096)])]
    out = {u: (c, m) for u, c, m, _ in store.describe(["a", "a", "zz"])}
    assert out["a"] == (
        ErrorCode.DUPLICATE_RESOURCE,
        "Cannot describe SCRAM credentials for the same user twice in a single request: a",
    )
    assert out["zz"] == (
        ErrorCode.RESOURCE_NOT_FOUND,
        "Attempt to describe a user credential that does not exist: zz",
    )


def test_a_storage_failure_changes_nothing(tmp_path):
    store = ScramCredentials()
    store.open(tmp_path / "missing-dir")
    with pytest.raises(OSError):
        store.alter([], [_upsert("alice")])
    assert "alice" not in store.users["SCRAM-SHA-256"]
