"""The container's entry point (broker/container.py): KAFKA_* variables as the apache/kafka image
reads them, the ApiVersions health check, and the Dockerfile/.dockerignore promises. (Building the
image needs a Docker daemon; these run without one.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from broker.container import health_port, main, properties_from_env, property_name, serve_args
from broker.protocol.generated.metadata import MetadataRequest, MetadataRequestTopic
from tests.support.wire import WireClient

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("variable", "name"),
    [
        ("KAFKA_ADVERTISED_LISTENERS", "advertised.listeners"),
        ("KAFKA_LOG_DIRS", "log.dirs"),
        ("KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS", "group.initial.rebalance.delay.ms"),
        ("KAFKA_LISTENER_NAME_INTERNAL_SSL__KEY_PASSWORD", "listener.name.internal.ssl_key.password"),
        ("KAFKA_SOME___DASHED", "some-dashed"),
    ],
)
def test_variable_names_map_to_properties_as_in_the_apache_kafka_image(variable, name):
    assert property_name(variable) == name


def test_jvm_variables_and_others_are_not_properties():
    env = {"KAFKA_HEAP_OPTS": "-Xmx1G", "KAFKA_OPTS": "-D", "PATH": "/bin", "KAFKA_NUM_PARTITIONS": "3"}
    assert properties_from_env(env) == {"num.partitions": "3"}
    args = serve_args({**env, "PYKBROKER_LOG_LEVEL": "debug"}, ["--recover"])
    assert args == ["serve", "--config", "num.partitions=3", "--log-level", "debug", "--recover"]


def test_health_port_is_the_first_non_controller_listener():
    assert health_port({}) == 9092
    env = {
        "KAFKA_LISTENERS": "CONTROLLER://:9093,PLAINTEXT://:19092",
        "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
    }
    assert health_port(env) == 19092


@pytest.mark.server  # runs the entry point: a broker on a socket
def test_entry_point_serves_with_env_config_and_passes_the_health_check(tmp_path):
    ready = tmp_path / "ready"
    env = {
        **os.environ,
        "KAFKA_LISTENERS": "PLAINTEXT://127.0.0.1:0",
        "KAFKA_LOG_DIRS": str(tmp_path / "data"),
        "KAFKA_NUM_PARTITIONS": "3",
        "KAFKA_PROCESS_ROLES": "broker,controller",  # apache/kafka compose files set these: accepted
        "KAFKA_HEAP_OPTS": "-Xmx512M",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "broker.container", "--ready-file", str(ready)],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        while not ready.exists():
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.02)
        port = int(ready.read_text().split(":")[-1])
        assert main(["health", str(port)]) == 0
        with WireClient(port) as c:
            md = c.call(
                3,
                12,
                MetadataRequest(topics=[MetadataRequestTopic(name="auto")], allow_auto_topic_creation=True),
            )
        assert len(md.topics[0].partitions) == 3
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
    assert main(["health", str(port)]) == 1  # stopped: unhealthy, one line on stderr


def test_dockerfile_layers_and_context():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert dockerfile.index("pip install -r") < dockerfile.index("COPY broker")  # deps before the source
    assert "HEALTHCHECK" in dockerfile and '"broker.container", "health"' in dockerfile
    assert 'ENTRYPOINT ["python", "-m", "broker.container"]' in dockerfile
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    assert ignore[ignore.index("*") :][:1] == ["*"]  # everything is left out but what is re-included
    assert not any(line.startswith("!") and (".venv" in line or "tests" in line) for line in ignore)
