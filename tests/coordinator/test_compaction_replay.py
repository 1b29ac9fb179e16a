"""Compaction keeps the replayed state: replay(full log) == replay(compacted log).

Seeded random histories run the real coordinator operations (classic joins, syncs and leaves,
simple and member commits, OffsetDelete, DeleteGroups, KIP-848 heartbeats, joins and leaves,
session and offset expiry by moving the clock), so the log holds what the coordinator really
writes: tombstones of offsets, of classic groups and of consumer-group records. The log is written
to a real partition log in small segments, compacted by the log cleaner (keeping tombstones, and
dropping them all), and replayed by the start-up loader; the states must be equal -- and equal to
the general replay path (``CoordinatorState.replay`` record by record), which checks the loader's
OffsetCommit fast path too. Set COMPACTION_SEED to run one seed.
"""

from __future__ import annotations

import os
import random
import uuid
from pathlib import Path
from typing import Any

import pytest

from broker.coordinator import groups, loader
from broker.coordinator.state import CoordinatorState
from broker.coordinator.timers import ManualTimers
from broker.log import cleaner
from broker.log.batch import iter_batches
from broker.log.config import LogConfig
from broker.log.partition import PartitionLog
from broker.log.records import Record, build_batch
from broker.protocol.generated.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest

from .context import CoordinatorContext, persisted_view

SEEDS = [int(os.environ["COMPACTION_SEED"])] if "COMPACTION_SEED" in os.environ else list(range(12))
STEPS = 160


def full_view(state: CoordinatorState) -> dict[str, Any]:
    """persisted_view plus every persisted field of the KIP-848 groups."""
    view = persisted_view(state)
    view["consumer_groups"] = {
        gid: {
            "epoch": g.group_epoch,
            "assignment_epoch": g.assignment_epoch,
            "topics": dict(g.topics),
            "target": dict(g.target),
            "static": dict(g.static_members),
            "members": {mid: vars(m) for mid, m in g.members.items()},
        }
        for gid, g in state.consumer_groups.items()
    }
    view["classic_ids"] = sorted(state.groups)
    return view


def random_history(seed: int) -> CoordinatorContext:
    rng = random.Random(seed)
    c = CoordinatorContext(offsets_retention_ms=60_000, offsets_retention_check_interval_ms=10_000)
    topics = list(c.topics.partitions)
    classic = [f"g{i}" for i in range(3)]
    consumer = [f"cg{i}" for i in range(3)]
    members: dict[str, dict[str, int]] = {g: {} for g in consumer}  # group -> member id -> epoch
    classic_members: dict[str, list] = {g: [] for g in classic}

    def hb(group: str, member_id: str, epoch: int, resubscribe: bool = False) -> Any:
        subscribe = epoch == 0 or resubscribe  # a new subscription rewrites the member's metadata
        req = ConsumerGroupHeartbeatRequest(
            group_id=group,
            member_id=member_id,
            member_epoch=epoch,
            rebalance_timeout_ms=30000 if epoch == 0 else -1,
            subscribed_topic_names=rng.sample(topics, rng.randint(1, len(topics))) if subscribe else None,
            topic_partitions=[] if epoch == 0 else None,
        )
        return c.consumer_heartbeat(req, 1)

    for _ in range(STEPS):
        op = rng.randrange(10)
        any_group = rng.choice(classic + consumer + ["s0", "s1"])
        if op <= 1:  # a simple commit (errors for live groups are fine: they write nothing)
            c.commit(
                any_group,
                {
                    (t, rng.randrange(c.topics.partitions[t])): rng.randrange(10**6)
                    for t in rng.sample(topics, 2)
                },
                metadata=rng.choice(["", "", "meta-" + str(rng.randrange(100))]),
                leader_epoch=rng.choice([-1, 3]),
            )
        elif op == 2:
            t = rng.choice(topics)
            c.delete_offsets(any_group, {t: [rng.randrange(c.topics.partitions[t])]})
        elif op == 3 and rng.random() < 0.3:
            c.delete_groups([any_group])
            for g in (members, classic_members):
                if any_group in g:
                    g[any_group] = {} if g is members else []
        elif op == 4:
            g = rng.choice(classic)
            if not c.state.groups.get(g) or not c.state.groups[g].members:
                try:
                    classic_members[g] = c.stable_group(g, rng.randint(1, 3))
                except AssertionError:
                    pass
            elif classic_members[g]:
                m = classic_members[g].pop()
                c.leave(g, m.member_id)
        elif op == 5 and classic_members:
            g = rng.choice(classic)
            if classic_members[g]:
                m = classic_members[g][0]
                c.commit(g, {(topics[0], 0): rng.randrange(1000)}, m.generation, m.member_id)
        elif op in (6, 7):
            g = rng.choice(consumer)
            if not members[g] or rng.random() < 0.3:
                mid = str(uuid.UUID(int=rng.getrandbits(128)))
                r = hb(g, mid, 0)
                if r.error_code == 0:
                    members[g][mid] = r.member_epoch
            elif rng.random() < 0.15:
                mid = rng.choice(list(members[g]))
                hb(g, mid, -1)
                del members[g][mid]
            else:  # every member heartbeats, some with a new subscription
                for mid in list(members[g]):
                    r = hb(g, mid, members[g][mid], resubscribe=rng.random() < 0.2)
                    if r.error_code == 0:
                        members[g][mid] = r.member_epoch
                    else:
                        del members[g][mid]
        elif op == 8:
            g = rng.choice(consumer)
            if members[g]:
                mid = rng.choice(list(members[g]))
                c.commit(g, {(topics[1], 0): rng.randrange(1000)}, members[g][mid], mid)
        else:
            expired = c.advance(rng.choice([1_000, 2_000, 5_000, 50_000]))
            for key in expired:  # sessions that timed out: those members are gone
                for g in consumer:
                    members[g] = {m: e for m, e in members[g].items() if m not in key}
                for g in classic:
                    classic_members[g] = [m for m in classic_members[g] if m.member_id not in key]
    return c


def write_log(c: CoordinatorContext, directory: Path, rng: random.Random) -> PartitionLog:
    """The context's log in a real partition log of small segments, all closed and visible."""
    config = LogConfig.resolve({}, {"segment.bytes": "700", "cleanup.policy": "compact"})
    plog = PartitionLog(directory, "__consumer_offsets", 0, config)
    i = 0
    while i < len(c.log):
        chunk = c.log[i : i + rng.randint(1, 6)]
        base_ts = chunk[0].timestamp
        data = bytearray(
            build_batch(
                [Record(k, e.timestamp - base_ts, e.key, e.value) for k, e in enumerate(chunk)],
                base_timestamp=base_ts,
            )
        )
        plog.append(data, iter_batches(data, verify_crc=False), c.clock.ms)
        i += len(chunk)
    plog.roll()
    plog.mark_flushed(*plog.flush_target())
    return plog


def load(plog: PartitionLog, c: CoordinatorContext) -> CoordinatorState:
    state = groups.new_state(c.config, ManualTimers(c.clock), topics=c.topics)
    loader.load(plog, state)
    groups.restore_timers(state, c.clock.ms)
    return state


@pytest.mark.parametrize("tombstones", ["kept", "dropped"])
@pytest.mark.parametrize("seed", SEEDS)
def test_replay_of_the_compacted_log_equals_replay_of_the_full_log(tmp_path, seed, tombstones):
    c = random_history(seed)
    kinds = {e.key[:2] for e in c.log}
    assert len(kinds) >= 3, f"seed {seed}: a history of only {kinds} record types"
    plog = write_log(c, tmp_path / "p", random.Random(seed))
    assert len(plog.segments) > 3
    general = full_view(c.replayed_state())
    full = full_view(load(plog, c))
    assert full == general  # the loader (and its fast path) replays as CoordinatorState.replay does

    retention = 0 if tombstones == "dropped" else 10**12
    result = cleaner.clean_partition(plog, c.clock.ms + 1, retention)
    assert result is not None and result.records_read == len(c.log)
    if tombstones == "dropped":
        assert result.tombstones_dropped > 0
    assert len(plog.segments) == 2  # one compacted segment and the (empty) active one
    assert full_view(load(plog, c)) == full

    plog.close()  # and as a restart finds it on disk
    reopened = PartitionLog(tmp_path / "p", "__consumer_offsets", 0, plog.config, plog.log_end_offset)
    assert full_view(load(reopened, c)) == full
    reopened.close()


def test_a_member_whose_metadata_record_moved_after_its_assignment_keeps_the_assignment(tmp_path):
    """Compaction keeps only a member's last metadata record; when that one was rewritten after its
    current assignment, the compacted log has the assignment first. Replay gives the same member."""
    c = CoordinatorContext()
    req = ConsumerGroupHeartbeatRequest(
        group_id="cg",
        member_id="m1",
        member_epoch=0,
        rebalance_timeout_ms=30000,
        subscribed_topic_names=["foo"],
        topic_partitions=[],
    )
    c.consumer_heartbeat(req, 1)
    member = c.state.consumer_groups["cg"].members["m1"]
    assert member.progress.assigned  # a current assignment was written after the metadata
    # the metadata rewritten alone (as a rack or client change would), after the assignment
    metadata = [e for e in c.log if e.key[:2] == (5).to_bytes(2, "big")][-1]
    c.log.append(type(metadata)(metadata.key, metadata.value, c.clock.ms))
    plog = write_log(c, tmp_path / "p", random.Random(0))
    full = full_view(load(plog, c))
    assert full["consumer_groups"]["cg"]["members"]["m1"]["progress"].assigned
    cleaner.clean_partition(plog, c.clock.ms, 10**12)
    assert full_view(load(plog, c)) == full
