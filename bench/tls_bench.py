"""TLS cost: confluent-kafka produce and consume msgs/s through a PLAINTEXT and an SSL listener of
the same broker, in one run (the broker runs in its own process; rounds alternate between the two).

    python bench/tls_bench.py [--messages 200000] [--size 100] [--rounds 3]

Prints the median msgs/s of each and the SSL/PLAINTEXT ratio. No bar: a note for the README.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import confluent_kafka
import trustme

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"broker did not listen on {port}")


def produce(conf: dict, topic: str, n: int, size: int) -> float:
    p = confluent_kafka.Producer(
        {**conf, "linger.ms": 5, "batch.size": 1 << 20, "queue.buffering.max.messages": n}
    )
    value = b"x" * size
    t = time.perf_counter()
    for _ in range(n):
        p.produce(topic, value)
    assert p.flush(120) == 0
    return n / (time.perf_counter() - t)


def consume(conf: dict, topic: str, n: int) -> float:
    c = confluent_kafka.Consumer(
        {
            **conf,
            "group.id": f"bench-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.max.bytes": 50 << 20,
        }
    )
    c.subscribe([topic])
    got = 0
    t = None
    while got < n:
        batch = c.consume(10000, 1.0)
        if batch and t is None:
            t = time.perf_counter()
        got += sum(1 for m in batch if m.error() is None)
    rate = n / (time.perf_counter() - t)
    c.close()
    return rate


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    d = Path(tempfile.mkdtemp(prefix="tls-bench-"))
    ca = trustme.CA()
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(d / "server.pem"))
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    plain, tls = free_port(), free_port()
    cmd = [
        sys.executable,
        "-m",
        "broker.cli",
        "serve",
        "--data-dir",
        str(d / "data"),
        "--config",
        f"listeners=PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls}",
        "--config",
        f"ssl.keystore.location={d / 'server.pem'}",
    ]
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_port(plain)
        wait_port(tls)
        confs = {
            "PLAINTEXT": {"bootstrap.servers": f"127.0.0.1:{plain}"},
            "SSL": {
                "bootstrap.servers": f"127.0.0.1:{tls}",
                "security.protocol": "SSL",
                "ssl.ca.location": str(d / "ca.pem"),
            },
        }
        rates: dict[str, dict[str, list[float]]] = {k: {"produce": [], "consume": []} for k in confs}
        for r in range(args.rounds):
            for name, conf in confs.items():
                topic = f"{name.lower()}-{r}"
                rates[name]["produce"].append(produce(conf, topic, args.messages, args.size))
                rates[name]["consume"].append(consume(conf, topic, args.messages))
        for op in ("produce", "consume"):
            p = statistics.median(rates["PLAINTEXT"][op])
            s = statistics.median(rates["SSL"][op])
            print(f"{op:8s} PLAINTEXT {p:10,.0f} msgs/s   SSL {s:10,.0f} msgs/s   SSL/PLAINTEXT {s / p:.2f}")
    finally:
        proc.terminate()
        proc.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
