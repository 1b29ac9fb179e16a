"""The command line: serve starts a broker that answers, honours config, and stops cleanly on signals."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time

import pytest

from broker.protocol.generated.metadata import MetadataRequest, MetadataRequestTopic
from tests.support.wire import WireClient

pytestmark = pytest.mark.server  # starts brokers (in-process or `pykbroker serve`) on sockets


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_listening(port: int, proc: subprocess.Popen, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"broker exited early: {proc.stderr.read()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    raise AssertionError("broker did not start listening")


def _serve(tmp_path, *args: str) -> tuple[subprocess.Popen, int]:
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "broker",
            "serve",
            "--port",
            str(port),
            "--data-dir",
            str(tmp_path / "d"),
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _wait_listening(port, proc)
    return proc, port


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serve_answers_and_stops_cleanly_on_signal(tmp_path, sig):
    proc, port = _serve(tmp_path)
    try:
        with WireClient(port) as c:
            resp = c.call(3, 12, MetadataRequest(topics=None))
            assert resp.brokers[0].port == port
        proc.send_signal(sig)
        assert proc.wait(timeout=10) == 0
        assert "broker stopped" in proc.stderr.read()
    finally:
        proc.kill()


def test_config_pairs_and_properties_file_use_kafka_names(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("# a Kafka properties file\nnum.partitions=3\nsome.unknown.key = kept\n")
    proc, port = _serve(
        tmp_path,
        "--config-file",
        str(props),
        "--config",
        "auto.create.topics.enable=true",
        "--advertised-host",
        "broker.example",
    )
    try:
        with WireClient(port) as c:
            resp = c.call(
                3, 9, MetadataRequest(topics=[MetadataRequestTopic(name="t")], allow_auto_topic_creation=True)
            )
        assert len(resp.topics[0].partitions) == 3
        assert resp.brokers[0].host == "broker.example"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert "unknown config some.unknown.key=kept ignored" in proc.stderr.read()


def test_bad_config_value_is_a_usage_error(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "broker",
            "serve",
            "--data-dir",
            str(tmp_path),
            "--config",
            "num.partitions=zero",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 2
    assert "num.partitions" in out.stderr


def test_port_in_use_fails_with_a_message(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        out = subprocess.run(
            [sys.executable, "-m", "broker", "serve", "--port", str(port), "--data-dir", str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert out.returncode == 1
    assert "error:" in out.stderr
