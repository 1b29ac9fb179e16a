"""The start-up loader's record paths (broker/coordinator/loader.py) against the general replay.

``_replay_records`` takes the common OffsetCommit record from its bytes and, once it has seen one,
whole runs of records of the same layout with one regular expression and ``Struct.iter_unpack``. Here
a records section is built from random records -- common commits of groups and topics of several
name lengths, commits with metadata or a zero topic id, tombstones, GroupMetadata records, timestamp
and offset deltas of one to three varint bytes, a first offset to replay from inside the batch -- and
the state it leaves must be the state ``CoordinatorState.replay`` leaves, record by record, from the
generic decoder.
"""

from __future__ import annotations

import uuid
from struct import error as StructError

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.coordinator import groups, loader
from broker.coordinator.generated.group_metadata_key import GroupMetadataKey
from broker.coordinator.generated.group_metadata_value import GroupMetadataValue, MemberMetadata
from broker.coordinator.generated.offset_commit_key import OffsetCommitKey
from broker.coordinator.generated.offset_commit_value import OffsetCommitValue
from broker.coordinator.records import GROUP_METADATA, OFFSET_COMMIT, CoordinatorRecord, decode_record
from broker.coordinator.state import CoordinatorState, GroupConfig
from broker.coordinator.timers import ManualClock, ManualTimers
from broker.log.batch import HEADER_SIZE
from broker.log.records import InvalidRecords, Record, build_batch, iter_records
from broker.protocol.errors import KafkaError
from broker.protocol.primitives import ZERO_UUID, DecodeError

from .context import group_view, persisted_view

T1, T2 = uuid.UUID(int=11), uuid.uuid4()
BASE, BASE_TS = 1000, 1_700_000_000_000


def new_state() -> CoordinatorState:
    return groups.new_state(GroupConfig(), ManualTimers(ManualClock(0)), topics=None)


def commit(
    group: str, topic: str, partition: int, offset: int, metadata: str = "", tid=T1
) -> CoordinatorRecord:
    value = OffsetCommitValue(offset, offset % 7 - 1, metadata, BASE_TS + offset, topic_id=tid)
    return CoordinatorRecord(OFFSET_COMMIT, OffsetCommitKey(group, topic, partition), value)


def section(records: list[CoordinatorRecord], deltas: list[tuple[int, int]]) -> tuple[bytes, int]:
    """The records section of one batch of ``records`` at (offset delta, timestamp delta) each."""
    batch = build_batch(
        [Record(od, td, r.key_bytes(), r.value_bytes()) for r, (od, td) in zip(records, deltas, strict=True)],
        base_offset=BASE,
        base_timestamp=BASE_TS,
    )
    return batch[HEADER_SIZE:], len(records)


def general(data: bytes, records: list[CoordinatorRecord], deltas: list, min_offset: int) -> CoordinatorState:
    """What ``CoordinatorState.replay`` makes of the records at or after ``min_offset``."""
    state = new_state()
    batch = build_batch(
        [Record(od, td, r.key_bytes(), r.value_bytes()) for r, (od, td) in zip(records, deltas, strict=True)],
        base_offset=BASE,
        base_timestamp=BASE_TS,
    )
    for off, ts, key, value, _h, _info in iter_records(batch):
        if off >= min_offset:
            state.replay(decode_record(key, value), off, ts)
    return state


def loaded(data: bytes, count: int, min_offset: int) -> tuple[CoordinatorState, int]:
    state = new_state()
    offsets = loader._OffsetDecoder(state)
    n = loader._replay_records(data, count, BASE, BASE_TS, None, min_offset, offsets, state.replay)
    return state, n


def view(state: CoordinatorState) -> dict:
    v = persisted_view(state)
    v["ids"] = {
        (g, t, p): (c.topic_id, c.metadata, c.leader_epoch, c.commit_timestamp)
        for g, o in state.offsets.items()
        for t, ps in o.by_topic.items()
        for p, c in ps.items()
    }
    v["groups"] = sorted(state.groups)
    # every group, those only in memory too, and its protocol type as replay left it ("" or None)
    v["all"] = {
        gid: (group_view(g), g.protocol_type, dict(g.static_members)) for gid, g in state.groups.items()
    }
    return v


def group_record(group: str, name: str, empty: bool, variant: int) -> CoordinatorRecord:
    """A GroupMetadata record: with or without members, null or set protocol and leader, names
    of one and of several varint bytes, or a tombstone."""
    if variant == 3:
        return CoordinatorRecord(GROUP_METADATA, GroupMetadataKey(group), None)
    long = "p" * (130 if variant == 2 else 1) + name
    members = [] if empty else [MemberMetadata("m-" + name, None, "c", "/h", 1000, 500, b"sub", b"asg")]
    value = GroupMetadataValue(
        protocol_type="" if variant == 1 else long,
        generation=variant * 7 + len(name),
        protocol=None if variant == 1 else "range" + name,
        leader=None if variant == 1 else (long if variant == 2 else "m-" + name),
        current_state_timestamp=-1 if variant == 1 else BASE_TS + len(name),
        members=members,
    )
    return CoordinatorRecord(GROUP_METADATA, GroupMetadataKey(group), value)


_group = st.sampled_from(["g", "group-000001", "group-000002", "a-much-longer-group-name-" + "x" * 70])
_topic = st.sampled_from(["t", "events", "e" * 60])
_common = st.builds(commit, _group, _topic, st.integers(0, 40), st.integers(0, 10**6))
_odd = st.one_of(
    st.builds(
        commit, _group, _topic, st.integers(0, 40), st.integers(0, 10**6), st.text(min_size=1, max_size=5)
    ),
    st.builds(
        commit, _group, _topic, st.integers(0, 40), st.integers(0, 10**6), st.just(""), st.just(ZERO_UUID)
    ),
    st.builds(
        lambda g, t, p: CoordinatorRecord(OFFSET_COMMIT, OffsetCommitKey(g, t, p), None),
        _group,
        _topic,
        st.integers(0, 40),
    ),
    st.builds(
        lambda g: CoordinatorRecord(
            GROUP_METADATA, GroupMetadataKey(g), GroupMetadataValue(protocol_type="consumer")
        ),
        _group,
    ),
    st.builds(group_record, _group, st.text(max_size=3), st.booleans(), st.integers(0, 3)),
)


@st.composite
def batches(draw):
    """Records in runs (a group's partitions in a row, as one commit writes them), with offset and
    timestamp deltas that grow by random steps (a compacted batch has gaps), and where to start."""
    records: list[CoordinatorRecord] = []
    for _ in range(draw(st.integers(1, 12))):
        if draw(st.booleans()):
            first = draw(_common)
            k = first.key
            width = draw(st.integers(1, 30))
            records += [
                commit(k.group, k.topic, (k.partition + j) % 41, first.value.offset + j) for j in range(width)
            ]
        else:
            records.append(draw(_odd))
    deltas = []
    od = td = 0
    for _ in records:
        deltas.append((od, td))
        od += draw(st.sampled_from([1, 1, 1, 2, 70, 9000]))
        td += draw(st.sampled_from([0, 0, 1, 50, 9000, 2_000_000]))
    min_offset = BASE + draw(st.sampled_from([0, 0, deltas[len(deltas) // 2][0], deltas[-1][0] + 1]))
    return records, deltas, min_offset


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=batches())
def test_the_loader_replays_a_section_as_replay_does(batch):
    records, deltas, min_offset = batch
    data, count = section(records, deltas)
    state, n = loaded(data, count, min_offset)
    assert n == sum(1 for od, _td in deltas if BASE + od >= min_offset)
    assert view(state) == view(general(data, records, deltas, min_offset))


def test_a_long_run_of_one_layout_is_taken_at_once_and_replayed_exactly():
    records = [commit(f"group-{g:06d}", "events", p, g * 10 + p) for g in range(300) for p in range(10)]
    deltas = [(i, i // 10) for i in range(len(records))]
    data, count = section(records, deltas)
    state, n = loaded(data, count, BASE)
    assert n == 3000
    assert view(state) == view(general(data, records, deltas, BASE))
    assert state.offsets["group-000299"].by_topic["events"][9].offset == 2999


def test_a_run_stops_at_the_records_count():
    """Bytes after the batch's last record are not read as records of the run."""
    records = [commit("g", "t", p, p) for p in range(20)]
    deltas = [(i, 0) for i in range(20)]
    data, _count = section(records, deltas)
    state, n = loaded(data, 12, BASE)
    assert n == 12
    assert sorted(state.offsets["g"].by_topic["t"]) == list(range(12))


@pytest.mark.parametrize("group_length", [5, 3, 40])
def test_a_malformed_key_inside_a_run_leaves_it_for_the_general_path(group_length):
    """A record that matches the run's layout but whose group and topic lengths do not add up leaves
    the run; the record-by-record path treats it as ``decode_record`` and ``replay`` do (refused, or
    read as those bytes say)."""
    records = [commit("group-1", "events", p, p) for p in range(5)]
    keys = [r.key_bytes() for r in records]
    keys[3] = keys[3][:2] + group_length.to_bytes(2, "big") + keys[3][4:]
    batch = build_batch(
        [Record(i, 0, k, r.value_bytes()) for i, (k, r) in enumerate(zip(keys, records, strict=True))],
        base_offset=BASE,
        base_timestamp=BASE_TS,
    )
    expected = new_state()
    try:
        for off, ts, k, v, _h, _info in iter_records(batch):
            expected.replay(decode_record(k, v), off, ts)
    except (InvalidRecords, DecodeError, KafkaError, ValueError, StructError) as e:
        with pytest.raises(type(e)):
            loaded(batch[HEADER_SIZE:], 5, BASE)
        return
    state, n = loaded(batch[HEADER_SIZE:], 5, BASE)
    assert n == 5
    assert view(state) == view(expected)


def test_an_empty_group_record_is_read_from_its_bytes_as_replay_reads_it():
    """GroupMetadata records without members take the loader's own reading (``_apply_empty_group``),
    those with members or a tombstone the general one; a group that had members and then an empty
    record loses them either way."""
    records = [
        group_record("g1", "x", False, 0),
        group_record("g1", "y", True, 0),
        group_record("g2", "", True, 1),
        group_record("g3", "é", True, 2),
        group_record("g4", "z", True, 0),
        group_record("g4", "z", True, 3),
        commit("g4", "t", 0, 5),
        group_record("g5", "w", True, 0),
        commit("g5", "t", 0, 6),
    ]
    deltas = [(i, i) for i in range(len(records))]
    data, count = section(records, deltas)
    state, n = loaded(data, count, BASE)
    assert n == len(records)
    assert view(state) == view(general(data, records, deltas, BASE))
    g1 = state.groups["g1"]
    assert (g1.members, g1.generation, g1.protocol_name, g1.state.value) == ({}, 1, "rangey", "Empty")
    assert state.groups["g2"].protocol_type is None and state.groups["g2"].leader_id is None
    assert state.groups["g3"].protocol_type == "p" * 130 + "é"


def test_a_malformed_empty_group_value_is_refused_as_the_general_path_refuses_it():
    """An empty group's value cut short is not read by the loader's own reading: the general path
    refuses it, as before."""
    good = group_record("g", "x", True, 0)
    value = good.value_bytes()
    assert value is not None
    for cut in (len(value) - 1, len(value) - 9, 5):
        batch = build_batch(
            [Record(0, 0, good.key_bytes(), value[:cut])], base_offset=BASE, base_timestamp=BASE_TS
        )
        with pytest.raises(Exception) as expected:
            for _off, _ts, k, v, _h, _info in iter_records(batch):
                new_state().replay(decode_record(k, v))
        with pytest.raises(type(expected.value)):
            loaded(batch[HEADER_SIZE:], 1, BASE)
