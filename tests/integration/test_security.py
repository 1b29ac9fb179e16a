"""TLS and SASL listeners with real clients: confluent-kafka, kafka-python, aiokafka and the Java
client produce and consume through SSL, SASL_PLAINTEXT and SASL_SSL listeners of one broker (beside
PLAINTEXT); mTLS; what each client reports for a wrong password, an unknown user, an untrusted CA.

Certificates come from ``trustme`` (a throw-away CA); SASL users from ``sasl.users`` and from
Kafka's JAAS ``user_<name>`` form."""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import uuid
from pathlib import Path

import confluent_kafka
import pytest
import trustme
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import KafkaError as KPError

from broker.protocol.generated.api_versions import ApiVersionsRequest
from tests.support.java import json_lines, require_java
from tests.support.wire import request_bytes

USERS = "alice:alice-secret,bob:bob-secret"
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_carol="carol-secret";'
)
LISTENERS = "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0"


class Certs:
    def __init__(self, d: Path):
        self.ca = trustme.CA()
        server = self.ca.issue_cert("127.0.0.1", "localhost")
        self.server = d / "server.pem"
        server.private_key_and_cert_chain_pem.write_to_path(str(self.server))
        self.ca_file = d / "ca.pem"
        self.ca.cert_pem.write_to_path(str(self.ca_file))
        client = self.ca.issue_cert("app@example.com", common_name="app")
        self.client_cert, self.client_key = d / "client.crt", d / "client.key"
        client.cert_chain_pems[0].write_to_path(str(self.client_cert))
        client.private_key_pem.write_to_path(str(self.client_key))
        other = trustme.CA()  # a CA the broker does not trust
        stranger = other.issue_cert("stranger@example.com", common_name="stranger")
        self.stranger_cert, self.stranger_key = d / "stranger.crt", d / "stranger.key"
        stranger.cert_chain_pems[0].write_to_path(str(self.stranger_cert))
        stranger.private_key_pem.write_to_path(str(self.stranger_key))
        self.other_ca_file = d / "other-ca.pem"
        other.cert_pem.write_to_path(str(self.other_ca_file))


@pytest.fixture
def certs(tmp_path) -> Certs:
    return Certs(tmp_path)


def _start(broker_factory, certs: Certs, **extra):
    config = {
        "listeners": LISTENERS,
        "ssl.keystore.location": str(certs.server),
        "sasl.users": USERS,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "connection.failed.authentication.delay.ms": 0,
        "group.initial.rebalance.delay.ms": 0,
        **extra,
    }
    b = broker_factory(config)
    b.ports = {x.endpoint.name: x.port for x in b.broker.listener.bound}
    return b


@pytest.fixture
def secure(broker_factory, certs):
    return _start(broker_factory, certs)


def _ck_config(
    b,
    listener: str,
    certs: Certs,
    mechanism: str | None = None,
    user: str = "alice",
    password: str = "alice-secret",
) -> dict:
    conf: dict = {"bootstrap.servers": f"127.0.0.1:{b.ports[listener]}", "security.protocol": listener}
    if listener.endswith("SSL"):
        conf["ssl.ca.location"] = str(certs.ca_file)
    if mechanism:
        conf.update({"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password})
    return conf


def _ck_round_trip(conf: dict, n: int = 20) -> None:
    """confluent-kafka: produce n records, consume them in a group, commit; the committed offsets
    read back."""
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    p = confluent_kafka.Producer({**conf, "message.timeout.ms": 20000})
    for i in range(n):
        p.produce(topic, key=str(i).encode(), value=f"v{i}".encode())
    assert p.flush(30) == 0
    c = confluent_kafka.Consumer(
        {**conf, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    c.subscribe([topic])
    got = []
    for _ in range(200):
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            got.append(m.value())
        if len(got) == n:
            break
    assert got == [f"v{i}".encode() for i in range(n)]
    c.commit(asynchronous=False)
    committed = c.committed([confluent_kafka.TopicPartition(topic, 0)], timeout=10)
    assert committed[0].offset == n
    c.close()


@pytest.mark.parametrize(
    "listener, mechanism, user, password",
    [
        ("SSL", None, "", ""),
        ("SASL_PLAINTEXT", "PLAIN", "alice", "alice-secret"),
        ("SASL_PLAINTEXT", "PLAIN", "carol", "carol-secret"),  # a JAAS user_carol
        ("SASL_PLAINTEXT", "SCRAM-SHA-256", "bob", "bob-secret"),
        ("SASL_SSL", "SCRAM-SHA-512", "alice", "alice-secret"),
        ("SASL_SSL", "PLAIN", "bob", "bob-secret"),
    ],
)
def test_confluent_kafka_round_trip(secure, certs, listener, mechanism, user, password):
    _ck_round_trip(_ck_config(secure, listener, certs, mechanism, user, password))


def _ck_auth_error(conf: dict) -> str:
    """What confluent-kafka reports when it cannot authenticate: the error callback's message
    (nothing is produced: the produce times out)."""
    errors: list = []
    delivered: list = []
    p = confluent_kafka.Producer({**conf, "error_cb": errors.append, "message.timeout.ms": 3000})
    p.produce("never", b"x", on_delivery=lambda err, _msg: delivered.append(err))
    for _ in range(100):  # message.timeout.ms fails the record; its delivery report says so
        p.poll(0.1)
        if delivered:
            break
    assert len(delivered) == 1 and delivered[0] is not None, delivered  # the record was not produced
    assert errors, "no error reported"
    return " | ".join(str(e) for e in errors)


@pytest.mark.parametrize(
    "mechanism, user, message",
    [
        (
            "SCRAM-SHA-512",
            "alice",
            "Authentication failed during authentication due to invalid credentials "
            "with SASL mechanism SCRAM-SHA-512",
        ),
        (
            "SCRAM-SHA-256",
            "nobody",
            "Authentication failed during authentication due to invalid credentials "
            "with SASL mechanism SCRAM-SHA-256",
        ),
        ("PLAIN", "alice", "Authentication failed: Invalid username or password"),
        ("PLAIN", "nobody", "Authentication failed: Invalid username or password"),
    ],
)
def test_confluent_kafka_reports_authentication_failures(secure, certs, mechanism, user, message):
    conf = _ck_config(secure, "SASL_SSL", certs, mechanism, user, "wrong-password")
    reported = _ck_auth_error(conf)
    # librdkafka: _AUTHENTICATION "SASL authentication error: <the broker's message>"
    assert "SASL authentication error" in reported and message in reported, reported
    assert "never" not in secure.call(lambda: [t.name for t in secure.broker.topics.all()])
    _ck_round_trip(_ck_config(secure, "SASL_SSL", certs, mechanism, "alice", "alice-secret"), n=3)


def test_confluent_kafka_untrusted_ca_is_an_ssl_error(secure, certs):
    conf = _ck_config(secure, "SSL", certs)
    conf["ssl.ca.location"] = str(certs.other_ca_file)
    reported = _ck_auth_error(conf)
    assert "SSL handshake failed" in reported and "certificate verify failed" in reported, reported


def test_mtls_required(broker_factory, certs, caplog):
    b = _start(
        broker_factory,
        certs,
        **{
            "listener.name.ssl.ssl.client.auth": "required",
            "ssl.truststore.location": str(certs.ca_file),
            "listener.name.ssl.ssl.principal.mapping.rules": "RULE:^CN=([^,]*),.*$/$1/U,DEFAULT",
        },
    )
    base = _ck_config(b, "SSL", certs)
    with_cert = {
        **base,
        "ssl.certificate.location": str(certs.client_cert),
        "ssl.key.location": str(certs.client_key),
    }
    _ck_round_trip(with_cert)
    # the principal of a connection with a client certificate (held open by hand while we look)
    ctx = ssl.create_default_context(cafile=str(certs.ca_file))
    ctx.load_cert_chain(str(certs.client_cert), str(certs.client_key))
    with ctx.wrap_socket(
        socket.create_connection(("127.0.0.1", b.ports["SSL"])), server_hostname="127.0.0.1"
    ) as s:
        s.sendall(request_bytes(18, 3, ApiVersionsRequest("mtls", "1")))
        assert s.recv(4)  # answered: the connection is set up
        principals = b.call(
            lambda: sorted({c.client.principal for c in b.broker.connections if c.client.listener == "SSL"})
        )
    # the subject (RFC 2253, most specific first: "CN=app,OU=...,O=...") mapped by the rule
    assert principals == ["User:APP"]
    # no certificate, or one from a CA the broker does not trust: the handshake fails (under TLS 1.3
    # librdkafka sees the connection closed: "Disconnected" / _ALL_BROKERS_DOWN; nothing is produced)
    _ck_auth_error(base)
    assert "peer did not return a certificate" in caplog.text
    _ck_auth_error(
        {
            **base,
            "ssl.certificate.location": str(certs.stranger_cert),
            "ssl.key.location": str(certs.stranger_key),
        }
    )
    assert "certificate verify failed" in caplog.text
    # SASL_SSL keeps the default ssl.client.auth=none (the override names the SSL listener only)
    _ck_round_trip(_ck_config(b, "SASL_SSL", certs, "SCRAM-SHA-256"), n=3)


# ------------------------------------------------------------------------------------ kafka-python


def _kp_config(
    b, listener: str, certs: Certs, mechanism: str | None, user: str = "alice", password: str = "alice-secret"
) -> dict:
    conf: dict = {"bootstrap_servers": f"127.0.0.1:{b.ports[listener]}", "security_protocol": listener}
    if listener.endswith("SSL"):
        conf["ssl_cafile"] = str(certs.ca_file)
    if mechanism:
        conf.update(
            {"sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": password}
        )
    return conf


@pytest.mark.parametrize(
    "listener, mechanism",
    [
        ("SSL", None),
        ("SASL_PLAINTEXT", "PLAIN"),
        ("SASL_SSL", "PLAIN"),
        ("SASL_SSL", "SCRAM-SHA-256"),
        ("SASL_SSL", "SCRAM-SHA-512"),
    ],
)
def test_kafka_python_round_trip(secure, certs, listener, mechanism):
    conf = _kp_config(secure, listener, certs, mechanism)
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(**conf)
    for i in range(10):
        producer.send(topic, key=str(i).encode(), value=f"v{i}".encode()).get(timeout=20)
    producer.close()
    consumer = KafkaConsumer(
        topic,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=15000,
        **conf,
    )
    got = []
    for m in consumer:
        got.append(m.value)
        if len(got) == 10:
            break
    assert got == [f"v{i}".encode() for i in range(10)]
    consumer.commit()
    consumer.close()


def test_kafka_python_wrong_password(secure, certs, caplog):
    caplog.set_level(logging.INFO)
    conf = _kp_config(secure, "SASL_PLAINTEXT", certs, "SCRAM-SHA-512", password="wrong")
    with pytest.raises(KPError) as e:
        KafkaProducer(**conf, max_block_ms=5000, bootstrap_timeout_ms=5000)
    # kafka-python 3: KafkaTimeoutError "Unable to bootstrap"; the broker refused every attempt
    assert type(e.value).__name__ == "KafkaTimeoutError", repr(e.value)
    assert "authentication failed for alice" in caplog.text  # the broker refused the SCRAM exchange
    # (kafka-python's own log of the attempt varies: "[Error 58] SaslAuthenticationFailedError: <the
    # broker's message>" when it reads the answer before the close, a disconnect otherwise; the
    # broker's answer and close are checked on the wire in tests/server/test_sasl.py)


# ---------------------------------------------------------------------------------------- aiokafka


def test_aiokafka_scram_over_ssl(secure, certs):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    async def run() -> list[bytes]:
        conf = dict(
            bootstrap_servers=f"127.0.0.1:{secure.ports['SASL_SSL']}",
            security_protocol="SASL_SSL",
            ssl_context=create_ssl_context(cafile=str(certs.ca_file)),
            sasl_mechanism="SCRAM-SHA-512",
            sasl_plain_username="bob",
            sasl_plain_password="bob-secret",
        )
        producer = AIOKafkaProducer(**conf)
        await producer.start()
        try:
            for i in range(5):
                await producer.send_and_wait("aio", f"v{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer("aio", group_id="aio-g", auto_offset_reset="earliest", **conf)
        await consumer.start()
        try:
            got = []
            while len(got) < 5:
                m = await asyncio.wait_for(consumer.getone(), 20)
                got.append(m.value)
            await consumer.commit()
            return got
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == [f"v{i}".encode() for i in range(5)]


# -------------------------------------------------------------------------------------------- Java


@pytest.mark.java
@pytest.mark.parametrize(
    "listener, mechanism, module",
    [
        ("SASL_SSL", "SCRAM-SHA-512", "org.apache.kafka.common.security.scram.ScramLoginModule"),
        ("SASL_SSL", "SCRAM-SHA-256", "org.apache.kafka.common.security.scram.ScramLoginModule"),
        ("SASL_PLAINTEXT", "PLAIN", "org.apache.kafka.common.security.plain.PlainLoginModule"),
    ],
)
def test_java_client(secure, certs, tmp_path, monkeypatch, listener, mechanism, module):
    java = require_java()
    props = tmp_path / "client.properties"
    lines = [
        f"security.protocol={listener}",
        f"sasl.mechanism={mechanism}",
        f'sasl.jaas.config={module} required username="alice" password="alice-secret";',
    ]
    if listener == "SASL_SSL":
        lines += ["ssl.truststore.type=PEM", f"ssl.truststore.location={certs.ca_file}"]
    props.write_text("\n".join(lines) + "\n")
    monkeypatch.setenv("PROBE_CLIENT_PROPERTIES", str(props))
    bootstrap = f"127.0.0.1:{secure.ports[listener]}"
    result = java.run("ProduceConsumeProbe", [bootstrap, "produce jt 20 1000", "consume jt 20"], timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    produced, consumed = json_lines(result.stdout)
    assert len(produced["acks"]) == 20 and len(consumed["records"]) == 20


@pytest.mark.java
def test_java_client_wrong_password(secure, certs, tmp_path, monkeypatch):
    java = require_java()
    props = tmp_path / "client.properties"
    props.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\nssl.truststore.type=PEM\n"
        f"ssl.truststore.location={certs.ca_file}\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="alice" password="wrong";\n'
    )
    monkeypatch.setenv("PROBE_CLIENT_PROPERTIES", str(props))
    bootstrap = f"127.0.0.1:{secure.ports['SASL_SSL']}"
    result = java.run("ProduceConsumeProbe", [bootstrap, "produce jt 1 1000"], timeout=120)
    assert result.returncode == 1
    (out,) = json_lines(result.stdout)
    # the Java client: SaslAuthenticationException carrying the broker's message
    assert "SaslAuthenticationException" in out["error"], out
    assert "invalid credentials with SASL mechanism SCRAM-SHA-256" in out["message"], out
