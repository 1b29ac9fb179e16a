"""broker.coordinator._replay (broker/coordinator/_replay.c), the compiled walk of the start-up loader,
against the loader's Python walk (broker/coordinator/loader.py): the state a replay leaves must be
identical either way -- every committed offset as the same bytes or objects in the same order, every
classic group equal field for field and in the same order, the KIP-848 groups, pending transactional
offsets -- and where the Python walk raises for a malformed records section, so does the loader with
the compiled walk on (it hands every record it does not take to the Python code). Checked on random
records sections (test_loader_runs' generator), on mutated sections, and on whole logs of real
coordinator histories with transactional offset commits and their commit and abort markers, a plain
commit while a transaction is pending, compressed batches and GroupMetadata of every kind, before and
after compaction. Also: the extension is built wherever a C compiler is, and PYKBROKER_NATIVE=0 turns
it off (.ci/run runs this file and test_loader_runs with it off too)."""

from __future__ import annotations

import gc
import os
import random
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.coordinator import groups, loader
from broker.coordinator.classic.group import ClassicGroup, GroupState
from broker.coordinator.generated.offset_commit_key import OffsetCommitKey
from broker.coordinator.generated.offset_commit_value import OffsetCommitValue
from broker.coordinator.records import OFFSET_COMMIT, CoordinatorRecord, to_batch
from broker.coordinator.state import CoordinatorState, PartitionOffsets, decode_committed
from broker.coordinator.timers import ManualTimers
from broker.log import cleaner
from broker.log.batch import iter_batches
from broker.log.control import marker_batch
from broker.log.partition import PartitionLog
from broker.log.records import Record, build_batch
from tests.support.native import native_enabled, require_built, unset_with_native_0

from . import test_compaction_replay as compaction
from .test_loader_runs import BASE, BASE_TS, batches, commit, group_record, new_state, section

try:
    from broker.coordinator import _replay
except ImportError:
    _replay = None

needs_native = pytest.mark.skipif(_replay is None, reason="broker/coordinator/_replay.c is not built")


def exact_view(state: CoordinatorState) -> dict[str, Any]:
    """The state as replay left it, representation included: offsets as the raw dicts hold them
    (bytes or CommittedOffset, in insertion order), classic groups whole and in order."""
    return {
        "offsets": [
            (gid, [(t, list(parts.raw.items())) for t, parts in o.by_topic.items()])
            for gid, o in state.offsets.items()
        ],
        "groups": list(state.groups.items()),
        # each group's attributes as replay set them, in order (a replayed group's containers are
        # made on first use: the same ones made either way); read before the groups are compared
        "group_fields": [(gid, list(vars(g))) for gid, g in state.groups.items()],
        "consumer": compaction.full_view(state)["consumer_groups"],
        "consumer_ids": list(state.consumer_groups),
        "pending": state.pending_txn,
        "plain_after": state.plain_after_pending,
    }


def both(run: Any) -> tuple[Any, Any]:
    """``run()`` with the compiled walk and with the Python walk: (result or exception type) each."""
    out = []
    saved = loader.native_scan
    try:
        for scan in (_replay.scan, None):
            loader.native_scan = scan
            try:
                out.append(run())
            except Exception as e:  # the Python walk's error: the same one either way
                out.append(type(e))
    finally:
        loader.native_scan = saved
    return out[0], out[1]


def replay_section(data: bytes, count: int, min_offset: int, keep: bool = False) -> Any:
    """The exact view of the state the loader leaves and the records it counted (``keep``: group
    "g"'s offsets in topic "t", as they are)."""
    state = new_state()
    n = loader._replay_records(
        data, count, BASE, BASE_TS, None, min_offset, loader._OffsetDecoder(state), state.replay
    )
    if keep:
        return state.offsets["g"].by_topic["t"]
    return exact_view(state), n


def test_the_extension_is_built_where_a_compiler_is():
    require_built(_replay, "broker/coordinator/_replay.c")
    if native_enabled():
        assert loader.native_scan is _replay.scan


def test_pykbroker_native_0_turns_it_off():
    assert unset_with_native_0("broker.coordinator.loader", "native_scan")


@needs_native
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=batches())
def test_a_section_replays_identically_either_way(batch):
    records, deltas, min_offset = batch
    data, count = section(records, deltas)
    native, python = both(lambda: replay_section(data, count, min_offset))
    assert native == python


@needs_native
@settings(
    max_examples=int(os.environ.get("REPLAY_MUTATIONS", "400")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(batch=batches(), flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=4))
def test_a_mutated_section_replays_or_fails_identically_either_way(batch, flips):
    """Bytes changed anywhere (lengths, varints, names, value versions, tags): the compiled walk
    takes only what the Python walk would take the same way, so the outcome is the same."""
    records, deltas, min_offset = batch
    data, count = section(records, deltas)
    mutated = bytearray(data)
    for where, byte in flips:
        mutated[where % len(mutated)] = byte
    mutated = bytes(mutated)
    for cut in (len(mutated), len(mutated) * 2 // 3):
        native, python = both(lambda cut=cut: replay_section(mutated[:cut], count, min_offset))
        assert native == python


def scan(data: bytes, stop: int, count: int, min_offset: int) -> tuple[int, int, int, list]:
    """``_replay.scan`` of ``data[:stop]`` with callbacks that note what it hands over."""
    events: list = []

    def put(group: str, topic: str, records: bytes, unpack: Any) -> None:
        events.append((group, topic, unpack(records)))

    out = _replay.scan(
        data, 0, stop, count, BASE, min_offset, put, lambda *a: events.append(a), _replay.unpack
    )
    return (*out, events)


@needs_native
def test_scan_reads_only_its_window_and_stops_where_it_must():
    records = [commit("g", "t", p, p) for p in (0, 1, 2, 1, 4, 5)]
    data, count = section(records, [(i, 0) for i in range(6)])
    taken, pos, applied, events = scan(data, len(data), count, BASE)
    assert (taken, pos, applied) == (6, len(data), 6)
    assert [(g, t, list(d)) for g, t, d in events] == [("g", "t", [0, 1, 2, 4, 5])]
    assert events[0][2][1] == records[3].value_bytes()  # the last value of a partition wins
    # a window that cuts the last record: the first five, then a stop
    taken, pos, applied, _ = scan(data, len(data) - 1, count, BASE)
    assert taken == 5 and pos < len(data)
    # the count bounds it; records below min_offset are consumed, not applied
    assert scan(data, len(data), 2, BASE)[0::2] == (2, 2)
    taken, _pos, applied, events = scan(data, len(data), 6, BASE + 4)
    assert (taken, applied, [list(d) for _g, _t, d in events]) == (6, 2, [[4, 5]])
    # a tombstone, a group with members: not taken; an empty group is
    tomb = CoordinatorRecord(OFFSET_COMMIT, OffsetCommitKey("g", "t", 0), None)
    for other in (tomb, group_record("g", "x", False, 0)):
        data, count = section([commit("g", "t", 0, 1), other], [(0, 0), (1, 0)])
        assert scan(data, len(data), count, BASE)[0::2] == (1, 1)
    data, count = section([group_record("g", "x", True, 0), commit("g", "t", 0, 1)], [(0, 0), (1, 0)])
    taken, _pos, applied, events = scan(data, len(data), count, BASE)
    assert (taken, applied, [len(e) for e in events]) == (2, 2, [6, 3])
    with pytest.raises(TypeError):
        _replay.scan(data, 0, len(data), count, BASE)
    with pytest.raises(ValueError):
        _replay.unpack(data)


@needs_native
@pytest.mark.parametrize("metadata", ["", "m"])
def test_a_negative_offset_delta_is_left_to_the_python_walk(metadata):
    """A record below the batch's base offset (a negative offset delta: never written, but bytes can
    say so) is taken or skipped as the Python walk does (it takes a common record of a batch it
    replays whole without reading its delta, and skips others): the compiled walk stops there."""
    records = [commit("g", "t", p, p, metadata) for p in range(4)] + [group_record("h", "x", True, 0)]
    for bad in range(5):
        deltas = [(-65 if i == bad else i, 0) for i in range(5)]
        data, count = section(records, deltas)
        for min_offset in (BASE, BASE - 100):
            native, python = both(lambda d=data, c=count, m=min_offset: replay_section(d, c, m))
            assert native == python


@needs_native
def test_an_error_in_a_callback_is_raised():
    data, count = section([commit("g", "t", 0, 1)], [(0, 0)])

    def fail(*_args: Any) -> None:
        raise RuntimeError("state")

    with pytest.raises(RuntimeError):
        _replay.scan(data, 0, len(data), count, BASE, BASE, fail, fail, _replay.unpack)


@needs_native
def test_packed_offsets_are_unpacked_on_first_use(monkeypatch):
    """A restart keeps a group and topic's offsets as their records until they are first read; every
    way of reading them sees them."""
    records = [commit("g", "t", p, 10 + p) for p in range(4)] + [commit("h", "t", 0, 7)]
    data, count = section(records, [(i, 0) for i in range(5)])
    monkeypatch.setattr(loader, "native_scan", _replay.scan)
    state = new_state()
    n = loader._replay_records(
        data, count, BASE, BASE_TS, None, BASE, loader._OffsetDecoder(state), state.replay
    )
    assert n == 5
    parts = state.offsets["g"].by_topic["t"]
    assert parts._raw is None and parts._records is not None  # not unpacked yet
    assert len(parts) == 4 and parts._raw is not None and parts._records is None
    reads = [
        lambda p: p.get(2),
        lambda p: p[3],
        lambda p: 1 in p,
        lambda p: list(p),
        lambda p: p.items(),
        lambda p: p.values(),
        lambda p: (p.pop(0), p.items()),
        lambda p: list(p.keys()),
        lambda p: p == PartitionOffsets({0: decode_committed(records[0].value_bytes())}),
        lambda p: repr(p),
        lambda p: (p.__setitem__(9, p[1]), p.items()),
    ]
    for read in reads:
        native, python = both(lambda read=read: read(replay_section(data, count, BASE, keep=True)))
        assert native == python
    assert state.offsets["h"].get("t", 0).offset == 7


def whole_log(tmp_path: Any, seed: int) -> tuple[PartitionLog, compaction.CoordinatorContext]:
    """A real coordinator history's log (test_compaction_replay) with, after it: a transaction's
    offset commits and its commit marker, another's and its abort marker, a plain commit written
    while a transaction is pending (it wins at the marker), gzip-compressed batches of commits and
    of empty-group records, and many groups' commits of the common layout (runs)."""
    c = compaction.random_history(seed)
    rng = random.Random(seed)
    plog = compaction.write_log(c, tmp_path / "p", rng)
    now = c.clock.ms
    tid = uuid.UUID(int=seed + 1)

    def rec(group: str, partition: int, offset: int, metadata: str = "") -> CoordinatorRecord:
        value = OffsetCommitValue(offset, 1, metadata, now, topic_id=tid)
        return CoordinatorRecord(OFFSET_COMMIT, OffsetCommitKey(group, "events", partition), value)

    def append(data: bytes) -> None:
        buf = bytearray(data)
        plog.append(buf, iter_batches(buf, verify_crc=False), now)

    append(to_batch([rec("txn-g", p, 100 + p) for p in range(3)], now, producer=(7, 0)))
    append(to_batch([rec("txn-g", 1, 555)], now))  # plain, after the pending one: it wins
    append(marker_batch(7, 0, True, now))
    append(to_batch([rec("txn-g", p, 900 + p) for p in range(2)], now, producer=(8, 0)))
    append(marker_batch(8, 0, False, now))
    for compression in (1, 2):
        records = [rec(f"zip-{compression}", p, p, "m" * p) for p in range(5)]
        records.append(group_record(f"zip-{compression}", "z", True, compression))
        append(
            build_batch(
                [Record(i, 0, r.key_bytes(), r.value_bytes()) for i, r in enumerate(records)],
                base_timestamp=now,
                compression=compression,
            )
        )
    for g in range(40):
        append(to_batch([group_record(f"bulk-{g}", "b", True, g % 3)], now))
    for g in range(40):
        append(to_batch([rec(f"bulk-{g}", p, g * 10 + p) for p in range(10)], now))
    plog.roll()
    plog.mark_flushed(*plog.flush_target())
    return plog, c


def load(plog: PartitionLog, c: compaction.CoordinatorContext) -> dict[str, Any]:
    state = groups.new_state(c.config, ManualTimers(c.clock), topics=c.topics)
    loader.load(plog, state)
    return exact_view(state)


@needs_native
@pytest.mark.parametrize("seed", range(6))
def test_a_whole_log_replays_identically_either_way_before_and_after_compaction(tmp_path, seed):
    plog, c = whole_log(tmp_path, seed)
    native, python = both(lambda: load(plog, c))
    assert native == python
    offsets = dict(native["offsets"])
    txn = dict(offsets["txn-g"])["events"]
    committed = [(p, decode_committed(v) if type(v) is bytes else v) for p, v in txn]
    assert [(p, c.offset) for p, c in committed] == [(1, 555), (0, 100), (2, 102)]
    assert [(p, decode_committed(v).offset) for p, v in dict(offsets["bulk-39"])["events"]][9] == (9, 399)
    assert native["pending"] == {}
    result = cleaner.clean_partition(plog, c.clock.ms + 1, 10**12)
    assert result is not None
    after = both(lambda: load(plog, c))
    assert after[0] == after[1]
    plog.close()


def test_a_large_load_freezes_the_heap_after_it(tmp_path, monkeypatch):
    """``loader.load`` freezes what is in memory after a load of FREEZE_AFTER records or more (the
    collector does not walk the state it made again), not after a smaller one."""
    plog, c = whole_log(tmp_path, 1)
    gc.unfreeze()
    try:
        monkeypatch.setattr(loader, "FREEZE_AFTER", 10**9)
        load(plog, c)
        assert gc.get_freeze_count() == 0
        monkeypatch.setattr(loader, "FREEZE_AFTER", 1)
        load(plog, c)
        assert gc.get_freeze_count() > 0
        gc.unfreeze()
        monkeypatch.setenv("PYKBROKER_GC_FREEZE", "0")
        load(plog, c)
        assert gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()
        plog.close()


def test_a_new_empty_group_is_the_group_its_fields_make():
    """``replay_empty_group`` makes a new group with ``ClassicGroup.replayed``: the same group as one
    made by its id with the fields set by name, its containers made empty on first use."""
    for args in (("g", "consumer", 3, "range", "m-1", 42), ("", "", 0, None, None, -1)):
        state = new_state()
        state.replay_empty_group(*args)
        expected = ClassicGroup(args[0])
        expected.generation, expected.protocol_type, expected.protocol_name = (
            args[2],
            args[1] or None,
            args[3],
        )
        expected.leader_id, expected.state_timestamp, expected.state = args[4], args[5], GroupState.EMPTY
        group = state.groups[args[0]]
        lazy = ("members", "static_members", "pending_members", "pending_sync")
        assert not any(name in vars(group) for name in lazy)
        assert not group.has_members and "members" not in vars(group)
        assert group._no_members_yet and not ClassicGroup("x")._no_members_yet
        assert (group.initial_delay_phase, group.new_member_added, group.initial_delay_remaining_ms) == (
            False,
            False,
            0,
        )
        assert group == expected  # reads every field: the containers are made
        for name in lazy:
            assert type(vars(group)[name]) is type(getattr(expected, name))
        assert vars(group).pop("_no_members_yet") is False  # the members' dict was made
        defaults = ("initial_delay_phase", "new_member_added", "initial_delay_remaining_ms")  # class's
        assert vars(group) == {k: v for k, v in vars(expected).items() if k not in defaults}
        with pytest.raises(AttributeError):
            group.no_such_field  # noqa: B018


def test_a_replayed_groups_containers_are_its_own():
    """A container made on first use is kept, and is not shared with another group."""
    state = new_state()
    state.replay_empty_group("a", "consumer", 1, None, None, 5)
    state.replay_empty_group("b", "consumer", 1, None, None, 5)
    a, b = state.groups["a"], state.groups["b"]
    a.pending_members.add("m")
    a.static_members["i"] = "m"
    assert a.pending_members == {"m"} and a.static_members == {"i": "m"}
    assert b.pending_members == set() and b.static_members == {}
    assert a.pending_members is a.pending_members
    assert not a.has_members and "members" not in vars(a)
    a.members["m"] = "member"
    assert a.has_members and not b.has_members
    state.replay_offsets("c", "t", b"", dict)  # offsets alone: an Empty group with the defaults
    assert state.groups["c"] == ClassicGroup("c")


@needs_native
def test_the_compiled_walk_makes_new_groups_and_offsets_as_the_state_methods_do(monkeypatch):
    """With ``state.native_targets()`` the compiled walk makes a new group's Empty group and a group's
    first offsets itself; with the methods replaced (None) it calls them: the same state either way,
    and the same as the Python walk's."""
    records = [group_record("e", "p", True, 0), commit("e", "t", 0, 1), commit("e", "u", 0, 2)]
    records += [commit("o", "t", p, p) for p in range(3)] + [group_record("e", "q", True, 1)]
    data, count = section(records, [(i, 0) for i in range(len(records))])
    monkeypatch.setattr(loader, "native_scan", _replay.scan)
    views, calls = [], []
    for replaced in (False, True):
        state = new_state()
        assert state.native_targets() is not None
        if replaced:
            for name in ("replay_offsets", "replay_empty_group"):
                method = getattr(state, name)
                monkeypatch.setattr(
                    state, name, lambda *a, m=method, n=name: (calls.append(n), m(*a))[1], raising=False
                )
            assert state.native_targets() is None
        decoder = loader._OffsetDecoder(state)
        assert loader._replay_records(data, count, BASE, BASE_TS, None, BASE, decoder, state.replay) == 7
        views.append(exact_view(state))
    # replaced: every new group and every run went through the methods
    assert calls.count("replay_empty_group") == 2 and calls.count("replay_offsets") == 3
    assert views[0] == views[1]
    assert views[0] == both(lambda: replay_section(data, count, BASE))[1][0]
    with pytest.raises(TypeError):
        _replay.scan(data, 0, len(data), count, BASE, BASE, print, print, _replay.unpack, ("no",))
