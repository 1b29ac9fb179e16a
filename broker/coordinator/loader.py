"""Start-up replay of the coordinator log, fast.

Restart time is the replay of every live record (the log is compacted, see broker/log/cleaner.py).
Where the install compiled broker/coordinator/_replay.c (``native_scan``; PYKBROKER_NATIVE=0 turns it
off), the records of each batch are walked in C, which takes the common records -- OffsetCommit
records with a v4 value in Kafka's layout, a group and topic's in a row handed over as their partitions
and values packed in one bytes object to
``CoordinatorState.replay_offsets``, which keeps them undecoded until the group's offsets are first
read, and GroupMetadata records of Empty groups, applied with ``CoordinatorState.replay_empty_group``
-- (a new group and a group's first offsets are made by the C walk itself, the objects those two
methods make: ``CoordinatorState.native_targets``) and hands every other record to the Python walk
below, one at a time
(tests/coordinator/test_replay_native.py holds the two to identical state).

Without it, this walks the record batches itself instead of going through ``iter_records`` and
``decode_record`` for each record: the records section of each batch is parsed in one loop that
makes no per-record objects, and OffsetCommit records -- nearly all of a large coordinator log --
are decoded here directly (the key's group and topic, and topic ids, are looked up in small caches;
a v4 value is one ``Struct.unpack_from``) and applied with ``CoordinatorState.put_offset`` /
``remove_offset``; a run of them of one layout is matched by one regular expression and unpacked
with ``Struct.iter_unpack``, a group's partitions in a row going into its dict with one ``update``.
GroupMetadata records without members (Empty groups) are read here too and applied with
``CoordinatorState.replay_empty_group``, which replay itself uses for them. Every other record, and
any value this does not recognise, takes the general path: ``decode_record`` and ``replay``, the
same code the live runtime uses.
"""

from __future__ import annotations

import gc
import os
import re
from itertools import groupby, islice
from struct import Struct
from struct import error as StructError
from typing import Any

from broker import native
from broker.log.batch import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    check_crc,
    read_header,
)
from broker.log.control import parse_marker
from broker.log.crc import crc32c
from broker.log.records import _ZZ, InvalidRecords, _read_headers, _read_varint, decompress, iter_records

from .records import GROUP_METADATA, OFFSET_COMMIT, decode_record

try:
    from . import _replay
except ImportError:  # not built (no C compiler at install): the Python walk does it all
    _replay = None

#: ``scan(section, pos, stop, count, base, min_offset)``: the compiled walk of the common records
#: (broker/coordinator/_replay.c); None when the extension is not built or ``PYKBROKER_NATIVE=0``
native_scan = native.compiled(_replay.scan if _replay is not None else None)
#: ``unpack(records)``: a run of OffsetCommit records ``native_scan`` took -> {partition: value bytes}
native_unpack = _replay.unpack if _replay is not None else None

#: a load of at least this many records freezes the heap after it (``load``)
FREEZE_AFTER = 100_000
_OFFSET_COMMIT_KEY = OFFSET_COMMIT.to_bytes(2, "big")
_GROUP_METADATA_KEY = GROUP_METADATA.to_bytes(2, "big")
#: batches the inline header path of ``_load`` leaves to the general one
_SLOW_ATTRIBUTES = COMPRESSION_MASK | TRANSACTIONAL_MASK | CONTROL_MASK
_I16 = Struct(">h")
_I32 = Struct(">i")
_I64 = Struct(">q")
#: the end of a GroupMetadataValue v4 without members: an empty members array, no tagged fields
_NO_MEMBERS = b"\x01\x00"
#: OffsetCommitValue v4 after the version, offset, leader epoch and compact metadata string: the
#: commit timestamp and the topic id as Kafka writes it (one tagged field, tag 0, 16 bytes)
_V4_TAIL = Struct(">qBBB16x")
_TOPIC_ID_TAG = (1, 0, 16)
#: the whole v4 value when its metadata is empty (the common case): the parts to check
_V4_EMPTY_CHECK = Struct(">h13xqBBB16x")
#: the common record from its key's partition field on: partition, value length (varint 42 = 0x54),
#: the v4 value with empty metadata (version, offset, leader epoch, 1 = "", commit timestamp, the
#: topic id as tagged field 0) and the record's header count (0); the fields to check unpacked
_FAST = Struct(">i3s12xB8x3s16xB")
#: its constant parts: the value's length (varint 42) and version (4); the topic id's tag (count 1,
#: tag 0, size 16)
_FAST_VALUE_HEAD = b"\x54\x00\x04"
_FAST_TAG = b"\x01\x00\x10"


class _OffsetDecoder:
    """OffsetCommit key and value bytes -> state changes, with caches for repeated names and ids."""

    def __init__(self, state: Any):
        self.state = state
        self.names: dict[bytes, tuple[str, str]] = {}  # key minus the partition -> (group, topic)
        self.topics: dict[bytes, str] = {}  # a topic's name as the keys hold it -> the name
        self.last_prefix: bytes | None = None
        self.last_parts: dict[int, Any] = {}
        #: the last run of common records taken (``_run_layout``'s pattern and struct, the record's
        #: size): the next batch is tried as a whole with it, its first record included
        self.last_run: tuple[re.Pattern, Struct, Struct, int] | None = None
        #: where the compiled walk makes new groups and offsets itself (``state.native_targets``)
        targets = getattr(state, "native_targets", None)
        self.targets = targets() if targets is not None else None

    def apply(self, key: bytes, value: bytes | None) -> bool:
        """Apply one OffsetCommit record; False when it must take the general path."""
        prefix = key[:-4]
        if prefix == self.last_prefix:
            parts = self.last_parts
        else:
            parts = None
        partition = int.from_bytes(key[-4:], "big", signed=True)
        if value is None or len(value) == 0:
            names = self.names.get(prefix) or self._names(key)
            if names is None:
                return False
            self.last_prefix = None  # the partitions' dict may go with the last offset
            self.state.remove_offset(names[0], names[1], partition)
            return True
        n = len(value)
        if n == 42 and value[14] == 1:
            version, _ts, nt, tag, size = _V4_EMPTY_CHECK.unpack(value)
            if version != 4 or (nt, tag, size) != _TOPIC_ID_TAG:
                return False
        else:
            if n < 42 or value[0] != 0 or value[1] != 4 or value[14] >= 0x80 or value[14] == 0:
                return False
            end = 15 + value[14] - 1
            if end + 27 != n:
                return False
            try:
                value[15:end].decode()  # the metadata: its first read must not fail
            except UnicodeDecodeError:
                return False
            _ts, nt, tag, size = _V4_TAIL.unpack_from(value, end)
            if (nt, tag, size) != _TOPIC_ID_TAG:
                return False
        if parts is None:
            names = self.names.get(prefix) or self._names(key)
            if names is None:
                return False
            parts = self.state.offset_partitions(names[0], names[1])
            self.last_prefix, self.last_parts = prefix, parts
        # checked above as a v4 value in Kafka's layout: kept as its bytes, decoded on first read
        parts[partition] = bytes(value)
        return True

    def _names(self, key: bytes) -> tuple[str, str] | None:
        """The group and topic of an OffsetCommit key (type, int16-sized group and topic, partition),
        cached by the key minus its partition; None when they do not decode or add up."""
        size = len(key)
        if size < 10 or key[2] >= 0x80:
            return None
        p = 4 + (key[2] << 8 | key[3])
        if p + 6 > size or key[p] >= 0x80 or p + 6 + (key[p] << 8 | key[p + 1]) != size:
            return None
        topic = key[p + 2 : -4]
        try:
            names = (key[4:p].decode(), self.topics.get(topic) or self._topic(topic))
        except UnicodeDecodeError:
            return None
        self.names[key[:-4]] = names
        return names

    def _topic(self, raw: bytes) -> str:
        topic = self.topics[raw] = raw.decode()
        return topic


def _apply_empty_group(key: bytes, value: bytes | None, state: Any) -> bool:
    """Apply a GroupMetadata record whose value is a v4 without members (an Empty group: most groups
    of a large log) from its bytes, with ``state.replay_empty_group`` (what replay calls for it);
    False when it must take the general path (any other version, members, tagged fields, a string of
    128 bytes or more, anything malformed)."""
    if (
        value is None
        or len(value) < 17
        or value[0] != 0
        or value[1] != 4
        or len(key) < 4
        or key[2] >= 0x80
        or (key[2] << 8 | key[3]) + 4 != len(key)
    ):
        return False
    try:
        n = value[2] - 1  # a compact string: its length + 1 (one byte: < 128)
        if n < 0 or n >= 0x7F:
            return False
        p = 3 + n
        protocol_type = value[3:p].decode()
        generation = _I32.unpack_from(value, p)[0]
        p += 4
        n = value[p] - 1  # compact nullable strings: 0 is null
        if n >= 0x7F:
            return False
        if n < 0:
            protocol = None
            p += 1
        else:
            protocol = value[p + 1 : p + 1 + n].decode()
            p += 1 + n
        n = value[p] - 1
        if n >= 0x7F:
            return False
        if n < 0:
            leader = None
            p += 1
        else:
            leader = value[p + 1 : p + 1 + n].decode()
            p += 1 + n
        timestamp = _I64.unpack_from(value, p)[0]
        if value[p + 8 :] != _NO_MEMBERS:
            return False
        group_id = key[4:].decode()
    except (UnicodeDecodeError, IndexError, StructError):
        return False
    state.replay_empty_group(group_id, protocol_type, generation, protocol, leader, timestamp)
    return True


def _apply_run(offsets: _OffsetDecoder, prefixes: Struct, pairs: Struct, run: memoryview) -> int:
    """Apply a run of common OffsetCommit records of one layout (``_run_layout``): ``prefixes``
    unpacks each record's key prefix (type, group, topic), ``pairs`` its partition and value. The
    records of one group and topic in a row go into its partitions' dict with one ``update``.
    Returns the records applied: all of them, or those before the first whose key does not decode
    (left to the record-by-record path)."""
    values = pairs.iter_unpack(run)
    names = offsets.names
    last = offsets.last_prefix
    parts = offsets.last_parts
    done = 0
    for (prefix,), same in groupby(prefixes.iter_unpack(run)):
        k = len(list(same))
        if prefix != last:
            group_topic = names.get(prefix) or offsets._names(prefix + b"\0\0\0\0")
            if group_topic is None:
                break
            parts = offsets.state.offset_partitions(group_topic[0], group_topic[1])
            offsets.last_prefix, offsets.last_parts = prefix, parts
            last = prefix
        parts.update(islice(values, k))
        done += k
    return done


def load(plog: Any, state: Any, coordinator: Any = None, kafka_layout_from: int = 0) -> int:
    """Replay ``plog`` (the whole coordinator log) into ``state``; returns the records replayed.

    ``coordinator`` is what the general path replays through (default: ``state``). Records below
    ``kafka_layout_from`` are decoded with the legacy layouts (broker/coordinator/layout.py)."""
    # a million new objects would run the cyclic garbage collector hundreds of times over a growing
    # heap, for nothing: the state holds all of them; it runs again after the load. After a large
    # load (FREEZE_AFTER records) what is in memory is frozen (gc.freeze: the collector never walks
    # it again): else the first collection after the load walks every object it made (0.15 CPU s for
    # a million offsets) and later full collections walk them again, all of them live. A frozen
    # object that later becomes part of a garbage cycle is not freed (it is freed when it is not in
    # a cycle); PYKBROKER_GC_FREEZE=0 turns this off.
    enabled = gc.isenabled()
    gc.disable()
    n = 0
    try:
        n = _load(plog, state, coordinator, kafka_layout_from)
        return n
    finally:
        if n >= FREEZE_AFTER and os.environ.get("PYKBROKER_GC_FREEZE", "1") != "0":
            gc.freeze()
        if enabled:
            gc.enable()


def _load(plog: Any, state: Any, coordinator: Any, kafka_layout_from: int) -> int:
    replay = (coordinator or state).replay
    offsets = _OffsetDecoder(state)
    #: mutated in place by the transactional replay (never replaced)
    pending_txn = getattr(state, "pending_txn", None)
    n = 0
    offset = plog.log_start_offset
    while offset < plog.high_watermark:
        data = plog.read(offset, 1 << 22)
        if not data:
            break
        pos, end = 0, len(data)
        mv = memoryview(data)
        while pos < end:
            if end - pos >= HEADER_SIZE:
                # the header read and checked inline (read_header and check_crc below when anything
                # is off, to raise their errors): a compacted log is mostly small batches
                base, length, _le, magic, crc, attributes, last_delta, base_ts, max_ts, *_rest, count = (
                    HEADER.unpack_from(data, pos)
                )
                batch_end = pos + length + LOG_OVERHEAD
                if (
                    magic == 2
                    and not attributes & _SLOW_ATTRIBUTES
                    and length >= MIN_BATCH_LENGTH
                    and batch_end <= end
                    and base >= offset
                    and crc32c(mv[pos + 21 : batch_end]) == crc
                    and not pending_txn
                ):
                    n += _replay_records(
                        data,
                        count,
                        base,
                        base_ts,
                        max_ts if attributes & TIMESTAMP_TYPE_MASK else None,
                        offset,
                        offsets,
                        replay,
                        kafka_layout_from,
                        pos + HEADER_SIZE,
                        batch_end,
                    )
                    offset = base + last_delta + 1
                    pos = batch_end
                    continue
            info = read_header(data, pos)
            check_crc(data, info)
            batch_end = pos + info.size
            if info.is_transactional and info.last_offset >= offset:
                # a TxnOffsetCommit batch (pending until its marker) or a marker
                n += _replay_transactional(data[pos:batch_end], info, offset, coordinator or state)
                offset = max(offset, info.last_offset + 1)
                pos = batch_end
                continue
            if info.is_control or info.last_offset < offset:
                # skipped, but the read position moves past it (a control batch at the end of
                # the log would otherwise be read again and again)
                offset = max(offset, info.last_offset + 1)
                pos = batch_end
                continue
            if getattr(state, "pending_txn", None):
                # a transaction's offsets are pending: plain commits go through replay, which
                # notes those written after them (the newer commit wins at the marker)
                n += _replay_general(data[pos:batch_end], offset, replay, kafka_layout_from)
                offset = info.last_offset + 1
                pos = batch_end
                continue
            section = data[pos + HEADER_SIZE : batch_end]
            if info.attributes & 0x07:
                section = decompress(info.attributes & 0x07, section)
            append_time = info.max_timestamp if info.attributes & TIMESTAMP_TYPE_MASK else None
            n += _replay_records(
                section,
                info.records_count,
                info.base_offset,
                info.base_timestamp,
                append_time,
                offset,
                offsets,
                replay,
                kafka_layout_from,
            )
            offset = info.last_offset + 1
            pos = batch_end
    return n


def _replay_general(batch: bytes, min_offset: int, replay: Any, kafka_layout_from: int) -> int:
    """A plain batch through ``decode_record`` and ``replay`` (no fast path)."""
    n = 0
    for off, ts, key, value, _h, _info in iter_records(batch, verify_crc=False):
        if off >= min_offset:
            replay(decode_record(key, value, off < kafka_layout_from), off, ts)
            n += 1
    return n


def _replay_transactional(batch: bytes, info: Any, min_offset: int, target: Any) -> int:
    """A transactional batch of the coordinator log: a marker (its producer's pending offsets are
    committed or dropped) or a producer's TxnOffsetCommit records (pending)."""
    pid = info.producer_id
    n = 0
    for off, ts, key, value, _h, _info in iter_records(batch, verify_crc=False):
        if off < min_offset:
            continue
        if info.is_control:
            commit = parse_marker(key)
            if commit is not None:
                target.replay_marker(pid, commit)
        else:
            target.replay_transactional(pid, decode_record(key, value), off, ts)
        n += 1
    return n


#: the regular expression and the struct of a run of common records of one layout (see
#: ``_run_layout``), by layout
_RUNS: dict[tuple, tuple[re.Pattern, Struct, Struct] | None] = {}
#: a varint of 1, 2 or 3 bytes
_VARINT_RE = {1: rb"[\x00-\x7f]", 2: rb"[\x80-\xff][\x00-\x7f]", 3: rb"[\x80-\xff]{2}[\x00-\x7f]"}


def _run_layout(layout: tuple) -> tuple[re.Pattern, Struct, Struct] | None:
    """For the common record of ``layout`` (its length varint's bytes, the widths of its timestamp
    and offset deltas, its key size varint's bytes, its key size): a regular expression that
    matches a run of records of that layout -- every byte checked as ``_replay_records`` checks it,
    the deltas well-formed varints of those widths -- and the structs that unpack each record's key
    prefix (type id, group, topic), and its partition and value (the bytes kept). None when the
    deltas are too wide to bother."""
    lv, ts_width, od_width, ks, size = layout
    if ts_width not in _VARINT_RE or od_width not in _VARINT_RE or size < 10:
        _RUNS[layout] = None
        return None
    record = b"".join(
        (
            re.escape(lv),
            b".",  # attributes
            _VARINT_RE[ts_width],
            _VARINT_RE[od_width],
            re.escape(ks),
            rb"\x00\x01",  # OffsetCommit
            b".{%d}" % (size - 2),  # group, topic, partition
            re.escape(b"\x54" + _FAST_VALUE_HEAD[1:]),  # value length 42, version 4
            rb".{12}\x01.{8}",  # offset, leader epoch, empty metadata, commit timestamp
            re.escape(_FAST_TAG),
            rb".{16}\x00",  # topic id, no headers
        )
    )
    skip = len(lv) + 1 + ts_width + od_width + len(ks)
    run = (
        # possessive: a run is taken whole or not at all, no backtracking state is kept per record
        re.compile(b"(?:" + record + b")++", re.DOTALL),
        Struct(f">{skip}x{size - 4}s48x"),
        Struct(f">{skip + size - 4}xix42sx"),
    )
    assert run[1].size == run[2].size == len(lv) + 1 + ts_width + od_width + len(ks) + size + 44
    _RUNS[layout] = run
    return run


def _replay_records(
    data: bytes,
    count: int,
    base: int,
    base_ts: int,
    append_time: int | None,
    min_offset: int,
    offsets: _OffsetDecoder,
    replay: Any,
    kafka_layout_from: int = 0,
    start: int = 0,
    stop: int | None = None,
) -> int:
    """Replay the ``count`` records of one uncompressed records section (at or after ``min_offset``):
    ``data[start:stop]`` (default: all of ``data``).

    The common record -- an OffsetCommit with a v4 value, empty metadata and no headers -- is
    recognised from its bytes and applied right here; anything else is sliced into key and value
    and handed to ``offsets.apply`` or, failing that, ``decode_record`` and ``replay``."""
    zz = _ZZ
    rv = _read_varint
    fast = _FAST.unpack_from
    value_head = _FAST_VALUE_HEAD
    tag_head = _FAST_TAG
    names = offsets.names
    whole = base >= min_offset  # every record of the batch is to be replayed
    n = len(data) if stop is None else stop
    pos = start
    done = 0
    # the last group and topic's key prefix, its key size and its partitions (kept here, and in
    # ``offsets`` for its own path), and the last topic id
    last = offsets.last_prefix
    last_size = -1 if last is None else len(last) + 4
    last_parts = offsets.last_parts
    runs = _RUNS
    i = 0
    scan = native_scan
    state = offsets.state
    put_packed, put_empty, unpack = state.replay_offsets, state.replay_empty_group, native_unpack
    native_stop = -1  # where the compiled walk last stopped: that record is the Python walk's
    last_run = offsets.last_run
    if (
        scan is None
        and whole
        and last_run is not None
        and n - pos == count * last_run[3]
        and last_run[0].fullmatch(data, pos, n)
    ):
        # the whole batch is common records of the last run's layout: every one at once
        i = done = _apply_run(offsets, last_run[1], last_run[2], memoryview(data)[pos:n])
        pos += done * last_run[3]
        last, last_parts = offsets.last_prefix, offsets.last_parts
        last_size = -1 if last is None else len(last) + 4
    try:
        while i < count:
            if scan is not None and pos != native_stop:
                taken, pos, applied = scan(
                    data, pos, n, count - i, base, min_offset, put_packed, put_empty, unpack, offsets.targets
                )
                native_stop = pos
                if taken:
                    i += taken
                    done += applied
                    offsets.last_prefix = None
                    last, last_size = None, -1
                    if i == count:
                        break
            i += 1
            start = pos
            b = data[pos]
            if b < 0x80:
                length = zz[b]
                pos += 1
            elif data[pos + 1] < 0x80:
                z = (b & 0x7F) | (data[pos + 1] << 7)
                length = (z >> 1) ^ -(z & 1)
                pos += 2
            else:
                length, pos = rv(data, pos, 5)
            end = pos + length
            if length < 6 or end > n:
                raise InvalidRecords(f"record at byte {pos} has a bad length {length}")
            pos += 1  # attributes
            ts_pos = pos
            while data[pos] >= 0x80:  # the timestamp delta, decoded below only when needed
                pos += 1
            pos += 1
            od_pos = pos
            while data[pos] >= 0x80:  # the offset delta, decoded below only when needed
                pos += 1
            pos += 1
            ks_pos = pos
            b = data[pos]
            if b < 0x80:
                size = zz[b]
                pos += 1
            elif data[pos + 1] < 0x80:
                z = (b & 0x7F) | (data[pos + 1] << 7)
                size = (z >> 1) ^ -(z & 1)
                pos += 2
            else:
                size, pos = rv(data, pos, 5)
            vs = pos + size + 1  # where the value would start after a 1-byte length
            if (
                vs + 43 == end
                and size > 10
                and data[pos] == 0
                and data[pos + 1] == 1
                and (whole or base + rv(data, od_pos, 5)[0] >= min_offset)
            ):
                # an OffsetCommit key; from its partition field to the record's end in one unpack
                partition, vhead, mlen, tag, headers = fast(data, vs - 5)
                if vhead == value_head and mlen == 1 and tag == tag_head and not headers:
                    if size == last_size and data.startswith(last, pos):
                        parts = last_parts
                    else:
                        prefix = data[pos : pos + size - 4]
                        group_topic = names.get(prefix) or offsets._names(data[pos : pos + size])
                        if group_topic is None:
                            parts = None
                        else:
                            parts = offsets.state.offset_partitions(group_topic[0], group_topic[1])
                            offsets.last_prefix, offsets.last_parts = prefix, parts
                            last, last_size, last_parts = prefix, size, parts
                    if parts is not None:
                        parts[partition] = data[vs : end - 1]  # the value, decoded on first read
                        pos = end
                        done += 1
                        if not whole or i == count or data[end] != data[start]:
                            continue
                        # the next records may have this one's layout: take the run of them at once
                        layout = (
                            data[start : ts_pos - 1],
                            od_pos - ts_pos,
                            ks_pos - od_pos,
                            data[ks_pos : vs - size - 1],
                            size,
                        )
                        run = runs.get(layout) or _run_layout(layout)
                        if run is None:
                            continue
                        m = run[0].match(data, end, n)
                        if m is None:
                            continue
                        rlen = end - start
                        offsets.last_run = (run[0], run[1], run[2], rlen)
                        stop = end + min((m.end() - end) // rlen, count - i) * rlen
                        taken = _apply_run(offsets, run[1], run[2], memoryview(data)[end:stop])
                        pos += taken * rlen
                        i += taken
                        done += taken
                        last, last_parts = offsets.last_prefix, offsets.last_parts
                        last_size = -1 if last is None else len(last) + 4
                        continue
            if size >= 0:
                key = data[pos : pos + size]
                pos += size
            elif size == -1:
                key = None
            else:
                raise InvalidRecords(f"negative key length {size}")
            b = data[pos]
            if b < 0x80:
                size = zz[b]
                pos += 1
            elif data[pos + 1] < 0x80:
                z = (b & 0x7F) | (data[pos + 1] << 7)
                size = (z >> 1) ^ -(z & 1)
                pos += 2
            else:
                size, pos = rv(data, pos, 5)
            if size >= 0:
                value = data[pos : pos + size]
                pos += size
            elif size == -1:
                value = None
            else:
                raise InvalidRecords(f"negative value length {size}")
            if data[pos] != 0:
                _headers, pos = _read_headers(data, pos, end)
            else:
                pos += 1
            if pos != end:
                raise InvalidRecords(f"record ending at byte {end} has {pos - end:+d} bytes of fields")
            b = data[od_pos]
            od = zz[b] if b < 0x80 else rv(data, od_pos, 5)[0]
            if base + od < min_offset:
                continue
            if key is not None and key[:2] == _OFFSET_COMMIT_KEY and offsets.apply(key, value):
                done += 1
                last = offsets.last_prefix  # as offsets.apply left it
                last_size = -1 if last is None else len(last) + 4
                last_parts = offsets.last_parts
                continue
            offsets.last_prefix = None  # the cached partitions' dict may go with this record
            last, last_size = None, -1
            if (
                key is not None
                and key[:2] == _GROUP_METADATA_KEY
                and _apply_empty_group(key, value, offsets.state)
            ):
                done += 1
                continue
            if append_time is not None:
                ts = append_time
            else:
                b = data[ts_pos]
                ts = base_ts + (zz[b] if b < 0x80 else rv(data, ts_pos, 10)[0])
            replay(decode_record(key, value, base + od < kafka_layout_from), base + od, ts)
            done += 1
    except IndexError:
        raise InvalidRecords(f"records section of {n - start} bytes is truncated") from None
    return done
