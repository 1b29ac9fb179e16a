"""Crash durability of a compacted user topic: SIGKILL the broker while confluent-kafka writes updates
to a ``cleanup.policy=compact`` topic and the log cleaner compacts it continuously, restart, and check
with kafka-python reading from the beginning that every key's latest value is its last acknowledged
one, or a later one that was in flight at the kill -- never an older one, never missing.

The broker (``python -m broker serve``, log.flush=always) has 4 KB segments, a cleaner that looks
every 5 ms, and ``max.compaction.lag.ms=1`` so every dirty segment is due at once: the kills land
before, inside and after passes. Values of a key only grow, so "older" is a plain comparison.

``DURABILITY_SEED`` fixes the seed, ``DURABILITY_KILLS`` the number of kills (default 8).
"""

from __future__ import annotations

import os
import random
import time

from .test_kill import BrokerProcess
from .test_kill_compaction import check_cleaner_logs, wait_listening

KILLS = int(os.environ.get("DURABILITY_KILLS", "8"))
KEYS = 40
TOPIC = "table"
TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": "4096",
    "max.compaction.lag.ms": "1",
    "delete.retention.ms": "0",
}
COMPACTING = {"log.cleaner.backoff.ms": "5", "log.flush": "always"}


def read_latest(port: int) -> dict[str, int]:
    """Each key's last value in the log, read from the beginning to the end offset by kafka-python."""
    from kafka import KafkaConsumer, TopicPartition

    tp = TopicPartition(TOPIC, 0)
    consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", enable_auto_commit=False, group_id=None)
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        out: dict[str, int] = {}
        deadline = time.monotonic() + 60
        while consumer.position(tp) < end:
            assert time.monotonic() < deadline, "could not read the topic to its end"
            for records in consumer.poll(timeout_ms=500).values():
                for r in records:
                    out[r.key.decode()] = int(r.value)
        return out
    finally:
        consumer.close()


def test_acknowledged_latest_values_survive_sigkill_during_compaction(broker_factory, tmp_path):
    from confluent_kafka import Producer

    seed = int(os.environ.get("DURABILITY_SEED") or random.SystemRandom().randrange(2**32))
    print(f"DURABILITY_SEED={seed}")
    rng = random.Random(seed)
    data = tmp_path / "data"
    b = broker_factory({}, data)
    b.call(b.broker.create_topic, TOPIC, 1, TOPIC_CONFIGS)
    b.stop()

    broker = BrokerProcess(data, tmp_path, COMPACTING)
    acked: dict[str, int] = {}
    sent: dict[str, int] = {}  # the highest value sent per key (acknowledged or not)
    value = 0
    try:
        for kill in range(KILLS + 1):
            broker.spawn()
            wait_listening(broker)
            latest = read_latest(broker.port)
            for k in set(acked) | set(latest):
                got = latest.get(k)
                assert got is not None and acked.get(k, -1) <= got <= sent[k], (
                    f"after kill {kill}: {k} reads {got}, acknowledged {acked.get(k)}, last sent {sent.get(k)}"
                )
                acked[k] = got  # what the log holds now is the base for the next check
            if kill == KILLS:
                break
            producer = Producer(
                {
                    "bootstrap.servers": f"127.0.0.1:{broker.port}",
                    "acks": "all",
                    "linger.ms": 2,
                    "message.timeout.ms": 30000,
                }
            )

            def delivered(err, msg):
                if err is None:
                    k, v = msg.key().decode(), int(msg.value())
                    acked[k] = max(acked.get(k, -1), v)

            deadline = time.monotonic() + rng.uniform(0.2, 1.0)
            while time.monotonic() < deadline:
                for _ in range(50):
                    k = f"k{rng.randrange(KEYS)}"
                    value += 1
                    sent[k] = value
                    producer.produce(
                        TOPIC, key=k.encode(), value=str(value).encode(), partition=0, on_delivery=delivered
                    )
                producer.poll(0.01)
            broker.kill()
            producer.flush(0.5)  # callbacks of what was acknowledged before the kill
            del producer
        assert broker.terminate() == 0
    finally:
        broker.cleanup()
    check_cleaner_logs(broker.logs, f"{TOPIC}-0", KILLS)
