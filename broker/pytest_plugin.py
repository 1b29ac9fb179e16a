"""pytest fixtures for projects that test against Kafka (registered as the ``pytest11`` entry point
``pykbroker``, so ``pip install pykbroker`` is enough; or ``-p broker.pytest_plugin``).

Fixtures:

* ``kafka_broker`` (session): one in-process broker on 127.0.0.1:<free port>, data in the session's
  temporary directory. Its settings: the measured test-friendly :data:`TEST_DEFAULTS` plus the
  ``kafka_broker_config`` ini option (``key=value`` lines).
* ``kafka`` (per test): a :class:`KafkaTestNamespace` on the session broker. **Isolation**: every test
  gets its own name prefix (``t<n>-<test name>-``); :meth:`~KafkaTestNamespace.topic` and
  :meth:`~KafkaTestNamespace.group` give names under it, and at the end of the test the topics and
  groups under the prefix are deleted. Tests therefore share the broker (it starts once) but never
  each other's topics, offsets or groups, as long as they name things through ``kafka``.
  With the ``@pytest.mark.kafka_config({...})`` marker the test gets a private broker with those
  settings instead (started for this test, stopped after it).
* ``kafka_broker_factory`` (per test): ``kafka_broker_factory({"num.partitions": 3})`` starts
  another broker (each with its own data directory), all stopped at the end of the test.

Under pytest-xdist every worker has its own brokers (port 0, the worker's own temporary directory).

When a test that used ``kafka`` fails, its report gets what the broker saw during the test: the
requests and responses of the trace journal (every plugin broker records one in its data directory,
``trace.jsonl``, capped at 16 MB) as each group's conversation, and any invariant violation (the
checker runs on every plugin broker). The ini option ``kafka_broker_trace = false`` turns both off.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pytest

if TYPE_CHECKING:  # the broker is imported when a fixture first starts one, not when pytest loads us
    from broker.testing import BrokerThread

#: what every broker of the plugin starts with unless the ini option or a marker says otherwise,
#: chosen by bench/group_stabilise_bench.py (README: "Test-friendly defaults"): a 50 ms initial
#: rebalance delay gathers members that subscribe together into one classic generation (0 makes
#: every late joiner wait for the next heartbeat, ~3 s; Kafka's 3000 costs 3-6 s), and a 500 ms
#: KIP-848 heartbeat interval hands out new assignments within ~0.5 s instead of 5 s.
TEST_DEFAULTS: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "50",
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "500",
}

MARKER = "kafka_config"
#: the trace journal's size cap on plugin brokers (one backup file is kept beside it)
TRACE_MAX_BYTES = 16 * 1024 * 1024
#: how many of a failed test's requests its report shows (the last ones)
REPORT_REQUESTS = 200
_counter = itertools.count(1)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "kafka_broker_config",
        type="linelist",
        default=[],
        help="key=value broker settings (Kafka property names) for the pykbroker kafka_broker fixture",
    )

    parser.addini(
        "kafka_broker_trace",
        type="bool",
        default=True,
        help="record a trace journal and check invariants on pykbroker brokers, shown when a test fails",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(settings): run this test's `kafka` fixture on a private pykbroker broker with these "
        "settings (a dict of Kafka property names)",
    )


def _ini_settings(config: pytest.Config) -> dict[str, str]:
    out = dict(TEST_DEFAULTS)
    for line in config.getini("kafka_broker_config"):
        key, sep, value = line.partition("=")
        if not sep:
            raise pytest.UsageError(f"kafka_broker_config: expected key=value, got {line!r}")
        out[key.strip()] = value.strip()
    if config.getini("kafka_broker_trace"):
        out.setdefault("trace.max.bytes", str(TRACE_MAX_BYTES))
        out["_trace"] = "on"  # the factory names the journal in each broker's data directory
    return out


class BrokerFactory:
    """Starts brokers with their own data directories; :meth:`stop_all` stops them."""

    def __init__(self, base: Path, defaults: Mapping[str, Any]):
        self.base = base
        self.defaults = dict(defaults)
        self.started: list[BrokerThread] = []

    def __call__(self, config: Mapping[str, Any] | None = None) -> BrokerThread:
        from broker.testing import BrokerThread

        values = {**self.defaults, **(config or {})}
        data_dir = self.base / f"broker{len(self.started)}"
        traced = values.pop("_trace", None) is not None
        if traced:
            values.setdefault("trace.file", str(data_dir / "trace.jsonl"))
        bt = BrokerThread(data_dir, values).start()
        if traced:
            bt.control.check_invariants(True)
        self.started.append(bt)
        return bt

    def stop_all(self) -> None:
        while self.started:
            self.started.pop().stop()


class KafkaTestNamespace:
    """One test's view of a broker: ``bootstrap``, prefixed names, and helpers that use kafka-python."""

    def __init__(self, broker: BrokerThread, prefix: str):
        self.broker = broker
        self.prefix = prefix
        self._admin: Any = None
        self._producer: Any = None

    @property
    def bootstrap(self) -> str:
        """``host:port`` for clients' ``bootstrap.servers``."""
        return self.broker.bootstrap

    def topic(self, name: str = "topic") -> str:
        """This test's name for topic ``name``."""
        return self.prefix + name

    def group(self, name: str = "group") -> str:
        """This test's name for group ``name``."""
        return self.prefix + name

    @property
    def admin(self) -> Any:
        """A kafka-python ``KafkaAdminClient`` on the broker (created on first use, closed after the test)."""
        if self._admin is None:
            from kafka import KafkaAdminClient

            self._admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="pytest-kafka")
        return self._admin

    def create_topic(
        self, name: str = "topic", partitions: int = 1, config: Mapping[str, str] | None = None
    ) -> str:
        """Create this test's topic ``name`` (returns its full name), ready for produce and fetch."""
        full = self.topic(name)
        self.admin.create_topics(
            {full: {"num_partitions": partitions, "replication_factor": 1, "configs": dict(config or {})}},
            wait_for_metadata=True,
        )
        return full

    def produce(
        self,
        topic: str,
        values: Iterable[bytes | str | tuple[bytes | str | None, bytes | str | None]],
        partition: int | None = None,
    ) -> list[Any]:
        """Produce ``values`` (each a value, or a ``(key, value)`` pair) to the full topic name ``topic``
        and wait for the acknowledgements; returns their RecordMetadata."""
        if self._producer is None:
            from kafka import KafkaProducer

            self._producer = KafkaProducer(
                bootstrap_servers=self.bootstrap, acks="all", client_id="pytest-kafka"
            )

        def b(x: bytes | str | None) -> bytes | None:
            return x.encode() if isinstance(x, str) else x

        futures = []
        for item in values:
            key, value = item if isinstance(item, tuple) else (None, item)
            futures.append(self._producer.send(topic, value=b(value), key=b(key), partition=partition))
        self._producer.flush()
        return [f.get(timeout=30) for f in futures]

    def wait_for_stable_group(self, group: str, members: int | None = None, timeout: float = 30.0) -> dict:
        """Wait until the group (its full name) is Stable (with ``members`` members, when given);
        returns its description (DescribeGroups for a classic group, ConsumerGroupDescribe for a
        KIP-848 one: its ``members`` are then the protocol's Member objects). Raises TimeoutError naming the last state seen."""
        from broker.cli_admin.wire import WireError, describe_consumer_group

        deadline = time.monotonic() + timeout
        desc: dict = {}
        while True:
            try:
                desc = self.admin.describe_groups([group])[group]
            except Exception as e:  # the group is not known yet
                desc = {"group_state": f"unknown ({type(e).__name__})", "members": []}
            state = desc.get("group_state") or desc.get("state")
            if desc.get("error") or state == "Dead":  # a KIP-848 group: ConsumerGroupDescribe
                try:
                    g = describe_consumer_group(self.bootstrap, group)
                    desc = {"group_state": g.group_state, "group_epoch": g.group_epoch, "members": g.members}
                    state = g.group_state
                except WireError:
                    pass
            if state == "Stable" and (members is None or len(desc.get("members", [])) == members):
                return desc
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"group {group!r} is {state} with {len(desc.get('members', []))} member(s) after {timeout} s"
                )
            time.sleep(0.05)

    def cleanup(self) -> None:
        """Delete this test's topics and groups; close the helpers' clients."""
        try:
            if self._producer is not None:
                self._producer.close(timeout=5)
            admin = self.admin
            groups = [g["group_id"] for g in admin.list_groups() if g["group_id"].startswith(self.prefix)]
            if groups:
                admin.delete_groups(groups)  # a group with live members stays (its consumers were not closed)
            topics = [t for t in admin.list_topics() if t.startswith(self.prefix)]
            if topics:
                admin.delete_topics(topics)
        finally:
            if self._admin is not None:
                self._admin.close()


def _prefix(nodeid: str) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", nodeid.rsplit("::", 1)[-1])[:40]
    return f"t{next(_counter)}-{name}-"


@pytest.fixture(scope="session")
def kafka_broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerThread]:
    """One pykbroker broker for the session (see the module docstring for its settings)."""
    factory = BrokerFactory(tmp_path_factory.mktemp("pykbroker-session"), _ini_settings(request.config))
    try:
        yield factory()
    finally:
        factory.stop_all()


@pytest.fixture
def kafka_broker_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BrokerFactory]:
    """Start more brokers: ``kafka_broker_factory({"num.partitions": 3})``; stopped after the test."""
    factory = BrokerFactory(tmp_path / "pykbroker", _ini_settings(request.config))
    try:
        yield factory
    finally:
        factory.stop_all()


@pytest.fixture
def kafka(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KafkaTestNamespace]:
    """This test's isolated namespace on the session broker, or on a private one with the
    ``kafka_config`` marker (see the module docstring)."""
    marker = request.node.get_closest_marker(MARKER)
    private: BrokerFactory | None = None
    if marker is not None:
        settings = dict(marker.args[0]) if marker.args else {}
        settings.update(marker.kwargs)
        private = BrokerFactory(tmp_path / "pykbroker", _ini_settings(request.config))
        broker = private(settings)
    else:
        broker = request.getfixturevalue("kafka_broker")
    ns = KafkaTestNamespace(broker, _prefix(request.node.nodeid))
    request.node.stash[_SEEN] = _Seen(broker)
    try:
        yield ns
    finally:
        try:
            if private is None:
                ns.cleanup()
            elif ns._admin is not None or ns._producer is not None:
                if ns._producer is not None:
                    ns._producer.close(timeout=5)
                if ns._admin is not None:
                    ns._admin.close()
        finally:
            if private is not None:
                private.stop_all()


class _Seen:
    """What a broker saw from a point on: the trace journal's lines written since, and the invariant
    violations recorded since."""

    def __init__(self, broker: BrokerThread):
        self.broker = broker
        self.journal = (
            Path(broker.broker.config["trace.file"]) if broker.broker.config["trace.file"] else None
        )
        self.offset = self.journal.stat().st_size if self.journal and self.journal.exists() else 0
        self.violations = len(broker.control.violations()) if self.journal else 0

    def sections(self) -> list[tuple[str, str]]:
        from broker.control.trace import render  # noqa: PLC0415 (the plugin loads no broker code until used)

        if self.journal is None:
            return []
        out = []
        lines = []
        if self.journal.exists():
            with open(self.journal, "rb") as f:
                f.seek(self.offset)
                lines = [orjson.loads(line) for line in f.read().splitlines() if line.strip()]
        if lines:
            shown = lines[-REPORT_REQUESTS:]
            head = f"{len(lines)} request(s) during the test" + (
                f", the last {len(shown)} shown" if len(shown) < len(lines) else ""
            )
            out.append(
                ("pykbroker: what the broker saw", f"{head} (journal {self.journal})\n{render(shown)}")
            )
        violations = self.broker.control.violations()[self.violations :]
        if violations:
            text = "\n".join(orjson.dumps(v).decode() for v in violations)
            out.append(("pykbroker: invariant violations", text))
        return out


_SEEN = pytest.StashKey[_Seen]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    seen = item.stash.get(_SEEN, None)
    if seen is None or report.when != "call" or not report.failed:
        return
    try:
        report.sections.extend(seen.sections())
    except Exception as e:  # never hide the test's own failure behind ours
        report.sections.append(("pykbroker: what the broker saw", f"(could not be read: {e})"))
