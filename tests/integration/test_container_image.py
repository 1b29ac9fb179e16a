"""The container image, really built and run: ``docker build`` of the Dockerfile, the container on
the host network configured by KAFKA_* variables, its HEALTHCHECK, and a confluent-kafka producer and
consumer against it, across a container restart (the /data volume).

Needs a running Docker daemon: skipped, saying so, without one (the suite never installs Docker).
The base image is ``PYKBROKER_DOCKER_BASE_IMAGE`` when set, else ``pykbroker-base:bookworm`` when the
daemon has it (scripts/docker-base.sh builds it without Docker Hub), else the Dockerfile's default
(``python:3.11-slim``, pulled). The build uses the host network, so pip inside it reaches PyPI as the
host does; a build that fails fails the test.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from tests.support.process import free_port

ROOT = Path(__file__).resolve().parent.parent.parent
TAG = "pykbroker:test"
LOCAL_BASE = "pykbroker-base:bookworm"
GUARD = 120.0  # seconds: hang guard only


def _docker(*args: str, timeout: float = GUARD, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=check)


def _daemon_problem() -> str | None:
    """Why no Docker daemon can be used here, or None."""
    if shutil.which("docker") is None:
        return "no docker CLI on PATH"
    try:
        info = _docker("info", "--format", "{{.ServerVersion}}", timeout=20, check=False)
    except subprocess.TimeoutExpired:
        return "docker info did not answer in 20 s"
    if info.returncode != 0 or not info.stdout.strip():
        said = (info.stderr or info.stdout).strip().splitlines()
        return f"no Docker daemon: {said[-1] if said else 'docker info failed'}"
    return None


_PROBLEM = _daemon_problem()
pytestmark = pytest.mark.skipif(_PROBLEM is not None, reason=f"needs a running Docker daemon ({_PROBLEM})")


def _base_image() -> str | None:
    if os.environ.get("PYKBROKER_DOCKER_BASE_IMAGE"):
        return os.environ["PYKBROKER_DOCKER_BASE_IMAGE"]
    if _docker("image", "inspect", LOCAL_BASE, check=False).returncode == 0:
        return LOCAL_BASE
    return None  # the Dockerfile's own FROM


@pytest.fixture(scope="module")
def image() -> str:
    args = ["build", "--network", "host", "-t", TAG]
    base = _base_image()
    if base is not None:
        args += ["--build-arg", f"BASE_IMAGE={base}"]
    build = _docker(*args, str(ROOT), timeout=1800, check=False)
    assert build.returncode == 0, f"docker build failed:\n{build.stdout[-3000:]}\n{build.stderr[-3000:]}"
    return TAG


@pytest.fixture
def container(image):
    port = free_port()
    name = f"pykbroker-test-{os.getpid()}-{port}"
    env = {
        "KAFKA_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}",
        "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}",
        "KAFKA_NUM_PARTITIONS": "3",
        "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
        "KAFKA_HEAP_OPTS": "-Xmx1G",  # the JVM's: ignored, as the image documents
        "PYKBROKER_LOG_FORMAT": "json",
    }
    flags = [a for k, v in env.items() for a in ("-e", f"{k}={v}")]
    _docker("run", "-d", "--name", name, "--network", "host", *flags, image)
    try:
        yield name, f"127.0.0.1:{port}"
    finally:
        _docker("rm", "-f", "-v", name, check=False)


def _health(name: str) -> str:
    out = _docker("inspect", "--format", "{{json .State.Health}}", name).stdout
    return json.loads(out)["Status"]


def _wait_healthy(name: str) -> None:
    deadline = time.monotonic() + GUARD
    while (status := _health(name)) != "healthy":
        assert status in ("starting", "healthy"), (
            f"container {status}: {_docker('logs', name).stderr[-2000:]}"
        )
        assert time.monotonic() < deadline, f"hang guard: still {status}"
        time.sleep(1)


def _consume(bootstrap: str, topic: str, group: str, count: int) -> list[tuple[int, bytes]]:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + GUARD
    try:
        while len(got) < count:
            assert time.monotonic() < deadline, f"hang guard: {len(got)} of {count} records"
            m = c.poll(0.5)
            if m is not None:
                assert m.error() is None, m.error()
                got.append((m.partition(), m.value()))
    finally:
        c.close()
    return got


def test_the_image_is_healthy_configured_from_the_environment_and_serves_clients(container):
    name, bootstrap = container
    _wait_healthy(name)  # the HEALTHCHECK (ApiVersions on the KAFKA_LISTENERS port) passes

    p = ck.Producer({"bootstrap.servers": bootstrap})
    for i in range(30):
        p.produce("orders", key=str(i).encode(), value=f"v{i}".encode())
    assert p.flush(GUARD) == 0
    # KAFKA_NUM_PARTITIONS=3: the auto-created topic has 3 partitions, the broker reports the setting
    admin = AdminClient({"bootstrap.servers": bootstrap})
    assert len(admin.list_topics(timeout=30).topics["orders"].partitions) == 3
    broker = ConfigResource(ConfigResource.Type.BROKER, "1")
    entries = admin.describe_configs([broker])[broker].result(timeout=30)
    assert entries["num.partitions"].value == "3"
    assert entries["group.initial.rebalance.delay.ms"].value == "0"

    got = _consume(bootstrap, "orders", "g1", 30)
    assert sorted(v for _, v in got) == sorted(f"v{i}".encode() for i in range(30))
    assert {part for part, _ in got} == {0, 1, 2}

    # PYKBROKER_LOG_FORMAT=json: every log line is a JSON object
    logs = _docker("logs", name).stderr.splitlines()
    assert logs and all(json.loads(line)["message"] for line in logs), logs[:5]
    assert any("listening on 127.0.0.1:" in json.loads(line)["message"] for line in logs)

    # the records are in the /data volume: a restarted container serves them again
    _docker("restart", name)
    _wait_healthy(name)
    again = _consume(bootstrap, "orders", "g2", 30)
    assert sorted(v for _, v in again) == sorted(v for _, v in got)
