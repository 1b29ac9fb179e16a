"""The Produce decoder the pipeline uses (``broker.dispatch.produce.REQUEST_DECODERS``): a request of
one topic and one partition is parsed directly from its fixed layout, anything else by the generated
decoder. Both must give the same request, field for field, for every version, and for mutated frames
the direct parse either gives the generated decoder's result or hands the frame over to it. Where the
compiled parse is built (broker/dispatch/_produce.c), it gives the Python parse's result for every
frame, bytes or bytearray: the same request (records a view of the frame, writable where the frame
is), or None where the Python parse hands the frame over."""

from __future__ import annotations

import random
import struct
import uuid

import pytest

from broker.dispatch import build_registry, produce
from broker.dispatch.produce import REQUEST_DECODERS, _one_partition_request
from broker.log.records import simple_batch
from broker.protocol.generated.produce import (
    REQUEST_DECODERS as GENERATED,
)
from broker.protocol.generated.produce import (
    REQUEST_ENCODERS,
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from tests.support.native import native_enabled, require_built, unset_with_native_0

VERSIONS = range(3, 14)


def _request(
    v: int,
    name: str = "t",
    tid: str | None = None,
    records: bytes | None = None,
    partitions: int = 1,
    topics: int = 1,
    index: int = 0,
) -> ProduceRequest:
    records = simple_batch([b"v"]) if records is None else records
    return ProduceRequest(
        transactional_id=tid,
        acks=-1,
        timeout_ms=30_000,
        topic_data=[
            TopicProduceData(
                name=f"{name}{t or ''}" if v < 13 else "",
                topic_id=uuid.UUID(int=(7 + t) << 64) if v >= 13 else uuid.UUID(int=0),
                partition_data=[PartitionProduceData(index + p, records) for p in range(partitions)],
            )
            for t in range(topics)
        ],
    )


def _same(a: ProduceRequest, b: ProduceRequest) -> None:
    """Every field equal, and the unknown tagged fields too (Message equality leaves them out)."""
    assert a == b
    assert a._unknown_tagged == b._unknown_tagged
    for ta, tb in zip(a.topic_data, b.topic_data, strict=True):
        assert ta._unknown_tagged == tb._unknown_tagged
        for pa, pb in zip(ta.partition_data, tb.partition_data, strict=True):
            assert pa._unknown_tagged == pb._unknown_tagged
            assert type(pa.records) is type(pb.records)


def _cases(v: int):
    rng = random.Random(v)
    sizes = [0, 1, 60, 126, 127, 128, 300, 16_383, 16_384, 70_000]
    for tid in (None, "", "tx-1", "ü" * 70):
        for name in ("t", "x" * 125, "y" * 126, "z" * 200, "ünï"):
            size = rng.choice(sizes)
            records = simple_batch([bytes(rng.getrandbits(8) for _ in range(size))]) if size else b""
            yield _request(v, name, tid, records, index=rng.randrange(0, 1 << 31))


@pytest.mark.parametrize("version", VERSIONS)
def test_one_partition_requests_decode_as_the_generated_decoder_does(version):
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
    assert direct >= 10  # (strings longer than 126 bytes from v9, a two-byte length, are not its)
    # librdkafka's request is the direct parse's, whatever the size of its batch
    for size in (1, 100, 20_000):
        frame = REQUEST_ENCODERS[version](_request(version, "topic", None, simple_batch([b"x" * size])))
        assert _direct(frame, version) is not None


@pytest.mark.parametrize("version", VERSIONS)
def test_other_shapes_go_to_the_generated_decoder(version):
    others = [
        _request(version, partitions=2),
        _request(version, topics=2),
        _request(version, partitions=0),
        _request(version, records=b""),
    ]
    others[3].topic_data[0].partition_data[0].records = None  # null records
    if version >= 9:
        tagged = _request(version)
        tagged.topic_data[0].partition_data[0]._unknown_tagged = [(5, b"x")]
        others.append(tagged)
        tagged = _request(version)
        tagged._unknown_tagged = [(1, b"")]
        others.append(tagged)
    for req in others:
        frame = REQUEST_ENCODERS[version](req)
        assert _direct(frame, version) is None
        got, end = REQUEST_DECODERS[version](frame, 0)
        want, want_end = GENERATED[version](frame, 0)
        _same(got, want)
        assert end == want_end


def _python(frame: bytes, version: int, pos: int):
    try:
        return _one_partition_request(frame, pos, version)
    except (IndexError, struct.error, UnicodeDecodeError, ValueError):
        return None


def _direct(frame: bytes, version: int, pos: int = 0):
    """The direct parse, or None where it hands the frame over (it returns None, or raises one of
    the errors the pipeline's decoder catches for that). Where the compiled parse is built, it is
    checked to give the same (None, or the same request and end) for the frame as bytes and as a
    bytearray (the Python parse's of the bytes: its topic id of a bytearray fails uuid.UUID's
    assertion), with records that are a view of that frame, writable where it is a bytearray, as the
    Python parse makes them."""
    python = _python(frame, version, pos)
    native = produce.native_one_partition_request
    if native is not None:
        for b in (frame, bytearray(frame)):
            compiled = native(b, pos, version)
            if python is None:
                assert compiled is None, b
                continue
            assert compiled is not None, b
            _same(compiled[0], python[0])
            assert compiled[1] == python[1]
            records = compiled[0].topic_data[0].partition_data[0].records
            assert records.obj is b and records.readonly == (type(b) is bytes)
    return python


def _outcome(decode, frame: bytes):
    try:
        return decode(frame, 0)
    except Exception as e:  # noqa: BLE001 -- the type is what is compared
        return type(e)


@pytest.mark.parametrize("version", VERSIONS)
def test_mutated_frames_decode_as_the_generated_decoder_does(version):
    """Every truncation and every byte of a small request overwritten (with 0x00, 0x01, 0x7f,
    0x80, 0xff): the pipeline's decoder answers what the generated one answers (the same request,
    or the same exception type); where the direct parse accepts a frame, it is the generated result."""
    rng = random.Random(1000 + version)
    for req in (_request(version), _request(version, "topic", "tx", simple_batch([b"a" * 200]))):
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
            fast = _direct(m, version)
            if fast is not None:
                assert isinstance(want, tuple), m
                _same(fast[0], want[0])
                assert fast[1] == want[1]


def test_the_registry_decodes_produce_with_the_handler_modules_decoders():
    api = build_registry().get(0)
    assert api.decoders is REQUEST_DECODERS
    assert all(api.plans[v][1] is REQUEST_DECODERS[v] for v in VERSIONS)


def test_the_compiled_parse_keeps_the_frame_and_stamps_in_place():
    """The records of a bytearray frame are a writable view of it (the append stamps the batch's
    max timestamp there); the view keeps the frame alive."""
    native = produce.native_one_partition_request
    if native is None:
        pytest.skip("broker/dispatch/_produce.c is not built here (or PYKBROKER_NATIVE=0)")
    batch = simple_batch([b"v" * 10])
    frame = bytearray(REQUEST_ENCODERS[9](_request(9, records=batch)))
    req, end = native(frame, 0, 9)
    assert end == len(frame)
    records = req.topic_data[0].partition_data[0].records
    records[0] = 0xAB
    assert frame[frame.index(batch[1:]) - 1] == 0xAB
    with pytest.raises(BufferError):  # exported: the frame cannot be resized under the view
        frame.append(0)
    del frame
    assert bytes(records[1:]) == batch[1:]


def test_the_compiled_parse_refuses_what_it_does_not_take():
    """Another version, a frame that is neither bytes nor bytearray, a position outside the frame:
    None (the Python parse decides); a wrong call raises."""
    native = produce.native_one_partition_request
    if native is None:
        pytest.skip("broker/dispatch/_produce.c is not built here (or PYKBROKER_NATIVE=0)")
    frame = REQUEST_ENCODERS[9](_request(9))
    assert native(frame, 0, 9) is not None
    for version in (2, 14):
        assert native(frame, 0, version) is None
    assert native(memoryview(frame), 0, 9) is None
    assert native(frame, -1, 9) is None and native(frame, len(frame) + 1, 9) is None
    assert native(frame, len(frame), 9) is None
    with pytest.raises(TypeError):
        native(frame, 0)


def test_the_extension_is_built_where_a_compiler_is():
    require_built(produce._compiled, "broker/dispatch/_produce.c")
    if native_enabled():
        assert produce.native_one_partition_request is produce._compiled.one_partition_request


def test_pykbroker_native_0_turns_it_off():
    assert unset_with_native_0("broker.dispatch.produce", "native_one_partition_request")
