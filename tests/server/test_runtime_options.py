"""serve's run-time conveniences: --ready-file, --log-format json, --log-level debug (one line per
request), and the request log's switch in the pipeline."""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson

from broker.protocol.generated.api_versions import ApiVersionsRequest
from broker.protocol.generated.metadata import MetadataRequest
from broker.testing import running_broker
from tests.support.wire import WireClient


def _serve(tmp_path: Path, *args: str) -> tuple[subprocess.Popen, Path]:
    ready = tmp_path / "ready"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "broker",
            "serve",
            "--port",
            "0",
            "--data-dir",
            str(tmp_path / "d"),
            "--ready-file",
            str(ready),
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    while not ready.exists():  # the file appears once the broker listens (atomically: all of it)
        if proc.poll() is not None:
            raise AssertionError(f"broker exited: {proc.stderr.read()}")
        time.sleep(0.02)
    return proc, ready


def _stop(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    return proc.stderr.read()


def test_ready_file_names_the_bound_port_and_goes_at_shutdown(tmp_path):
    proc, ready = _serve(tmp_path)
    try:
        host, port = ready.read_text().splitlines()[0].rsplit(":", 1)
        assert host == "127.0.0.1" and int(port) > 0
        with WireClient(int(port)) as c:
            assert c.call(3, 12, MetadataRequest(topics=None)).brokers[0].port == int(port)
        _stop(proc)
        assert not ready.exists()
    finally:
        proc.kill()


def test_json_log_format_and_debug_request_lines(tmp_path):
    proc, ready = _serve(tmp_path, "--log-format", "json", "--log-level", "debug")
    try:
        port = int(ready.read_text().split(":")[-1])
        with WireClient(port) as c:
            c.call(3, 12, MetadataRequest(topics=None))
        err = _stop(proc)
    finally:
        proc.kill()
    lines = [orjson.loads(line) for line in err.splitlines()]  # every line is one JSON object
    assert {"ts", "level", "logger", "message"} <= lines[0].keys()
    assert any(r["level"] == "INFO" and "listening on" in r["message"] for r in lines)
    requests = [r for r in lines if r["logger"] == "broker.requests"]
    assert [r["message"].split(" from ")[0] for r in requests] == ["Metadata v12 correlation 1"]


def test_request_lines_only_at_debug(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="broker.requests")
    with running_broker(tmp_path / "a") as b, WireClient(b.port) as c:
        assert b.broker.listener._pipeline.log_requests is False
        c.call(3, 12, MetadataRequest(topics=None))
    assert not [r for r in caplog.records if r.name == "broker.requests"]
    caplog.set_level(logging.DEBUG, logger="broker.requests")
    with running_broker(tmp_path / "b") as b, WireClient(b.port) as c:
        c.call(3, 12, MetadataRequest(topics=None))
        c.call(3, 12, MetadataRequest(topics=None))
    assert [r.getMessage().split(" from ")[0] for r in caplog.records if r.name == "broker.requests"] == [
        "Metadata v12 correlation 1",
        "Metadata v12 correlation 2",
    ]


def test_persona_option_makes_serve_answer_as_redpanda(tmp_path):
    proc, ready = _serve(tmp_path, "--persona", "redpanda")
    try:
        port = int(ready.read_text().splitlines()[0].rsplit(":", 1)[1])
        with WireClient(port) as c:
            keys = {
                k.api_key: (k.min_version, k.max_version)
                for k in c.call(18, 3, ApiVersionsRequest("t", "1")).api_keys
            }
            assert keys[1] == (4, 11) and keys[18] == (0, 3) and 60 not in keys
            assert c.call(3, 8, MetadataRequest(topics=None)).cluster_id.startswith("redpanda.")
    finally:
        _stop(proc)
    refused = subprocess.run(
        [sys.executable, "-m", "broker", "serve", "--persona", "redpanda", "--kafka-version", "4.0",
         "--data-dir", str(tmp_path / "e")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert refused.returncode != 0 and "persona: redpanda cannot also act as Apache Kafka" in refused.stderr
