"""SASL acceptance with real clients over TCP (issue 16): OAUTHBEARER (Java's OAuthBearerLoginModule
with an unsecured token, confluent-kafka's built-in unsecured JWT), KIP-368 re-authentication of the
Java client, aiokafka PLAIN over SASL_SSL, kafkajs SCRAM and kcat over SASL_SSL -- and the failures:
an expired token, a wrong password. For each failure: what the client reports, that nothing was
produced, and that the broker goes on serving others."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import re
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import confluent_kafka
import pytest

from broker.security.sasl import wall_ms
from tests.integration.test_security import Certs, _ck_auth_error, _ck_config, _ck_round_trip, _start
from tests.support.java import Java, json_lines, require_java

REPO = Path(__file__).resolve().parents[2]
KAFKAJS_DIR = REPO / ".reference" / "kafkajs"
KAFKAJS_PROBE = Path(__file__).parent / "js" / "kafkajs_probe.js"
MECHANISMS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER"
OAUTH_JAAS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required"


@pytest.fixture
def certs(tmp_path) -> Certs:
    return Certs(tmp_path)


@pytest.fixture
def secure(broker_factory, certs):
    return _start(broker_factory, certs, **{"sasl.enabled.mechanisms": MECHANISMS})


def _topics(b) -> list[str]:
    return b.call(lambda: [t.name for t in b.broker.topics.all()])


def _skew_clock(b, listener: str, ms: int) -> None:
    """The broker's OAUTHBEARER / session clock on ``listener`` runs ``ms`` ahead (tokens the
    client made valid for an hour are expired for the broker)."""
    b.broker.listener.security[listener].sasl.clock = lambda: wall_ms() + ms


def _java_with_jackson() -> Java:
    """The 3.9 client probes with Jackson on the classpath: kafka-clients' OAUTHBEARER login parses
    its JWT with jackson-databind, an optional dependency of the client that its jar set here lacks;
    the Jackson jars of the reference Kafka broker (scripts/kafka.sh) serve."""
    java = require_java("3.9")
    jackson = sorted((REPO / ".reference" / "kafka-broker").glob("jackson-*.jar"))
    names = {p.name.rsplit("-", 1)[0] for p in jackson}
    if not {"jackson-databind", "jackson-core", "jackson-annotations"} <= names:
        pytest.fail(
            f"the Jackson jars of .reference/kafka-broker are missing (scripts/kafka.sh): {sorted(names)}"
        )
    return Java(java.java, [Path(p) for p in java.classpath.split(os.pathsep)] + jackson, java.version)


def _java_props(tmp_path: Path, certs: Certs, lines: list[str]) -> Path:
    props = tmp_path / f"client-{uuid.uuid4().hex[:6]}.properties"
    props.write_text(
        "\n".join([*lines, "ssl.truststore.type=PEM", f"ssl.truststore.location={certs.ca_file}"]) + "\n"
    )
    return props


# -------------------------------------------------------------------------------------------- Java


@pytest.mark.java
def test_java_oauthbearer_unsecured_login(secure, certs, tmp_path, monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="broker.server.connection")
    java = _java_with_jackson()
    props = _java_props(
        tmp_path,
        certs,
        [
            "security.protocol=SASL_SSL",
            "sasl.mechanism=OAUTHBEARER",
            f'sasl.jaas.config={OAUTH_JAAS} unsecuredLoginStringClaim_sub="carol";',
        ],
    )
    monkeypatch.setenv("PROBE_CLIENT_PROPERTIES", str(props))
    bootstrap = f"127.0.0.1:{secure.ports['SASL_SSL']}"
    result = java.run("ProduceConsumeProbe", [bootstrap, "produce jo 20 1000", "consume jo 20"], timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    produced, consumed = json_lines(result.stdout)
    assert len(produced["acks"]) == 20 and len(consumed["records"]) == 20
    assert "authenticated as User:carol (OAUTHBEARER" in caplog.text


@pytest.mark.java
def test_java_oauthbearer_expired_token(secure, certs, tmp_path, monkeypatch):
    _skew_clock(secure, "SASL_SSL", 2 * 3600 * 1000)  # Java's unsecured tokens live an hour
    java = _java_with_jackson()
    props = _java_props(
        tmp_path,
        certs,
        [
            "security.protocol=SASL_SSL",
            "sasl.mechanism=OAUTHBEARER",
            f'sasl.jaas.config={OAUTH_JAAS} unsecuredLoginStringClaim_sub="carol";',
        ],
    )
    monkeypatch.setenv("PROBE_CLIENT_PROPERTIES", str(props))
    result = java.run(
        "ProduceConsumeProbe", [f"127.0.0.1:{secure.ports['SASL_SSL']}", "produce jx 1 1000"], timeout=120
    )
    assert result.returncode == 1
    (out,) = json_lines(result.stdout)
    # the Java client: SaslAuthenticationException with the broker's JSON error
    assert out["error"].endswith("SaslAuthenticationException"), out
    assert '{"status":"invalid_token"}' in out["message"], out
    assert "jx" not in _topics(secure)
    _ck_round_trip(_ck_config(secure, "SASL_SSL", certs, "SCRAM-SHA-256"), n=3)  # others are served


@pytest.mark.java
def test_java_reauthenticates_on_the_same_connection(broker_factory, certs, tmp_path, monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="broker.server.connection")
    b = _start(broker_factory, certs, **{"connections.max.reauth.ms": 2000})
    java = require_java("3.9")
    props = _java_props(
        tmp_path,
        certs,
        [
            "security.protocol=SASL_SSL",
            "sasl.mechanism=SCRAM-SHA-256",
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            'username="alice" password="alice-secret";',
        ],
    )
    monkeypatch.setenv("PROBE_CLIENT_PROPERTIES", str(props))
    # 7 records 1 s apart: the client's connections outlive a 2 s session several times
    result = java.run(
        "ProduceConsumeProbe", [f"127.0.0.1:{b.ports['SASL_SSL']}", "paced jr 7 1000"], timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (out,) = json_lines(result.stdout)
    assert [a[1] for a in out["acks"]] == list(range(7))
    assert "re-authenticated as User:alice (SCRAM-SHA-256, session lifetime 2000 ms)" in caplog.text
    assert "expired without re-authentication" not in caplog.text


def test_confluent_kafka_reauthenticates(broker_factory, certs, caplog):
    """librdkafka re-authenticates too (KIP-368, librdkafka 2.2+): records produced across several
    sessions all arrive, and no connection is closed for an expired session."""
    caplog.set_level(logging.INFO, logger="broker.server.connection")
    b = _start(broker_factory, certs, **{"connections.max.reauth.ms": 2000})
    conf = _ck_config(b, "SASL_SSL", certs, "SCRAM-SHA-512")
    p = confluent_kafka.Producer({**conf, "message.timeout.ms": 30000})
    delivered: list = []
    for i in range(4):
        p.produce("ckr", f"v{i}".encode(), on_delivery=lambda err, msg: delivered.append(err))
        p.flush(20)
        time.sleep(1.5)  # the client's sessions end between the records
    assert delivered == [None] * 4
    assert "re-authenticated as User:alice (SCRAM-SHA-512, session lifetime 2000 ms)" in caplog.text
    assert "expired without re-authentication" not in caplog.text


# ------------------------------------------------------------------------------------ confluent-kafka


def test_confluent_kafka_oauthbearer_unsecured_jwt(secure, certs, caplog):
    caplog.set_level(logging.INFO, logger="broker.server.connection")
    conf = _ck_config(secure, "SASL_SSL", certs)
    conf.update(
        {
            "sasl.mechanism": "OAUTHBEARER",
            "enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": "principal=dave",
        }
    )
    _ck_round_trip(conf)
    assert "authenticated as User:dave (OAUTHBEARER" in caplog.text


def _b64(obj: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


def test_confluent_kafka_oauthbearer_expired_token(secure, certs):
    expired = _b64({"alg": "none"}) + "." + _b64({"sub": "dave", "exp": int(time.time()) - 60}) + "."
    conf = _ck_config(secure, "SASL_SSL", certs)
    conf.update(
        {
            "sasl.mechanism": "OAUTHBEARER",
            # the application's token source: a token whose exp claim has passed (librdkafka only checks
            # the lifetime it is told, here an hour ahead)
            "oauth_cb": lambda _config: (expired, time.time() + 3600, "dave"),
        }
    )
    reported = _ck_auth_error(conf)
    # librdkafka: _AUTHENTICATION "SASL authentication error: {"status":"invalid_token"}"
    assert "SASL authentication error" in reported and '{"status":"invalid_token"}' in reported, reported
    assert "never" not in _topics(secure)
    _ck_round_trip(_ck_config(secure, "SASL_SSL", certs, "SCRAM-SHA-512"), n=3)


# ------------------------------------------------------------------------------------------ aiokafka


def _aio_conf(b, certs, mechanism: str, user: str, password: str) -> dict:
    from aiokafka.helpers import create_ssl_context

    return dict(
        bootstrap_servers=f"127.0.0.1:{b.ports['SASL_SSL']}",
        security_protocol="SASL_SSL",
        ssl_context=create_ssl_context(cafile=str(certs.ca_file)),
        sasl_mechanism=mechanism,
        sasl_plain_username=user,
        sasl_plain_password=password,
        request_timeout_ms=10000,
    )


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_aiokafka_over_sasl_ssl(secure, certs, mechanism):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    topic = f"aio-{mechanism.lower()}"

    async def run() -> list[bytes]:
        conf = _aio_conf(secure, certs, mechanism, "alice", "alice-secret")
        producer = AIOKafkaProducer(**conf)
        await producer.start()
        try:
            for i in range(5):
                await producer.send_and_wait(topic, f"v{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, group_id=topic + "-g", auto_offset_reset="earliest", **conf)
        await consumer.start()
        try:
            got = []
            while len(got) < 5:
                got.append((await asyncio.wait_for(consumer.getone(), 20)).value)
            return got
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == [f"v{i}".encode() for i in range(5)]


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_aiokafka_wrong_password(secure, certs, mechanism):
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError

    async def run() -> BaseException:
        producer = AIOKafkaProducer(**_aio_conf(secure, certs, mechanism, "alice", "wrong"))
        try:
            await producer.start()
        except KafkaError as e:
            return e
        finally:
            await producer.stop()
        raise AssertionError("aiokafka started with a wrong password")

    e = asyncio.run(run())
    # aiokafka: the bootstrap fails with KafkaConnectionError "Unable to bootstrap from ..." (it logs
    # the broker's SaslAuthenticationFailedError per attempt)
    assert type(e).__name__ == "KafkaConnectionError" and "Unable to bootstrap" in str(e), repr(e)
    assert not [t for t in _topics(secure) if t.startswith("aio-wrong")]
    _ck_round_trip(_ck_config(secure, "SASL_SSL", certs, "PLAIN"), n=3)


# ------------------------------------------------------------------------------------------- kafkajs


def _kafkajs(b, certs, mechanism: str, user: str, password: str, topic: str) -> tuple[int, dict]:
    node = shutil.which("node")
    if node is None or not (KAFKAJS_DIR / "node_modules" / "kafkajs").is_dir():
        pytest.fail("kafkajs is not installed: run scripts/kafkajs.sh (scripts/setup.sh test does)")
    r = subprocess.run(
        [
            node,
            str(KAFKAJS_PROBE),
            f"127.0.0.1:{b.ports['SASL_SSL']}",
            mechanism,
            user,
            password,
            str(certs.ca_file),
            topic,
            "5",
        ],
        capture_output=True,
        text=True,
        timeout=90,
        env={**os.environ, "KAFKAJS_DIR": str(KAFKAJS_DIR)},
    )
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    assert lines, (r.stdout, r.stderr)
    return r.returncode, json.loads(lines[-1])


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kafkajs_scram(secure, certs, mechanism):
    rc, out = _kafkajs(secure, certs, mechanism, "bob", "bob-secret", f"kjs-{mechanism.lower()}")
    assert rc == 0 and out == {"produced": 5, "consumed": [f"v{i}" for i in range(5)]}, out


def test_kafkajs_wrong_password(secure, certs):
    rc, out = _kafkajs(secure, certs, "SCRAM-SHA-256", "bob", "wrong", "kjs-wrong")
    # kafkajs: KafkaJSSASLAuthenticationError carrying the broker's message
    assert rc == 1 and out["error"] == "KafkaJSSASLAuthenticationError", out
    assert "invalid credentials with SASL mechanism SCRAM-SHA-256" in out["message"], out
    assert "kjs-wrong" not in _topics(secure)
    rc, out = _kafkajs(secure, certs, "SCRAM-SHA-256", "bob", "bob-secret", "kjs-after")
    assert rc == 0, out


# ---------------------------------------------------------------------------------------------- kcat


def _kcat(b, certs, mechanism: str, password: str, *args: str, stdin: str | None = None):
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        pytest.fail("kcat is not installed (scripts/setup.sh test installs it with apt-get)")
    return subprocess.run(
        [
            kcat,
            "-b",
            f"127.0.0.1:{b.ports['SASL_SSL']}",
            "-X",
            "security.protocol=SASL_SSL",
            "-X",
            f"sasl.mechanisms={mechanism}",
            "-X",
            "sasl.username=alice",
            "-X",
            f"sasl.password={password}",
            "-X",
            f"ssl.ca.location={certs.ca_file}",
            *args,
        ],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _librdkafka_version_of_kcat() -> tuple[int, ...]:
    out = subprocess.run([shutil.which("kcat") or "kcat", "-V"], capture_output=True, text=True).stdout
    m = re.search(r"librdkafka ([0-9.]+)", out)
    assert m, out
    return tuple(int(x) for x in m.group(1).split("."))


def test_kcat_plain_over_sasl_ssl(secure, certs):
    p = _kcat(secure, certs, "PLAIN", "alice-secret", "-P", "-t", "kcat-plain", stdin="a\nb\nc\n")
    assert p.returncode == 0, p.stderr
    c = _kcat(secure, certs, "PLAIN", "alice-secret", "-C", "-t", "kcat-plain", "-o", "beginning", "-e", "-q")
    assert c.returncode == 0 and c.stdout.split() == ["a", "b", "c"], (c.stdout, c.stderr)


def test_kcat_scram_over_sasl_ssl(secure, certs):
    """librdkafka before 2.6.1 (Debian's kcat has 2.0.2) repeats its nonce in the SCRAM client-final
    message (confluentinc/librdkafka#4895); Kafka 4.x, like this broker, checks the nonce as RFC 5802
    says and refuses it. A fixed librdkafka authenticates."""
    p = _kcat(secure, certs, "SCRAM-SHA-512", "alice-secret", "-P", "-t", "kcat-scram", stdin="a\nb\n")
    if _librdkafka_version_of_kcat() < (2, 6, 1):
        assert p.returncode != 0
        assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in p.stderr, p.stderr
        assert "kcat-scram" not in _topics(secure)
        return
    assert p.returncode == 0, p.stderr
    c = _kcat(
        secure, certs, "SCRAM-SHA-512", "alice-secret", "-C", "-t", "kcat-scram", "-o", "beginning", "-e"
    )
    assert c.stdout.split() == ["a", "b"], (c.stdout, c.stderr)


def test_kcat_wrong_password(secure, certs):
    r = _kcat(secure, certs, "PLAIN", "wrong", "-P", "-t", "kcat-wrong", "-m", "5", stdin="x\n")
    # kcat (librdkafka): "SASL authentication error: <the broker's message>" on stderr, and a failure
    assert r.returncode != 0
    assert "SASL authentication error: Authentication failed: Invalid username or password" in r.stderr, (
        r.stderr
    )
    assert "kcat-wrong" not in _topics(secure)
    ok = _kcat(secure, certs, "PLAIN", "alice-secret", "-L", "-m", "10")
    assert ok.returncode == 0 and "1 brokers" in ok.stdout, ok.stdout


# ------------------------------------------------------------------- SCRAM users through an admin client


def test_confluent_kafka_admin_manages_scram_users(secure, certs):
    """confluent-kafka's AdminClient creates, describes and deletes a SCRAM user (KIP-554); the user
    logs in at once, and no longer once deleted."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{secure.ports['PLAINTEXT']}"})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192)
    for f in admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion("erin", info, b"erin-secret")]
    ).values():
        f.result(10)
    described = admin.describe_user_scram_credentials(["erin"])["erin"].result(10)
    assert [(c.mechanism, c.iterations) for c in described.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_256, 8192)
    ]
    _ck_round_trip(_ck_config(secure, "SASL_SSL", certs, "SCRAM-SHA-256", "erin", "erin-secret"), n=3)
    with pytest.raises(KafkaException) as e:  # too few iterations: Kafka's UNACCEPTABLE_CREDENTIAL
        low = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 1000)
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion("erin", low, b"x")])["erin"].result(
            10
        )
    assert e.value.args[0].name() == "UNACCEPTABLE_CREDENTIAL", e.value
    deletion = UserScramCredentialDeletion("erin", ScramMechanism.SCRAM_SHA_256)
    admin.alter_user_scram_credentials([deletion])["erin"].result(10)
    reported = _ck_auth_error(_ck_config(secure, "SASL_SSL", certs, "SCRAM-SHA-256", "erin", "erin-secret"))
    assert "SASL authentication error" in reported, reported


# ------------------------------------------------------------------------ OAUTHBEARER with a JWKS


def test_confluent_kafka_signed_tokens_checked_against_a_jwks(broker_factory, certs, tmp_path):
    """``sasl.oauthbearer.jwks.endpoint.url`` (file://): tokens signed by the JWKS key, for the
    expected audience and issuer, authenticate; a token for another audience, signed by another key,
    or unsigned is refused with {"status":"invalid_token"}."""
    import jwt
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key()))
    jwk.update(kid="k1", alg="ES256")
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [jwk]}))
    b = _start(
        broker_factory,
        certs,
        **{
            "sasl.enabled.mechanisms": MECHANISMS,
            "sasl.oauthbearer.jwks.endpoint.url": jwks.as_uri(),
            "sasl.oauthbearer.expected.audience": "kafka",
            "sasl.oauthbearer.expected.issuer": "https://issuer.example",
        },
    )

    def conf(claims: dict, signer=key, headers: dict | None = None) -> dict:
        now = int(time.time())
        token = jwt.encode(
            {"iat": now, "exp": now + 300, **claims},
            signer,
            algorithm="ES256",
            headers=headers or {"kid": "k1"},
        )
        c = _ck_config(b, "SASL_SSL", certs)
        c.update(
            {
                "sasl.mechanism": "OAUTHBEARER",
                "oauth_cb": lambda _config: (token, time.time() + 300, claims.get("sub", "x")),
            }
        )
        return c

    good = {"sub": "svc", "aud": "kafka", "iss": "https://issuer.example"}
    _ck_round_trip(conf(good), n=3)
    for bad in (
        conf({**good, "aud": "other"}),
        conf(good, ec.generate_private_key(ec.SECP256R1())),
        conf({**good, "iss": "https://evil.example"}),
    ):
        reported = _ck_auth_error(bad)
        assert '{"status":"invalid_token"}' in reported, reported
