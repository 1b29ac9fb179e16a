"""``serve --tls self-signed``: the CA and server certificate are made once in the data directory,
the SSL listener is added beside PLAINTEXT, the client settings are printed, and confluent-kafka and
kafka-python connect with them."""

from __future__ import annotations

import re
import signal

import confluent_kafka
import pytest
from kafka import KafkaProducer

from broker.security.selfsigned import ensure_self_signed
from tests.support.process import free_port_pair, serve_args

pytestmark = pytest.mark.server


def test_certificates_are_kept_and_reissued_only_for_new_names(tmp_path):
    ca, server = ensure_self_signed(tmp_path)
    first = server.read_bytes()
    assert (tmp_path / "tls" / "ca-key.pem").stat().st_mode & 0o077 == 0
    assert ensure_self_signed(tmp_path) == (ca, server) and server.read_bytes() == first
    ensure_self_signed(tmp_path, ["broker.example"])
    assert server.read_bytes() != first and ca.read_bytes() in server.read_bytes()


def test_serve_tls_self_signed(tmp_path):
    port = free_port_pair()  # the SSL listener takes port + 1
    proc = serve_args(
        ["--port", str(port), "--data-dir", str(tmp_path / "d"), "--tls", "self-signed"], port + 1
    )
    try:
        conf = {
            "bootstrap.servers": f"127.0.0.1:{port + 1}",
            "security.protocol": "SSL",
            "ssl.ca.location": str(tmp_path / "d" / "tls" / "ca.pem"),
        }
        p = confluent_kafka.Producer(conf)
        p.produce("tls", b"over-tls")
        assert p.flush(20) == 0
        kp = KafkaProducer(
            bootstrap_servers=conf["bootstrap.servers"],
            security_protocol="SSL",
            ssl_cafile=conf["ssl.ca.location"],
        )
        kp.send("tls", b"kp").get(timeout=20)
        kp.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    err = proc.stderr.read()
    assert re.search(rf"bootstrap.servers=\S+:{port + 1}", err), err
    assert f"ssl.ca.location={tmp_path / 'd' / 'tls' / 'ca.pem'}" in err
    assert "ssl.truststore.type=PEM" in err
