"""Security pieces without sockets: per-listener properties, JAAS users, TLS contexts from PEM
properties, certificate principals, and the SASL session's states."""

from __future__ import annotations

import hashlib
import hmac
import ssl

import pytest
import scramp
import trustme

from broker.config import Config, ConfigError
from broker.control.trace import to_json
from broker.protocol.generated.sasl_authenticate import SaslAuthenticateRequest
from broker.security.listeners import listener_security
from broker.security.sasl import PLAIN_FAILED, SaslFailure, parse_jaas_users, parse_users
from broker.security.scram_store import keys_from_salted_password, salted_password
from broker.security.tls import PrincipalRules, principal_from_cert, server_context


def test_listener_prefixed_properties_win_over_broker_wide_ones():
    c = Config(
        {
            "listeners": "SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
            "ssl.client.auth": "requested",
            "listener.name.ssl.ssl.client.auth": "required",
        }
    )
    assert c.listener_prop("SSL", "ssl.client.auth") == "required"
    assert c.listener_prop("SASL_SSL", "ssl.client.auth") == "requested"
    assert [(e.name, e.security_protocol, e.tls, e.sasl) for e in c.endpoints()] == [
        ("SSL", "SSL", True, False),
        ("SASL_SSL", "SASL_SSL", True, True),
    ]
    assert "listener.name.ssl.ssl.client.auth" not in c.unknown


def test_jaas_and_sasl_users():
    jaas = (
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_a\\"b="p\\"w";'
    )
    assert parse_jaas_users(jaas) == {"admin": "admin-secret"}
    assert parse_users("alice:pw:with:colons, bob:x") == {"alice": "pw:with:colons", "bob": "x"}
    with pytest.raises(ConfigError, match="sasl.users: expected name:password"):
        parse_users("alice")


@pytest.fixture
def pem(tmp_path):
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    server = tmp_path / "server.pem"
    cert.private_key_and_cert_chain_pem.write_to_path(str(server))
    return ca, cert, server


def test_tls_context_from_file_or_inline_pem(pem):
    ca, cert, server = pem
    ctx = server_context(lambda k: {"ssl.keystore.location": str(server)}.get(k, ""), "SSL")
    assert ctx.verify_mode == ssl.CERT_NONE
    inline = {
        "ssl.keystore.certificate.chain": b"".join(b.bytes() for b in cert.cert_chain_pems).decode(),
        "ssl.keystore.key": cert.private_key_pem.bytes().decode(),
        "ssl.truststore.certificates": ca.cert_pem.bytes().decode(),
        "ssl.client.auth": "required",
    }
    ctx = server_context(lambda k: inline.get(k, ""), "SSL")
    assert ctx.verify_mode == ssl.CERT_REQUIRED


@pytest.mark.parametrize(
    "props, message",
    [
        ({}, "listener SSL uses TLS: set ssl.keystore.location"),
        (
            {"ssl.keystore.location": "/nonexistent.pem"},
            "cannot load the TLS key and certificate of listener SSL",
        ),
        ({"ssl.keystore.type": "JKS"}, "only PEM key and trust stores"),
        ({"ssl.client.auth": "required", "ssl.keystore.location": "SERVER"}, "needs the CAs"),
    ],
)
def test_tls_settings_kafka_would_refuse(pem, props, message):
    _ca, _cert, server = pem
    props = {k: (str(server) if v == "SERVER" else v) for k, v in props.items()}
    with pytest.raises(ConfigError, match=message):
        server_context(lambda k: props.get(k, ""), "SSL")


def test_principal_from_certificate_subject():
    cert = {
        "subject": ((("countryName", "US"),), (("organizationName", "Example"),), (("commonName", "app"),))
    }
    assert principal_from_cert(cert) == "User:CN=app,O=Example,C=US"
    assert principal_from_cert({}) == "User:ANONYMOUS"


def _session(**config):
    c = Config({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.users": "alice:secret", **config})
    return listener_security(c, c.endpoints())["SASL_PLAINTEXT"].sasl.session()


def test_session_gate_states():
    s = _session()
    assert s.allows(18) is None  # ApiVersions until one is answered
    s.versions_answered = True
    assert s.allows(18) is not None
    assert s.allows(3) is not None and s.allows(36) is not None
    assert s.allows(17) is None
    assert s.handshake("PLAIN", 1) and s.state == "authenticate" and not s.raw
    assert s.allows(17) is not None and s.allows(36) is None
    assert s.step(b"\x00alice\x00secret") == b"" and s.principal == "User:alice"


def test_session_failures_set_failed():
    s = _session()
    assert not s.handshake("GSSAPI", 1) and s.failed
    s = _session()
    s.handshake("PLAIN", 0)
    with pytest.raises(SaslFailure, match=PLAIN_FAILED):
        s.step(b"\x00alice\x00nope")
    assert s.failed and s.principal is None and s.user == "alice"


def test_scram_session_with_a_real_client_and_mechanism_subset():
    s = _session(**{"sasl.enabled.mechanisms": "SCRAM-SHA-512"})
    assert not s.handshake("PLAIN", 1)
    s = _session(**{"sasl.enabled.mechanisms": "SCRAM-SHA-512"})
    assert s.handshake("SCRAM-SHA-512", 1)
    client = scramp.ScramClient(["SCRAM-SHA-512"], "alice", "secret")
    client.set_server_first(s.step(client.get_client_first().encode()).decode())
    client.set_server_final(s.step(client.get_client_final().encode()).decode())
    assert s.principal == "User:alice"


@pytest.mark.parametrize(
    "rules, dn, name",
    [
        ("DEFAULT", "CN=app,O=Example", "CN=app,O=Example"),
        ("RULE:^CN=(.*?),O=(.*)$/$1@$2/L,DEFAULT", "CN=App,O=Example", "app@example"),
        ("RULE:^CN=(.*?),OU=Svc.*$/$1/U, RULE:^CN=(.*?),.*$/$1/", "CN=app,O=Example", "app"),
        ("RULE:^CN=(.*?),OU=Svc.*$/$1/", "CN=app,O=Example", "CN=app,O=Example"),  # no match: as is
    ],
)
def test_ssl_principal_mapping_rules(rules, dn, name):
    assert PrincipalRules(rules).apply(dn) == name


def test_bad_principal_mapping_rules_are_refused():
    with pytest.raises(ConfigError, match="ssl.principal.mapping.rules"):
        PrincipalRules("RULE:^CN=(.*$/$1/")
    with pytest.raises(ConfigError, match="ssl.principal.mapping.rules"):
        PrincipalRules("NOT A RULE")


def test_principal_mapping_applies_to_the_certificate_subject():
    cert = {"subject": ((("organizationName", "Example"),), (("commonName", "app"),))}
    assert principal_from_cert(cert, PrincipalRules("RULE:^CN=([^,]*),.*$/$1/U")) == "User:APP"


def test_the_protocol_trace_never_records_sasl_tokens():
    token = b"\x00alice\x00secret"
    assert to_json(SaslAuthenticateRequest(token)) == {"auth_bytes": {"bytes": len(token), "redacted": True}}


@pytest.mark.parametrize(("mechanism", "name"), [("SCRAM-SHA-256", "sha256"), ("SCRAM-SHA-512", "sha512")])
def test_scram_keys_are_rfc_5802s(mechanism, name):
    salted = salted_password(mechanism, "pencil", b"salt", 4096)
    assert salted == hashlib.pbkdf2_hmac(name, b"pencil", b"salt", 4096)
    h = getattr(hashlib, name)
    client_key = hmac.new(salted, b"Client Key", h).digest()
    assert keys_from_salted_password(mechanism, salted) == (
        h(client_key).digest(),
        hmac.new(salted, b"Server Key", h).digest(),
    )
