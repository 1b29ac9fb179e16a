"""The OffsetCommit decoder the pipeline uses (``broker.dispatch.offset_commit.REQUEST_DECODERS``): a
request of one topic whose partitions carry empty metadata is parsed directly from its fixed layout,
anything else by the generated decoder. Both must give the same request, field for field, for every
version, and for mutated frames the direct parse either gives the generated decoder's result or hands
the frame over to it. Where the compiled parse is built (broker/dispatch/_offset_commit.c, v8-9), it
gives the Python parse's result for every frame: the same request, or None where the Python parse
hands the frame over."""

from __future__ import annotations

import random
import struct
import uuid

import pytest

from broker.dispatch import build_registry, offset_commit
from broker.dispatch.offset_commit import NATIVE_VERSIONS, REQUEST_DECODERS, _common_request
from broker.protocol.generated.offset_commit import REQUEST_DECODERS as GENERATED
from broker.protocol.generated.offset_commit import (
    REQUEST_ENCODERS,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from tests.support.native import native_enabled, require_built, unset_with_native_0

VERSIONS = range(0, 11)
DIRECT = range(2, 11)


def _request(
    v: int,
    group: str = "g",
    member: str = "m",
    instance: str | None = None,
    name: str = "t",
    partitions: int = 1,
    topics: int = 1,
    metadata: str | None = "",
    seed: int = 0,
) -> OffsetCommitRequest:
    rng = random.Random(seed)
    return OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=rng.choice([-1, 0, 7, 1 << 30]) if v >= 1 else -1,
        member_id=member if v >= 1 else "",
        group_instance_id=instance if v >= 7 else None,
        retention_time_ms=rng.choice([-1, 86_400_000]) if 2 <= v <= 4 else -1,
        topics=[
            OffsetCommitRequestTopic(
                name=f"{name}{t or ''}" if v < 10 else "",
                topic_id=uuid.UUID(int=(7 + t) << 64) if v >= 10 else uuid.UUID(int=0),
                partitions=[
                    OffsetCommitRequestPartition(
                        partition_index=rng.randrange(0, 1 << 31),
                        committed_offset=rng.choice([0, -1, 5, 1 << 40, rng.randrange(-(1 << 63), 1 << 63)]),
                        committed_leader_epoch=rng.choice([-1, 0, 3]) if v >= 6 else -1,
                        commit_timestamp=rng.choice([-1, 1_700_000_000_000]) if v == 1 else -1,
                        committed_metadata=metadata,
                    )
                    for _p in range(partitions)
                ],
            )
            for t in range(topics)
        ],
    )


def _same(a: OffsetCommitRequest, b: OffsetCommitRequest) -> None:
    """Every field equal, and the unknown tagged fields too (Message equality leaves them out)."""
    assert a == b
    assert a._unknown_tagged == b._unknown_tagged
    for ta, tb in zip(a.topics, b.topics, strict=True):
        assert ta._unknown_tagged == tb._unknown_tagged
        assert type(ta.topic_id) is type(tb.topic_id)
        for pa, pb in zip(ta.partitions, tb.partitions, strict=True):
            assert pa._unknown_tagged == pb._unknown_tagged
            assert type(pa.committed_metadata) is type(pb.committed_metadata)


def _cases(v: int):
    seed = 0
    for group in ("", "g", "x" * 126, "y" * 127, "ü" * 70):
        for member, instance in (("", None), ("consumer-1-4b1c", None), ("m" * 200, "static-1"), ("m", "")):
            for name in ("t", "x" * 125, "z" * 200, "ünï"):
                for partitions in (1, 2, 10, 126, 127):
                    seed += 1
                    yield _request(v, group, member, instance, name, partitions, seed=seed)


def _direct(frame: bytes, version: int, pos: int = 0):
    """The direct parse, or None where it hands the frame over (it returns None, or raises one of
    the errors the pipeline's decoder catches for that). Where the compiled parse takes the version,
    it is checked to give the same (None, or the same request and end)."""
    try:
        python = _common_request(frame, pos, version)
    except (IndexError, struct.error, UnicodeDecodeError, ValueError):
        python = None
    native = offset_commit.native_common_request
    if native is not None and version in NATIVE_VERSIONS:
        compiled = native(frame, pos, version)
        if python is None:
            assert compiled is None, frame
        else:
            assert compiled is not None, frame
            _same(compiled[0], python[0])
            assert compiled[1] == python[1]
    return python


@pytest.mark.parametrize("version", DIRECT)
def test_common_requests_decode_as_the_generated_decoder_does(version):
    direct = 0
    for req in _cases(version):
        frame = b"\x00" * 5 + REQUEST_ENCODERS[version](req)
        want, end = GENERATED[version](frame, 5)
        fast = _direct(frame, version, 5)
        if fast is not None:
            direct += 1
            got, got_end = fast
            _same(got, want)
            assert got_end == end == len(frame)
        got, got_end = REQUEST_DECODERS[version](frame, 5)
        _same(got, want)
        assert got_end == end
    assert direct >= 100  # (from v8, strings and arrays longer than 126, a two-byte length, are not its)
    # the clients' request: a consumer group's member committing a few partitions of one topic
    for partitions in (1, 10, 100):
        frame = REQUEST_ENCODERS[version](
            _request(version, "group-1", "consumer-1", None, "topic", partitions)
        )
        assert _direct(frame, version) is not None


@pytest.mark.parametrize("version", VERSIONS)
def test_other_shapes_go_to_the_generated_decoder(version):
    others = [
        _request(version, partitions=2, topics=2),
        _request(version, partitions=0),
        _request(version, topics=0),
        _request(version, metadata=None),
        _request(version, metadata="meta"),
        _request(version, partitions=3),
    ]
    others[-1].topics[0].partitions[1].committed_metadata = "x"  # one partition with metadata
    if version >= 8:
        for tagged in (_request(version), _request(version), _request(version)):
            others.append(tagged)
        others[-3].topics[0].partitions[0]._unknown_tagged = [(5, b"x")]
        others[-2].topics[0]._unknown_tagged = [(3, b"")]
        others[-1]._unknown_tagged = [(1, b"")]
    for req in others:
        frame = REQUEST_ENCODERS[version](req)
        assert _direct(frame, version) is None
        got, end = REQUEST_DECODERS[version](frame, 0)
        want, want_end = GENERATED[version](frame, 0)
        _same(got, want)
        assert end == want_end


def _outcome(decode, frame: bytes):
    try:
        return decode(frame, 0)
    except Exception as e:  # noqa: BLE001 -- the type is what is compared
        return type(e)


@pytest.mark.parametrize("version", VERSIONS)
def test_mutated_frames_decode_as_the_generated_decoder_does(version):
    """Every truncation and every byte of a small request overwritten (with 0x00, 0x01, 0x7f,
    0x80, 0xff and a random byte): the pipeline's decoder answers what the generated one answers
    (the same request, or the same exception type); where the direct parse accepts a frame, it is
    the generated result."""
    rng = random.Random(1000 + version)
    for req in (_request(version), _request(version, "group", "member-1", "inst", "topic", 3, seed=5)):
        frame = REQUEST_ENCODERS[version](req)
        mutants = [frame[:i] for i in range(len(frame))]
        for i in range(len(frame)):
            for byte in (0x00, 0x01, 0x7F, 0x80, 0xFF, rng.getrandbits(8)):
                mutants.append(frame[:i] + bytes([byte]) + frame[i + 1 :])
        mutants += [frame + b"\x00", frame + b"\x01\x02"]
        for m in mutants:
            want = _outcome(GENERATED[version], m)
            got = _outcome(REQUEST_DECODERS[version], m)
            if isinstance(want, tuple):
                assert isinstance(got, tuple), (m, got)
                _same(got[0], want[0])
                assert got[1] == want[1]
            else:
                assert got is want, (m, got, want)
            if version in DIRECT:
                fast = _direct(m, version)
                if fast is not None:
                    assert isinstance(want, tuple), m
                    _same(fast[0], want[0])
                    assert fast[1] == want[1]


def test_the_registry_decodes_offset_commit_with_the_handler_modules_decoders():
    api = build_registry().get(8)
    assert api.decoders is REQUEST_DECODERS
    assert all(api.plans[v][1] is REQUEST_DECODERS[v] for v in range(api.min_version, api.max_version + 1))
    assert REQUEST_DECODERS[0] is GENERATED[0] and REQUEST_DECODERS[1] is GENERATED[1]


def test_the_compiled_parse_refuses_what_it_does_not_take():
    """Another version, a frame that is not bytes, a position outside the frame: None (the Python
    parse decides); a wrong call raises."""
    native = offset_commit.native_common_request
    if native is None:
        pytest.skip("broker/dispatch/_offset_commit.c is not built here (or PYKBROKER_NATIVE=0)")
    frame = REQUEST_ENCODERS[9](_request(9))
    assert native(frame, 0, 9) is not None
    for version in (7, 10):
        assert native(REQUEST_ENCODERS[version](_request(version)), 0, version) is None
    assert native(bytearray(frame), 0, 9) is None
    assert native(memoryview(frame), 0, 9) is None
    assert native(frame, -1, 9) is None and native(frame, len(frame) + 1, 9) is None
    assert native(frame, len(frame), 9) is None
    with pytest.raises(TypeError):
        native(frame, 0)


def test_the_extension_is_built_where_a_compiler_is():
    require_built(offset_commit._offset_commit, "broker/dispatch/_offset_commit.c")
    if native_enabled():
        assert offset_commit.native_common_request is offset_commit._offset_commit.common_request


def test_pykbroker_native_0_turns_it_off():
    assert unset_with_native_0("broker.dispatch.offset_commit", "native_common_request")
