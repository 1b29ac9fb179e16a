"""Crash durability of the compacted coordinator log: SIGKILL the broker while offsets are committed
and its log cleaner compacts ``__consumer_offsets`` continuously, restart, and check that every
acknowledged commit is what OffsetFetch returns.

The broker (``python -m broker serve``, log.flush=always) has tiny coordinator segments
(offsets.topic.segment.bytes=8000) and a cleaner that looks every 5 ms and cleans at any dirty
ratio (even a clean log again), so the kills land before, inside and after passes -- while the ``.cleaned`` file is written,
between the swap's renames and unlinks, while the new segment is adopted. One client commits
offsets of 4 groups x 6 partitions, request by request, with increasing values. After each restart
every (group, partition) must fetch its last acknowledged value, or the value of the one commit in
flight at the kill (written but not acknowledged is allowed, as in Kafka), and never anything older:
a lost acknowledgement or a resurrected older value fails. The broker logs must show cleaner passes
and no errors.

``DURABILITY_SEED`` fixes the seed, ``DURABILITY_KILLS`` the number of kills (default 12).
"""

from __future__ import annotations

import os
import random
import re
import time
from pathlib import Path

from broker.protocol.generated.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from broker.protocol.generated.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic
from tests.support.wire import WireClient

from .test_kill import BrokerProcess

GROUPS = [f"group-{i}" for i in range(4)]
PARTITIONS = 6
KILLS = int(os.environ.get("DURABILITY_KILLS", "12"))
TIMEOUT = 60.0  # hang guard only
ERRORS = re.compile(r"Traceback|\bERROR\b|CRITICAL|corrupt", re.I)


#: the coordinator log rolls every 8 KB and is re-cleaned continuously, tombstones dropped at once
COMPACTING = {
    "offsets.topic.segment.bytes": "8000",
    "log.cleaner.backoff.ms": "5",
    "log.cleaner.min.cleanable.ratio": "0",
    "log.cleaner.delete.retention.ms": "0",
}


def wait_listening(broker: BrokerProcess) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not broker.listening():
        assert time.monotonic() < deadline, "broker did not start"
        time.sleep(0.01)


def commit_request(group: str, value: int) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=[
            OffsetCommitRequestTopic(
                name="t",
                partitions=[
                    OffsetCommitRequestPartition(
                        partition_index=p, committed_offset=value + p, committed_metadata=""
                    )
                    for p in range(PARTITIONS)
                ],
            )
        ],
    )


def fetch_all(port: int) -> dict[str, int | None]:
    """The value of each group's last commit (partition p holds value + p: all partitions of one
    commit must agree), None when it has none."""
    out: dict[str, int | None] = {}
    with WireClient(port) as client:
        for group in GROUPS:
            req = OffsetFetchRequest(
                group_id=group, topics=[OffsetFetchRequestTopic("t", list(range(PARTITIONS)))]
            )
            resp = client.call(9, 7, req)
            parts = {p.partition_index: p.committed_offset for t in resp.topics for p in t.partitions}
            values = {o - p for p, o in parts.items() if o >= 0}
            assert len(values) <= 1, f"{group}: partitions of one commit disagree: {parts}"
            out[group] = values.pop() if values else None
    return out


def test_acknowledged_commits_survive_sigkill_during_compaction(broker_factory, tmp_path):
    seed = int(os.environ.get("DURABILITY_SEED") or random.SystemRandom().randrange(2**32))
    print(f"DURABILITY_SEED={seed}")
    rng = random.Random(seed)
    data = tmp_path / "data"
    b = broker_factory({}, data)
    b.call(b.broker.create_topic, "t", PARTITIONS)
    b.stop()

    broker = BrokerProcess(data, tmp_path, COMPACTING)
    acked: dict[str, int] = {}
    inflight: dict[str, int] = {}
    value = 0
    try:
        for kill in range(KILLS + 1):
            broker.spawn()
            wait_listening(broker)
            fetched = fetch_all(broker.port)
            for group in GROUPS:
                allowed = {acked.get(group), inflight.get(group)} - {None} or {None}
                assert fetched[group] in allowed, (
                    f"after kill {kill}: {group} fetched {fetched[group]}, acknowledged {acked.get(group)}, "
                    f"in flight {inflight.get(group)}"
                )
                if fetched[group] is not None:
                    acked[group] = fetched[group]  # what the log now holds is the base for the next check
            inflight.clear()
            if kill == KILLS:
                break
            deadline = time.monotonic() + rng.uniform(0.05, 0.6)
            with WireClient(broker.port) as client:
                while time.monotonic() < deadline:
                    group = rng.choice(GROUPS)
                    value += 100
                    inflight[group] = value
                    resp = client.call(8, 8, commit_request(group, value))
                    assert all(p.error_code == 0 for t in resp.topics for p in t.partitions)
                    acked[group] = value
                    del inflight[group]
                # the last request may still be in flight when the kill comes
                group = rng.choice(GROUPS)
                value += 100
                inflight[group] = value
                client.send(8, 8, commit_request(group, value))
                broker.kill()
        assert broker.terminate() == 0
    finally:
        broker.cleanup()
    check_cleaner_logs(broker.logs, "__consumer_offsets-0", KILLS)


def check_cleaner_logs(paths: list, partition: str, kills: int) -> None:
    """The broker logs of a kill run: no error besides torn tails (a kill may leave one, which recovery
    truncates; test_kill.py checks those), and the cleaner ran on ``partition`` in at least half the
    runs. Prints how many kills landed inside a cleaner pass."""
    logs = "".join(Path(p).read_text() for p in paths)
    bad = [line for line in logs.splitlines() if ERRORS.search(line) and "torn or corrupt tail" not in line]
    assert bad == [], "\n".join(bad[:20])
    passes = len(re.findall(rf"{re.escape(partition)}: cleaned offsets", logs))
    assert passes >= kills // 2, f"only {passes} cleaner passes over {kills + 1} runs"
    interrupted = len(
        re.findall(r"completing a log cleaner swap|removing an unfinished cleaner output", logs)
    )
    print(f"{passes} cleaner passes, {interrupted} of {kills} kills landed inside one")
