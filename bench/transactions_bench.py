"""Transactions benchmark: transactions/s of a confluent-kafka transactional producer committing every
100 records, against our broker (a subprocess, ``log.flush`` as given, default ``interval``) and
against librdkafka's mock cluster (in this process) in the same run; prints both and ours/mock.

    python bench/transactions_bench.py [--transactions 300] [--per 100] [--flush interval]
"""

from __future__ import annotations

import argparse
import socket
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from produce_consume_bench import start_broker, stop  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(bootstrap: str, tid: str, transactions: int, per: int, extra: dict | None = None) -> float:
    """Transactions per second (committed) once the producer is initialized."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5, **(extra or {})})
    p.init_transactions(30)
    value = b"x" * 100
    # one warm-up transaction (metadata, the first AddPartitionsToTxn)
    p.begin_transaction()
    p.produce("txn-bench", value=value, partition=0)
    p.commit_transaction(30)
    start = time.perf_counter()
    for _ in range(transactions):
        p.begin_transaction()
        for i in range(per):
            p.produce("txn-bench", value=value, partition=i % 4)
        p.commit_transaction(30)
    return transactions / (time.perf_counter() - start)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--transactions", type=int, default=300)
    ap.add_argument("--per", type=int, default=100)
    ap.add_argument("--flush", default="interval")
    ap.add_argument("--broker-root", default=str(Path(__file__).resolve().parent.parent))
    ap.add_argument("--broker-config", action="append", default=[])
    args = ap.parse_args()
    mock_owner = Producer({"test.mock.num.brokers": 1, "log_level": 3})
    (mb,) = mock_owner.list_topics(timeout=10).brokers.values()
    mock_rate = run(f"{mb.host}:{mb.port}", "bench-mock", args.transactions, args.per)
    with tempfile.TemporaryDirectory() as d:
        port = free_port()
        proc = start_broker(args, port, Path(d) / "data", 4, Path(d) / "broker.log")
        try:
            ours = run(f"127.0.0.1:{port}", "bench-ours", args.transactions, args.per)
        finally:
            stop(proc)
    print(f"{args.transactions} transactions of {args.per} records (4 partitions), confluent-kafka:")
    print(f"  ours (log.flush={args.flush}) {ours:8.1f} transactions/s")
    print(f"  librdkafka mock cluster      {mock_rate:8.1f} transactions/s")
    print(f"  ours/mock {ours / mock_rate:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
