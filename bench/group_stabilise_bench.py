"""Group stabilisation: time from subscribe to a stable group, with default client settings.

    python bench/group_stabilise_bench.py [--runs 1] [--members 1,3,10] [--clients java,...]

For each client (confluent-kafka and the Java client 4.x, classic and ``group.protocol=consumer``,
kafka-python classic), group size and candidate broker setting, an in-process broker (a fresh one per
scenario) gets a topic of 10 partitions; N consumers are created, then all subscribe at once (t = 0),
each polling on its own thread. The Java consumers run in one JVM (tests/java/StabiliseProbe.java,
compiled against the kafka-clients 4.x jars as the Java tests are: tests/support/java.py), which
measures the same way and reports the time. The group is stable when every member owns at least one
partition, no partition is owned twice and all 10 are owned. Prints a Markdown table (median of
``--runs``; ``>T`` when not stable within the timeout).

Candidates: classic ``group.initial.rebalance.delay.ms`` 0 / 50 / 100 / 300 / 3000 (Kafka's default);
KIP-848 ``group.consumer.heartbeat.interval.ms`` 5000 (Kafka's default) / 1000 / 500 (with
``group.consumer.min.heartbeat.interval.ms`` lowered to allow it).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from broker.testing import BrokerThread  # noqa: E402
from tests.support.java import JavaSession, compile_sources  # noqa: E402

PARTITIONS = 10
TIMEOUT = 30.0


def _confluent(bootstrap: str, group: str, protocol: str):
    import confluent_kafka

    conf = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
    if protocol == "consumer":
        conf["group.protocol"] = "consumer"
    c = confluent_kafka.Consumer(conf)
    return c, lambda: c.poll(0.05), lambda: {p.partition for p in c.assignment()}, c.close


def _kafka_python(bootstrap: str, group: str, protocol: str):
    from kafka import KafkaConsumer

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest")
    return c, lambda: c.poll(timeout_ms=50), lambda: {tp.partition for tp in c.assignment()}, c.close


CLIENTS = {"confluent-kafka": _confluent, "kafka-python": _kafka_python}
JAVA = "Java 4.x"
#: the JVM running tests/java/StabiliseProbe.java, started on first use
_java: list[JavaSession] = []


def _java_run(bootstrap: str, protocol: str, members: int) -> float:
    if not _java:
        _java.append(compile_sources(version="4").session("StabiliseProbe", timeout=TIMEOUT + 60))
    answer = _java[0].request(f"run {bootstrap} g t {members} {PARTITIONS} {protocol} {TIMEOUT}")
    if "seconds" not in answer:
        raise RuntimeError(f"StabiliseProbe: {answer}")
    return float("inf") if answer["seconds"] is None else answer["seconds"]


def run_once(client: str, protocol: str, members: int, config: dict, base: Path) -> float:
    bt = BrokerThread(base / f"d{time.monotonic_ns()}", {**config, "num.partitions": PARTITIONS}).start()
    try:
        bt.call(bt.broker.create_topic, "t", PARTITIONS)
        if client == JAVA:
            return _java_run(bt.bootstrap, protocol, members)
        consumers = [CLIENTS[client](bt.bootstrap, "g", protocol) for _ in range(members)]
        owned: list[set[int]] = [set() for _ in consumers]
        stop = threading.Event()
        start = threading.Barrier(members + 1)

        def member(i: int) -> None:
            c, poll, assignment, _close = consumers[i]
            start.wait()
            c.subscribe(["t"])
            while not stop.is_set():
                poll()
                owned[i] = assignment()

        threads = [threading.Thread(target=member, args=(i,), daemon=True) for i in range(members)]
        for t in threads:
            t.start()
        start.wait()
        t0 = time.monotonic()
        elapsed = float("inf")
        while time.monotonic() - t0 < TIMEOUT:
            snapshot = list(owned)
            union = set().union(*snapshot)
            if all(snapshot) and sum(map(len, snapshot)) == PARTITIONS and len(union) == PARTITIONS:
                elapsed = time.monotonic() - t0
                break
            time.sleep(0.005)
        stop.set()
        for t in threads:
            t.join(10)
        for _c, _p, _a, close in consumers:
            close()
        return elapsed
    finally:
        bt.stop()


SCENARIOS = [
    ("confluent-kafka", "classic", "group.initial.rebalance.delay.ms", [0, 50, 100, 300, 3000]),
    ("kafka-python", "classic", "group.initial.rebalance.delay.ms", [0, 50, 100, 300, 3000]),
    ("confluent-kafka", "consumer", "group.consumer.heartbeat.interval.ms", [5000, 1000, 500]),
    (JAVA, "classic", "group.initial.rebalance.delay.ms", [0, 50, 100, 300, 3000]),
    (JAVA, "consumer", "group.consumer.heartbeat.interval.ms", [5000, 1000, 500]),
]
#: --clients names
NAMES = {"confluent-kafka": "confluent-kafka", "kafka-python": "kafka-python", "java": JAVA}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--members", default="1,3,10")
    ap.add_argument("--clients", default=",".join(NAMES), help="comma-separated: " + ", ".join(NAMES))
    args = ap.parse_args()
    clients = {NAMES[c] for c in args.clients.split(",")}
    sizes = [int(x) for x in args.members.split(",")]
    print(f"| client | protocol | setting | value | {' | '.join(f'{n} member(s)' for n in sizes)} |")
    print(f"| --- | --- | --- | --- | {' | '.join('---' for _ in sizes)} |")
    with tempfile.TemporaryDirectory() as tmp:
        for client, protocol, key, values in SCENARIOS:
            if client not in clients:
                continue
            for value in values:
                config = {key: value}
                if key == "group.consumer.heartbeat.interval.ms":
                    config["group.consumer.min.heartbeat.interval.ms"] = min(value, 5000)
                cells = []
                for n in sizes:
                    times = [run_once(client, protocol, n, config, Path(tmp)) for _ in range(args.runs)]
                    med = statistics.median(times)
                    cells.append(f">{TIMEOUT:.0f} s" if med == float("inf") else f"{med:.2f} s")
                print(f"| {client} | {protocol} | `{key}` | {value} | {' | '.join(cells)} |", flush=True)
    for session in _java:
        session.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
