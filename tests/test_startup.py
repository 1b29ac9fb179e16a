"""Start-up as a new user meets it, through the real CLI (a subprocess) and the in-process broker:
one broker per data directory, one clear line for what prevents a start (and nothing left behind),
Kafka's listener settings, and real Kafka ``server.properties`` files."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from broker.cli import serve
from broker.config import Config, ConfigError, parse_properties
from broker.datadir import DataDirLocked
from broker.log import manager as log_manager
from broker.protocol.generated.describe_cluster import DescribeClusterRequest
from broker.protocol.generated.find_coordinator import FindCoordinatorRequest
from broker.protocol.generated.metadata import MetadataRequest, MetadataRequestTopic
from broker.runtime import GC_THRESHOLD
from broker.spark import logdir
from broker.testing import BrokerThread, running_broker
from tests.support.process import free_port, serve_args
from tests.support.wire import WireClient

pytestmark = pytest.mark.server  # starts brokers (in-process or `pykbroker serve`) on sockets

ROOT = Path(__file__).resolve().parent.parent
GUARD = 30.0  # hang guard for a subprocess broker to start or stop, never a timing assertion


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "broker", *args], capture_output=True, text=True, timeout=GUARD
    )


def start(*args: str, port: int) -> subprocess.Popen:
    """``serve`` with ``args``; returns once ``port`` accepts connections."""
    return serve_args(list(args), port)


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> str:
    """Signal the broker, wait for it, and return what it wrote to stderr."""
    if proc.poll() is None:
        proc.send_signal(sig)
    proc.wait(timeout=GUARD)
    return proc.stderr.read()


def assert_one_clean_error(out: subprocess.CompletedProcess, line: str) -> None:
    """Exit status 1 and exactly the error line: no traceback, no asyncio noise."""
    assert out.returncode == 1, out.stderr
    assert out.stderr.strip().splitlines()[-1] == line, out.stderr
    for noise in ("Traceback", "Task was destroyed", "Exception ignored", "coroutine"):
        assert noise not in out.stderr, out.stderr


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


# ---------------------------------------------------------------------------- the data directory lock


def test_a_second_serve_on_the_same_data_directory_is_refused_naming_it_and_the_holder(tmp_path):
    data = tmp_path / "data"
    port = free_port()
    first = start("--port", str(port), "--data-dir", str(data), port=port)
    try:
        other = free_port()
        out = cli("serve", "--port", str(other), "--data-dir", str(data))
        assert_one_clean_error(
            out,
            f"error: data directory {data} is in use by another broker "
            f"(process {first.pid} holds {data / '.lock'})",
        )
        assert not listening(other)
        with WireClient(port) as c:  # the first broker is unaffected
            assert c.call(3, 12, MetadataRequest(topics=None)).brokers[0].port == port
    finally:
        assert stop(first) is not None and first.returncode == 0


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_the_lock_goes_with_the_process_however_it_ends(tmp_path, sig):
    """SIGTERM releases it on shutdown; after SIGKILL the OS does: the next broker (also one
    started with --recover) starts at once, with no stale lock to remove by hand."""
    data = tmp_path / "data"
    port = free_port()
    stop(start("--port", str(port), "--data-dir", str(data), port=port), sig)
    port2 = free_port()
    again = start("--port", str(port2), "--data-dir", str(data), "--recover", port=port2)
    assert stop(again) is not None and again.returncode == 0


def test_in_process_brokers_take_the_same_lock(tmp_path):
    """Two BrokerThreads on one directory in one process: the second is refused (flock is per open
    file, not per process); BrokerThread.stop() releases the lock; a subprocess is refused while
    the in-process broker holds it."""
    first = BrokerThread(tmp_path).start()
    try:
        with pytest.raises(RuntimeError) as refused:
            BrokerThread(tmp_path).start()
        assert isinstance(refused.value.__cause__, DataDirLocked)
        assert refused.value.__cause__.pid == os.getpid()
        out = cli("serve", "--port", "0", "--data-dir", str(tmp_path))
        assert_one_clean_error(
            out,
            f"error: data directory {tmp_path} is in use by another broker "
            f"(process {os.getpid()} holds {tmp_path / '.lock'})",
        )
    finally:
        first.stop()
    with running_broker(tmp_path) as again:
        with WireClient(again.port) as c:
            assert c.call(3, 12, MetadataRequest(topics=None)).cluster_id is not None


def test_the_spark_reader_needs_no_lock_and_reads_beside_a_running_broker(tmp_path):
    with running_broker(tmp_path, {"log.flush": "always"}) as b:
        producer = KafkaProducer(bootstrap_servers=b.bootstrap)
        for i in range(5):
            producer.send("beside", f"v{i}".encode()).get(timeout=10)
        producer.close()
        b.call(b.broker.logs.write_checkpoint)  # what the reader treats as durably written
        assert logdir.select_topics(tmp_path, "beside") == ["beside"]
        end = logdir.end_offset(tmp_path, ("beside", 0), logdir.durable_offsets(tmp_path))
        assert end == 5
        rows = [logdir.read_columns(r) for r in logdir.plan(tmp_path, ("beside", 0), 0, end)]
        assert [v for cols in rows for v in cols["value"]] == [f"v{i}".encode() for i in range(5)]


# ---------------------------------------------------------------------------- start-up errors


@pytest.mark.parametrize("args", [["--port", "70000"], ["--port", "-1"], ["--config", "port=70000"]])
def test_a_bad_port_is_a_usage_error_and_creates_nothing(tmp_path, args):
    data = tmp_path / "data"
    out = cli("serve", "--data-dir", str(data), *args)
    assert out.returncode == 2, out.stderr
    assert "70000" in out.stderr or "-1" in out.stderr
    assert "Traceback" not in out.stderr
    assert not data.exists()


def test_a_port_in_use_names_the_address_and_creates_nothing(tmp_path):
    data = tmp_path / "data"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        out = cli("serve", "--port", str(port), "--data-dir", str(data))
    assert_one_clean_error(
        out, f"error: cannot listen on 127.0.0.1:{port}: Address already in use (listener PLAINTEXT)"
    )
    assert not data.exists(), "a broker that never listened must leave nothing behind"


def test_an_unknown_host_names_the_host_and_creates_nothing(tmp_path):
    data = tmp_path / "data"
    out = cli("serve", "--host", "no-such-host.invalid", "--port", "0", "--data-dir", str(data))
    assert out.returncode == 1, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("error: cannot listen on no-such-host.invalid:0: "), out.stderr
    assert "Traceback" not in out.stderr and "Task was destroyed" not in out.stderr
    assert not data.exists()


def test_several_log_dirs_are_refused_clearly(tmp_path):
    out = cli("serve", "--port", "0", "--config", f"log.dirs={tmp_path / 'a'},{tmp_path / 'b'}")
    assert out.returncode == 2
    assert "log.dirs: this broker keeps its data in one directory" in out.stderr
    assert not (tmp_path / "a").exists()


def test_version_option():
    for args in (["--version"], ["serve", "--help"]):
        out = cli(*args)
        assert out.returncode == 0, out.stderr
    assert cli("--version").stdout.strip() == f"pykbroker, version {version('pykbroker')}"
    pykbroker = Path(sys.executable).with_name("pykbroker")
    if pykbroker.exists():  # the installed entry point says the same
        out = subprocess.run([pykbroker, "--version"], capture_output=True, text=True, timeout=GUARD)
        assert out.stdout.strip() == f"pykbroker, version {version('pykbroker')}"


# ---------------------------------------------------------------------------- listeners


def metadata_broker(port: int) -> tuple[int, str, int]:
    with WireClient(port) as c:
        b = c.call(3, 12, MetadataRequest(topics=None)).brokers[0]
    return b.node_id, b.host, b.port


def test_listeners_and_advertised_listeners_each_client_gets_the_address_of_its_listener(tmp_path):
    outer, inner = free_port(), free_port()
    proc = start(
        "--data-dir",
        str(tmp_path),
        "--config",
        f"listeners=PLAINTEXT://127.0.0.1:{outer},internal://127.0.0.1:{inner}",
        "--config",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
        "--config",
        f"advertised.listeners=PLAINTEXT://localhost:{outer},INTERNAL://inner.example:7777",
        "--config",
        "group.initial.rebalance.delay.ms=0",
        port=outer,
    )
    try:
        assert metadata_broker(outer) == (1, "localhost", outer)
        assert metadata_broker(inner) == (1, "inner.example", 7777)
        with WireClient(inner) as c:
            fc = c.call(10, 3, FindCoordinatorRequest(key="g", key_type=0))
            assert (fc.host, fc.port) == ("inner.example", 7777)
            dc = c.call(60, 0, DescribeClusterRequest())
            assert (dc.brokers[0].host, dc.brokers[0].port) == ("inner.example", 7777)
        # a real client follows the advertised address of its listener (localhost:outer)
        producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{outer}")
        for i in range(3):
            producer.send("via-listeners", f"r{i}".encode()).get(timeout=10)
        producer.close()
        consumer = KafkaConsumer(
            "via-listeners",
            bootstrap_servers=f"127.0.0.1:{outer}",
            auto_offset_reset="earliest",
            consumer_timeout_ms=10000,
        )
        got = [m.value for m in consumer]
        consumer.close()
        assert got == [b"r0", b"r1", b"r2"]
    finally:
        err = stop(proc)
    assert "listener INTERNAL, advertised as inner.example:7777" in err


def test_an_empty_listener_host_binds_every_interface_and_advertises_the_host_name(tmp_path):
    port = free_port()
    proc = start("--data-dir", str(tmp_path), "--config", f"listeners=PLAINTEXT://:{port}", port=port)
    try:
        assert metadata_broker(port) == (1, socket.getfqdn(), port)
    finally:
        stop(proc)


def test_listeners_win_over_host_and_port_and_the_command_line_wins_over_the_file(tmp_path):
    from_listeners, from_port, from_cli = free_port(), free_port(), free_port()
    props = tmp_path / "server.properties"
    props.write_text(f"port={from_port}\nlisteners=PLAINTEXT://127.0.0.1:{from_listeners}\n")
    proc = start("--data-dir", str(tmp_path / "a"), "--config-file", str(props), port=from_listeners)
    try:
        assert not listening(from_port)
    finally:
        stop(proc)
    proc = start(
        "--data-dir", str(tmp_path / "b"), "--config-file", str(props), "--port", str(from_cli), port=from_cli
    )
    try:
        assert not listening(from_listeners)
        assert metadata_broker(from_cli)[2] == from_cli
    finally:
        err = stop(proc)
    assert "--host/--port replace the listeners of the configuration" in err


@pytest.mark.parametrize(
    "pairs, message",
    [
        (
            ["listeners=SSL://127.0.0.1:0"],
            "listener SSL uses TLS: set ssl.keystore.location",
        ),
        (
            [
                "listeners=EXTERNAL://127.0.0.1:0",
                "listener.security.protocol.map=EXTERNAL:SASL_PLAINTEXT",
                "sasl.enabled.mechanisms=GSSAPI",
            ],
            "sasl.enabled.mechanisms (listener EXTERNAL): GSSAPI",
        ),
        (["listeners=EXTERNAL://127.0.0.1:0"], "no security protocol defined for listener EXTERNAL"),
        (
            ["listeners=PLAINTEXT://0.0.0.0:0"],
            "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0",
        ),
        (
            ["listeners=PLAINTEXT://127.0.0.1:1,OTHER://127.0.0.1:1"],
            "each listener must have a different port",
        ),
        (["listeners=127.0.0.1:9092"], "listeners: expected NAME://host:port"),
        (
            ["listeners=PLAINTEXT://127.0.0.1:0", "advertised.listeners=OTHER://h:1"],
            "advertised.listeners: listener OTHER is not one of the listeners",
        ),
    ],
)
def test_listener_settings_kafka_would_refuse_are_usage_errors(tmp_path, pairs, message):
    args = [a for p in pairs for a in ("--config", p)]
    out = cli("serve", "--data-dir", str(tmp_path / "d"), *args)
    assert out.returncode == 2, out.stderr
    assert message in out.stderr.replace("\n", " "), out.stderr
    assert not (tmp_path / "d").exists()


# ---------------------------------------------------------------------------- Kafka's own property files

# The property lines of the config/server.properties shipped with Kafka 3.9 (ZooKeeper mode) and with
# Kafka 4.x (KRaft, combined broker and controller), as published, with their ports and log
# directory substituted by the test.
KAFKA_39_SERVER_PROPERTIES = """\
broker.id=0
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=@DATA@
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.retention.check.interval.ms=300000
zookeeper.connect=localhost:2181
zookeeper.connection.timeout.ms=18000
group.initial.rebalance.delay.ms=0
"""

KAFKA_4_SERVER_PROPERTIES = """\
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=localhost:@CONTROLLER@
listeners=PLAINTEXT://:@PORT@,CONTROLLER://:@CONTROLLER@
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:@PORT@,CONTROLLER://localhost:@CONTROLLER@
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=@DATA@
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
"""


def _properties_file(tmp_path: Path, text: str, port: int, controller: int) -> Path:
    path = tmp_path / "server.properties"
    header = "# Licensed to the Apache Software Foundation (ASF) ...\n#\n############ Server Basics ############\n\n"
    body = text.replace("@DATA@", str(tmp_path / "data")).replace("@PORT@", str(port))
    path.write_text(header + body.replace("@CONTROLLER@", str(controller)))
    return path


def test_kafka_4_kraft_server_properties_loads_as_kafka_would(tmp_path):
    """Listens on the PLAINTEXT listener on every interface and advertises localhost; the CONTROLLER
    listener is not opened; KRaft-only settings are accepted with no effect, listed once; no warning."""
    port, controller = free_port(), free_port()
    props = _properties_file(tmp_path, KAFKA_4_SERVER_PROPERTIES, port, controller)
    proc = start("--config-file", str(props), port=port)
    try:
        assert metadata_broker(port) == (1, "localhost", port)
        assert not listening(controller)
        assert (tmp_path / "data" / "meta.properties").exists()
    finally:
        err = stop(proc)
    assert proc.returncode == 0
    assert "WARNING" not in err, err
    accepted = [line for line in err.splitlines() if "accepted, no effect here" in line]
    assert len(accepted) == 1
    for key in (
        "process.roles",
        "controller.quorum.bootstrap.servers",
        "num.io.threads",
        "inter.broker.listener.name",
    ):
        assert key in accepted[0]
    assert "controller listener CONTROLLER" in err


def test_kafka_39_zookeeper_server_properties_loads(tmp_path):
    """broker.id is node.id; ZooKeeper settings are accepted with no effect. The file sets no
    listeners, so --port picks the port (Kafka would listen on every interface at 9092; this broker
    keeps its loopback default)."""
    port = free_port()
    props = _properties_file(tmp_path, KAFKA_39_SERVER_PROPERTIES, port, 0)
    proc = start("--config-file", str(props), "--port", str(port), port=port)
    try:
        assert metadata_broker(port) == (0, "127.0.0.1", port)
    finally:
        err = stop(proc)
    assert "WARNING" not in err, err
    assert "zookeeper.connect" in next(
        line for line in err.splitlines() if "accepted, no effect here" in line
    )


def test_java_properties_syntax(tmp_path):
    """key value, key:value, continuation lines and escapes, as java.util.Properties.load reads them."""
    port = free_port()
    props = tmp_path / "server.properties"
    props.write_text(
        "! a comment, Java style\n"
        "   # an indented comment ending in a backslash does not continue \\\n"
        "num.partitions 3\n"
        "auto.create.topics.enable:true\n"
        f"listeners = PLAINTEXT://127.0.0.1:{port},\\\n"
        f"             OTHER://127.0.0.1:{free_port()}\n"
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,\\\n    OTHER:PLAINTEXT\n"
        "broker.rack=rack\\u002d1\n"
    )
    proc = start("--data-dir", str(tmp_path / "d"), "--config-file", str(props), port=port)
    try:
        with WireClient(port) as c:
            resp = c.call(
                3, 9, MetadataRequest(topics=[MetadataRequestTopic(name="t")], allow_auto_topic_creation=True)
            )
        assert len(resp.topics[0].partitions) == 3
        assert resp.brokers[0].rack == "rack-1"
    finally:
        stop(proc)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("a=1\nb : 2\nc 3\n", {"a": "1", "b": "2", "c": "3"}),
        ("key\n", {"key": ""}),
        ("k = v with  spaces  \n", {"k": "v with  spaces  "}),
        ("h:=x\n", {"h": "=x"}),
        ("a\\ b=c\n", {"a b": "c"}),
        ("long=one\\\n  two\\\n\tthree\n", {"long": "onetwothree"}),
        ("even=x\\\\\nnext=y\n", {"even": "x\\", "next": "y"}),
        ("tab=a\\tb\\u0041\n", {"tab": "a\tbA"}),
        ("# c \\\nreal=1\n", {"real": "1"}),
        ("dup=1\ndup=2\n", {"dup": "2"}),
        ("last=x\\", {"last": "x"}),
    ],
)
def test_parse_properties_as_java_reads_them(text, expected):
    assert parse_properties(text) == expected


def test_parse_properties_rejects_a_malformed_unicode_escape():
    with pytest.raises(ConfigError):
        parse_properties("a=\\u12g4\n")


def test_unknown_property_warns_with_the_closest_name_and_kafka_ones_are_accepted_once(caplog):
    caplog.set_level(logging.INFO, logger="broker.config")
    Config({"num.partition": "3", "process.roles": "broker", "num.io.threads": "8", "zzz.qqq": "1"})
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "unknown config num.partition=3 ignored (did you mean num.partitions?)",
        "unknown config zzz.qqq=1 ignored",
    ]
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert infos == ["Kafka properties accepted, no effect here: num.io.threads, process.roles"]


def test_broker_id_is_node_id_and_they_must_agree():
    assert Config({"broker.id": "7"})["node.id"] == 7
    with pytest.raises(ConfigError, match="must match"):
        Config({"broker.id": "7", "node.id": "8"})


# ---------------------------------------------------------------------------- small first-run defects


def test_unknown_api_key_log_names_the_client_id(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="broker.server")
    with running_broker(tmp_path) as b:
        with WireClient(b.port) as c:
            header = (9999).to_bytes(2, "big", signed=True) + (0).to_bytes(2, "big") + (7).to_bytes(4, "big")
            client_id = b"my-app"
            payload = header + len(client_id).to_bytes(2, "big") + client_id
            c.send_raw(len(payload).to_bytes(4, "big") + payload)
            with pytest.raises(ConnectionError):
                c.recv_frame()
    lines = [r.getMessage() for r in caplog.records if "unknown API key 9999" in r.getMessage()]
    assert len(lines) == 1 and "client id 'my-app'" in lines[0], lines


def test_created_topic_log_line_says_partition_in_the_singular(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="broker.cluster")
    with running_broker(tmp_path) as b:
        b.call(b.broker.create_topic, "one", 1)
        b.call(b.broker.create_topic, "two", 2)
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("created topic one (1 partition, id ") for m in messages), messages
    assert any(m.startswith("created topic two (2 partitions, id ") for m in messages), messages


def test_readme_lists_every_serve_option():
    readme = (ROOT / "README.md").read_text()
    for param in serve.params:
        for opt in param.opts:
            if opt.startswith("--") and opt != "--help":
                assert re.search(f"`{re.escape(opt)}[` ]", readme), f"README does not mention {opt}"


def test_packaging_metadata_uses_an_spdx_license_and_ignores_the_default_data_dir():
    """A license table makes every pip install print a page of setuptools deprecation warnings."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"
    assert "kafka-data/" in (ROOT / ".gitignore").read_text().splitlines()


# ---------------------------------------------------------------------------- what start-up loads

#: what ``serve`` must not import before it is ready (each is loaded when first used): the control
#: plane's operations (fault injector, invariant checker, its HTTP client and server), the
#: crc32c package's __init__ with importlib.metadata (broker/log/crc.py), the handler modules, and
#: the modules only an optional feature needs (regex patterns, inline TLS keys, topic deletion, an
#: unknown setting's suggestion and Kafka's setting names, SCRAM, each compression codec, ctypes for
#: syncfs)
NOT_AT_START_UP = [
    "broker.control.operations",
    "broker.control.faults",
    "broker.control.invariants",
    "broker.control.report",
    "broker.control.trace",
    "broker.control.client",
    "broker.control.http",
    "aiohttp",
    "urllib.request",
    "importlib.metadata",
    "crc32c",
    "broker.dispatch.produce",
    "broker.dispatch.fetch",
    "broker.dispatch.metadata",
    "broker.protocol.generated.fetch",
    "broker.protocol.generated.produce",
    # the coordinators of a data directory without their logs (this one is new): built on first use
    "broker.coordinator",
    "broker.txn",
    "broker.protocol.generated.metadata",
    "encodings.idna",  # binding a str host name: the listener passes ASCII names as bytes
    "re2",  # broker/patterns.py
    "tempfile",  # broker/security/tls.py
    "shutil",  # broker/log/manager.py remove_tree
    "difflib",  # broker/config.py
    "pkgutil",  # broker/config.py (Kafka's own setting names: only for unknown settings)
    "hashlib",  # broker/security/scram_store.py
    "hmac",
    "gzip",  # broker/log/codec_libs.py
    "cramjam",
    "lz4.frame",
    "zstandard",
]
if log_manager._syncfs_call is not log_manager._libc_syncfs:  # syncfs compiled (broker/log/_native.c)
    NOT_AT_START_UP.append("ctypes")  # else broker/log/manager.py's fallback loads it on first use

_SNAPSHOT = """
import gc, json, os, signal, sys, threading, time
ready, out, data = sys.argv[1:4]
def snapshot():
    while not os.path.exists(ready):
        time.sleep(0.01)
    with open(out, "w") as f:
        json.dump(
            {
                "modules": sorted(sys.modules),
                "dataclasses": sorted(
                    f"{name}.{k}"
                    for name, m in list(sys.modules.items())
                    if name.startswith("broker")
                    for k, v in list(vars(m).items())
                    if isinstance(v, type) and "__dataclass_fields__" in v.__dict__ and v.__module__ == name
                ),
                "frozen": gc.get_freeze_count(),
                "gc": gc.isenabled(),
                "threshold": gc.get_threshold(),
            },
            f,
        )
    os.kill(os.getpid(), signal.SIGTERM)
threading.Thread(target=snapshot, daemon=True).start()
from broker.cli import main
main(["serve", "--port", "0", "--data-dir", data, "--ready-file", ready])
"""


def test_serve_loads_the_control_plane_and_handlers_only_when_used_and_freezes_start_up(tmp_path):
    """``pykbroker serve`` up to listening (the ready file) imports none of NOT_AT_START_UP (the next
    test: the first request of an API loads its handler, the control plane loads when used) and
    builds no dataclass."""
    ready, out = tmp_path / "ready", tmp_path / "modules.json"
    proc = subprocess.run(
        [sys.executable, "-c", _SNAPSHOT, str(ready), str(out), str(tmp_path / "data")],
        capture_output=True,
        text=True,
        timeout=GUARD,
    )
    assert proc.returncode == 0, proc.stderr
    snapshot = json.loads(out.read_text())
    loaded = set(snapshot["modules"])
    assert "broker.app" in loaded and "broker.dispatch.registry" in loaded  # the snapshot is of a broker
    assert [m for m in NOT_AT_START_UP if m in loaded] == []
    # nor defines a dataclass: each compiles its generated methods at import (~3.5M instructions);
    # the records start-up needs are NamedTuples, plain classes or broker.slotted classes
    assert snapshot["dataclasses"] == []
    # what start-up built is out of the collector's generations (gc.freeze) once it listens, and the
    # collector, off during start-up, runs again
    assert snapshot["frozen"] > 10_000
    assert snapshot["gc"] is True
    # and requests in flight die young instead of reaching the oldest generation (broker.runtime)
    assert tuple(snapshot["threshold"]) == GC_THRESHOLD


def test_serve_turns_the_collector_back_on_when_it_fails_to_start(tmp_path):
    """serve runs start-up without the cyclic collector; a start that fails (here: the data
    directory is a file) leaves it on again for whoever called serve in-process."""
    (tmp_path / "file").write_text("")
    code = (
        "import gc, sys\n"
        "from broker.cli import main\n"
        "try:\n"
        f"    main(['serve', '--port', '0', '--data-dir', {str(tmp_path / 'file')!r}], standalone_mode=False)\n"
        "except BaseException as e:\n"
        "    print(type(e).__name__, gc.isenabled())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=GUARD)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-1] == "True", out.stdout + out.stderr


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1"])
def test_listeners_bind_a_host_name_or_address(tmp_path, host):
    with running_broker(tmp_path, {"listeners": f"PLAINTEXT://{host}:0"}) as b:
        with WireClient(b.port) as c:
            assert c.call(3, 12, MetadataRequest(topics=None)).brokers[0].host == host


def test_a_non_ascii_host_name_goes_through_the_idna_codec_and_fails_as_a_listen_error(tmp_path):
    """ASCII names reach getaddrinfo as bytes (no IDNA codec import at start-up); an internationalized
    name still goes through the codec, and one that does not resolve is the usual one-line error."""
    out = cli("serve", "--host", "b\u00fccher.invalid", "--port", "0", "--data-dir", str(tmp_path / "d"))
    assert_one_clean_error(out, out.stderr.strip().splitlines()[-1])
    assert out.stderr.strip().splitlines()[-1].startswith("error: cannot listen on b\u00fccher.invalid:0: ")
    assert not (tmp_path / "d").exists()


def test_a_handler_and_the_control_plane_load_on_first_use(tmp_path):
    with running_broker(tmp_path) as b:
        api = b.broker.registry.get(3)
        with WireClient(b.port) as c:
            assert c.call(3, 12, MetadataRequest(topics=None)).cluster_id is not None
        assert api.module is sys.modules["broker.dispatch.metadata"]
        assert b.control.rules() == []  # created on first use, on the broker's loop
        assert b.broker.control is b.broker.control


def test_the_coordinators_load_on_first_use_in_a_new_data_directory_and_at_start_once_it_has_their_logs(
    tmp_path,
):
    """A broker whose data directory holds no coordinator log builds its group and transaction
    coordinators when a request first needs one (an offset commit here; a metadata request does
    not); once their logs exist, a restart loads them before listening, restoring what they hold."""
    tp = TopicPartition("t", 0)
    with running_broker(tmp_path) as b:
        assert (b.broker._groups, b.broker._txns) == (None, None)
        b.call(b.broker.create_topic, "t", 1)
        with WireClient(b.port) as c:
            assert [t.name for t in c.call(3, 12, MetadataRequest(topics=None)).topics] == ["t"]
        assert b.broker._groups is None
        consumer = KafkaConsumer(
            bootstrap_servers=f"127.0.0.1:{b.port}", group_id="g", enable_auto_commit=False
        )
        try:
            consumer.assign([tp])
            consumer.commit({tp: OffsetAndMetadata(5, "", -1)})
        finally:
            consumer.close()
        assert b.broker._groups is not None
        assert b.broker.services.groups is b.broker.groups  # one coordinator, however it is reached
    with running_broker(tmp_path) as b:
        assert b.broker._groups is not None and b.broker._txns is not None  # loaded at start
        consumer = KafkaConsumer(
            bootstrap_servers=f"127.0.0.1:{b.port}", group_id="g", enable_auto_commit=False
        )
        try:
            assert consumer.committed(tp) == 5
        finally:
            consumer.close()
