"""Shared fixtures and the cost markers. Helpers live in tests/support/."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from xdist.scheduler import LoadScopeScheduling

from tests.differential import tally as differential_tally
from tests.fuzz import tally as fuzz_tally
from tests.support import seeds
from tests.support.reference import ReferenceUnavailable, ensure_reference

# No timed assertions: Hypothesis's default 200 ms deadline per example fails property tests on a
# loaded or freshly booted machine, whatever the code does.
settings.register_profile("pykbroker", deadline=None)
settings.load_profile("pykbroker")


def pytest_configure(config: pytest.Config) -> None:
    seeds.bind(config)  # a failed randomized test's seed reaches the terminal even if its worker dies


# ---------------------------------------------------------------------------------- cost markers
# Every test gets one marker saying what it costs (pyproject.toml lists them): ``pytest -m unit``
# runs the socket-free tests in seconds, ``-m "unit or server"`` adds the in-process broker tests.

#: a test directory -> its marker (the others: ``server`` if the test starts a broker, else ``unit``)
DIRECTORY_MARKERS = {
    "integration": "integration",
    "differential": "integration",
    "durability": "durability",
    "spark": "spark",
    "fuzz": "fuzz",
}
#: fixtures that start a broker (ours or the real Kafka) on a socket
SERVER_FIXTURES = {"broker", "broker_factory", "bt", "static_bt", "real_kafka"}
COST_MARKERS = ("unit", "server", "integration", "durability", "spark", "sim", "fuzz")
TESTS = Path(__file__).parent


def cost_marker(item: pytest.Item) -> str:
    """The cost marker of a collected test: where it lives, then what it uses."""
    path = Path(item.path)
    if "simulation" in path.name:
        return "sim"
    top = path.relative_to(TESTS).parts[0]
    if top in DIRECTORY_MARKERS:
        return DIRECTORY_MARKERS[top]
    if top == "server" or SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
        return "server"
    return "unit"


# ------------------------------------------------------------------------- parallel runs (xdist)
# scripts/test.sh runs the suite on two pytest-xdist workers (``--dist loadscope``). Each module is
# one unit of work, so a module's fixtures start once. The stages that start a JVM for the whole
# session (the real Kafka broker: tests/differential and Spark's connector test; Spark: tests/spark)
# form one unit, so each starts once per run, on one worker, as in a serial run; that unit is the
# longest, so the workers collect it first and it starts first. The other units follow heaviest first
# by their costliest marker (UNIT_ORDER: durability, integration, fuzz, sim, server, unit), so that
# the last units handed out are the short socket-free modules and neither worker idles long at the end
# while the other finishes a long module (xdist hands out units in collection order).

#: test directories whose modules share one worker
SHARED_SESSION_GROUPS = {"differential": "real-kafka-and-spark", "spark": "real-kafka-and-spark"}
#: the cost markers, the longest-running units first (a unit ranks by its costliest test)
UNIT_ORDER = ("spark", "durability", "integration", "fuzz", "sim", "server", "unit")


def work_unit(nodeid: str) -> str:
    """The unit of work a test belongs to (by its node id): its shared-stage group, else its module."""
    path = nodeid.split("::", 1)[0]
    parts = path.split("/")
    if len(parts) > 2 and parts[0] == TESTS.name and parts[1] in SHARED_SESSION_GROUPS:
        return SHARED_SESSION_GROUPS[parts[1]]
    return path


class ModuleAndStageScheduling(LoadScopeScheduling):
    """xdist's scheduling by module, with the shared-stage groups as single units."""

    def _split_scope(self, nodeid: str) -> str:
        return work_unit(nodeid)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> LoadScopeScheduling | None:
    return ModuleAndStageScheduling(config, log) if config.getoption("dist") == "loadscope" else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:  # a module or test may say its cost itself (pytestmark = pytest.mark.server)
        if not any(item.get_closest_marker(m) for m in COST_MARKERS):
            item.add_marker(cost_marker(item))
    if hasattr(config, "workerinput"):  # an xdist worker: the shared-stage groups, then the costliest
        shared = set(SHARED_SESSION_GROUPS.values())
        rank: dict[str, int] = {}
        for item in items:
            unit = work_unit(item.nodeid)
            cost = (
                -1
                if unit in shared
                else min(UNIT_ORDER.index(m) for m in COST_MARKERS if item.get_closest_marker(m))
            )
            rank[unit] = min(rank.get(unit, cost), cost)
        items.sort(key=lambda item: rank[work_unit(item.nodeid)])  # stable: a unit's tests keep their order


#: the per-session tallies printed at the end (counters keyed by tuples of strings)
TALLIES = {
    "differential": (differential_tally, "differential: pykbroker vs Apache Kafka, steps per API"),
    "fuzz": (fuzz_tally, "fuzz cases per API"),
}


def pytest_sessionfinish(session: pytest.Session) -> None:
    """On an xdist worker: hand the tallies to the controller (``pytest_testnodedown``)."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["tallies"] = {name: module.export() for name, (module, _title) in TALLIES.items()}


def pytest_testnodedown(node: Any, error: Any) -> None:
    """On the xdist controller: add a finished worker's tallies to this process's."""
    for name, data in getattr(node, "workeroutput", {}).get("tallies", {}).items():
        TALLIES[name][0].merge(data)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for module, title in TALLIES.values():
        lines = module.summary()
        if lines:
            terminalreporter.section(title)
            for line in lines:
                terminalreporter.write_line(line)


@pytest.fixture(autouse=True)
def _unit_tests_open_no_sockets(request, monkeypatch):
    """A test marked ``unit`` that opens a network socket fails: mark it ``server`` instead."""
    if request.node.get_closest_marker("unit") is None:
        return

    def refusing(name: str):
        original = getattr(socket.socket, name)

        def call(self, *args, **kwargs):
            if self.family in (socket.AF_INET, socket.AF_INET6):
                raise RuntimeError(f"{request.node.nodeid} is marked unit but opens a network socket")
            return original(self, *args, **kwargs)

        return call

    for name in ("bind", "connect", "connect_ex"):
        monkeypatch.setattr(socket.socket, name, refusing(name))


# -------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    """``.reference`` with the released Kafka schemas, fetched by scripts/reference.sh if missing.

    Fails (never skips) when the reference cannot be obtained.
    """
    try:
        return ensure_reference()
    except ReferenceUnavailable as e:
        pytest.fail(f"the released Kafka reference schemas are required: {e}", pytrace=False)


@pytest.fixture
def broker(tmp_path: Path):
    """A broker on 127.0.0.1:<free port> with a fresh data directory, running on its own thread."""
    from broker.testing import running_broker

    with running_broker(tmp_path / "data") as b:
        yield b


@pytest.fixture
def broker_factory(tmp_path: Path):
    """Start brokers with config overrides: ``broker_factory({"num.partitions": 3})``. With
    ``invariants=True`` (or PYKBROKER_INVARIANTS set) the invariant checker runs and a violation
    fails the test when the broker stops (broker/control/invariants.py)."""
    from broker.testing import BrokerThread

    started: list[BrokerThread] = []

    def start(
        config: dict | None = None, data_dir: Path | None = None, invariants: bool | None = None
    ) -> BrokerThread:
        bt = BrokerThread(data_dir or tmp_path / f"data{len(started)}", config, invariants=invariants).start()
        started.append(bt)
        return bt

    yield start
    violations = []
    for bt in started:
        try:
            bt.stop()
        except AssertionError as e:  # InvariantViolation: stop the others first
            violations.append(e)
    if violations:
        raise violations[0]


@pytest.fixture(scope="session")
def real_kafka(tmp_path_factory: pytest.TempPathFactory):
    """One released Apache Kafka broker (tests/support/real_kafka.py) for the whole session.

    Skips only when scripts/kafka.sh has not filled .reference/kafka-broker (scripts/test.sh always
    does); a broker that is present but does not start is an error.
    """
    from tests.support.real_kafka import CACHE_DIR, RealKafka

    if not RealKafka.available():
        pytest.skip(f"no Apache Kafka broker in {CACHE_DIR}: run scripts/kafka.sh (scripts/test.sh does)")
    kafka = RealKafka()
    kafka.start(tmp_path_factory.mktemp("real-kafka"))
    try:
        yield kafka
    finally:
        kafka.stop()


@pytest.fixture(params=["3.9", "4"], ids=lambda v: f"java{v}")
def java_clients(request) -> str:
    """Run the test once with kafka-clients 3.9 and once with the newest 4.x: ``require_java()`` in the
    test body gives the compiled probes for this version. Apply with ``usefixtures("java_clients")``."""
    from tests.support.java import use_version

    previous = use_version(request.param)
    yield request.param
    use_version(previous)
