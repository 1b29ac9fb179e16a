"""``pykbroker serve --control-port``: the control API of a broker process, used with the CLI."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time

import pytest
from kafka import KafkaProducer
from kafka.errors import KafkaTimeoutError, NotLeaderForPartitionError

from broker.control import ControlClient
from tests.support.process import free_port, serve_args

GUARD = 30.0  # hang guard, never a timing assertion

pytestmark = pytest.mark.server  # `pykbroker serve` in a subprocess, on sockets


def _wait_listening(port: int) -> None:
    deadline = time.monotonic() + GUARD
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline, f"nothing listens on {port}"
            time.sleep(0.05)


def ctl(url: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "broker", "ctl", "--url", url, "--token", "t0k", *args],
        capture_output=True,
        text=True,
        timeout=GUARD,
    )


def test_serve_with_a_control_port_and_the_ctl_command(tmp_path):
    port, cport = free_port(), free_port()
    proc = serve_args(
        [
            "--port",
            str(port),
            "--data-dir",
            str(tmp_path / "d"),
            "--control-port",
            str(cport),
            "--control-token",
            "t0k",
        ],
        port,
    )
    try:
        _wait_listening(cport)
        url = f"http://127.0.0.1:{cport}"
        out = ctl(url, "fault", "add", "--api", "Produce", "--error", "NOT_LEADER_OR_FOLLOWER")
        assert out.returncode == 0, out.stderr
        rule = json.loads(out.stdout)
        producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}", retries=0, max_block_ms=10000)
        try:
            fut = producer.send("auto", b"x")
            producer.flush(10)
            try:
                fut.get(10)
                raise AssertionError("the produce should have failed")
            except (NotLeaderForPartitionError, KafkaTimeoutError) as e:
                assert isinstance(e, NotLeaderForPartitionError), e
        finally:
            producer.close(5)
        listed = json.loads(ctl(url, "fault", "list").stdout)
        assert listed[0]["id"] == rule["id"] and listed[0]["fired"] >= 1
        topics = json.loads(ctl(url, "topics").stdout)
        assert [t["name"] for t in topics] == ["auto"]  # auto-created by Metadata, never written
        assert topics[0]["partitions"][0]["high_watermark"] == 0
        assert ControlClient(url, token="t0k").clear_rules() == 1
        bad = ctl(url, "fault", "add", "--api", "Produce", "--error", "NOT_LEADER")
        assert bad.returncode == 1 and "unknown error 'NOT_LEADER'" in bad.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(GUARD)
    assert "fault rule 1 fired (1) on Produce" in proc.stderr.read()


def test_a_control_port_in_use_is_one_clean_error(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        taken = s.getsockname()[1]
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "broker",
                "serve",
                "--port",
                "0",
                "--data-dir",
                str(tmp_path / "d"),
                "--control-port",
                str(taken),
            ],
            capture_output=True,
            text=True,
            timeout=GUARD,
        )
    assert out.returncode == 1, out.stderr
    assert "error:" in out.stderr.strip().splitlines()[-1] and str(taken) in out.stderr
    assert "Traceback" not in out.stderr
