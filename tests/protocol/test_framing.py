"""broker.protocol.framing.FrameReader: any stream of frames, cut into reads anywhere, gives back
exactly its frames (as bytes; a Produce request as a bytearray), with ``buffered`` counting what
arrived and is not yet returned; large frames are gathered from views of the reads and joined once."""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.dispatch.produce import REQUEST_DECODERS
from broker.log.records import simple_batch
from broker.protocol.framing import _CHUNKED, FrameError, FrameReader, request_header_v2
from broker.protocol.generated import request_header
from broker.protocol.generated.produce import REQUEST_DECODERS as GENERATED
from broker.protocol.generated.produce import (
    REQUEST_ENCODERS,
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from broker.protocol.generated.request_header import RequestHeader


def stream_of(bodies: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(b)) + b for b in bodies)


def feed_in(reader: FrameReader, stream: bytes, cuts: list[int]) -> list[bytes]:
    frames: list[bytes] = []
    returned = 0
    bounds = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    for a, b in zip(bounds, bounds[1:], strict=False):
        got = reader.feed(stream[a:b])
        # bytes, except a Produce request (API key 0): a bytearray (bytes where the first read of a
        # gathered frame held only one byte of it: see below)
        assert all(type(f) is bytes or (type(f) is bytearray and f[:2] == b"\0\0") for f in got)
        assert all(type(f) is bytearray for f in got if f[:2] == b"\0\0" and len(f) <= _CHUNKED)
        frames += got
        returned += sum(4 + len(f) for f in got)
        assert reader.buffered == b - returned  # what arrived and is not yet a frame
    return frames


sizes = st.one_of(st.integers(0, 20), st.integers(_CHUNKED - 5, _CHUNKED + 5), st.integers(0, 300_000))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(sizes, min_size=1, max_size=5),
    st.lists(st.integers(0, 1 << 30), max_size=12),
    st.randoms(use_true_random=True),
)
def test_any_cut_of_any_stream_gives_its_frames(lengths, cuts, rnd):
    bodies = [rnd.randbytes(n) for n in lengths]
    stream = stream_of(bodies)
    reader = FrameReader(1 << 20)
    assert feed_in(reader, stream, cuts) == bodies
    assert reader.buffered == 0


@pytest.mark.parametrize("step", [1000, 65536, 100_000, 262_144])
def test_a_large_frame_then_small_ones_in_the_same_read(step):
    bodies = [bytes(range(256)) * 900, b"abc", b"", bytes(200_000), b"x" * 7]
    stream = stream_of(bodies)
    reader = FrameReader(1 << 20)
    assert feed_in(reader, stream, list(range(step, len(stream), step))) == bodies
    assert reader.buffered == 0


def test_a_bad_size_after_a_gathered_frame_is_refused():
    body = bytes(100_000)
    stream = stream_of([body]) + struct.pack(">i", -1)
    reader = FrameReader(1 << 20)
    assert reader.feed(stream[:70_000]) == []
    with pytest.raises(FrameError):
        reader.feed(stream[70_000:])


@pytest.mark.parametrize("api_key", [0, 1, 8, 256])
def test_a_produce_frame_is_writable_and_other_frames_are_bytes(api_key):
    """A Produce request, gathered from several reads or cut out of one, is a bytearray its handler may
    stamp in place (the copy that makes the frame is the only one); any other API's frame stays bytes
    (256: a first byte 1, a second 0)."""
    big = struct.pack(">hhi", api_key, 9, 7) + bytes(_CHUNKED + 100)
    small = struct.pack(">hhi", api_key, 9, 8) + b"x" * 10
    produce = struct.pack(">hhi", 0, 9, 9) + b"y" * 10
    stream = stream_of([big, small, produce])
    want = bytearray if api_key == 0 else bytes
    reader = FrameReader(1 << 20)
    got = reader.feed(stream[:1000]) + reader.feed(stream[1000:])
    assert got == [big, small, produce]
    assert [type(f) for f in got] == [want, want, bytearray]
    whole = FrameReader(1 << 20).feed(stream)  # one read: the three cut out of it
    assert whole == [big, small, produce]
    assert [type(f) for f in whole] == [want, want, bytearray]


@pytest.mark.parametrize("body", [b"", b"\0", b"\0\0", b"\0\1"])
def test_a_frame_too_short_for_a_produce_header_is_cut_as_it_is(body):
    """Frames of 0-2 bytes (too short for a request header: the pipeline closes the connection) come
    back as sent; two zero bytes are a Produce API key, so a bytearray."""
    got = FrameReader(1 << 20).feed(stream_of([body, b"\0\0\0\x09"]))
    assert got == [body, b"\0\0\0\x09"]
    assert type(got[0]) is (bytearray if body == b"\0\0" else bytes) and type(got[1]) is bytearray


def test_a_gathered_frame_whose_first_read_holds_one_byte_of_it():
    """The API key is looked at only when the first part holds it; otherwise the frame is bytes."""
    big = struct.pack(">hhi", 0, 9, 7) + bytes(_CHUNKED + 100)
    stream = stream_of([big])
    reader = FrameReader(1 << 20)
    got = reader.feed(stream[:5]) + reader.feed(stream[5:])
    assert got == [big] and type(got[0]) is bytes


@pytest.mark.parametrize("version", [12, 13])
def test_a_produce_request_gathered_from_several_reads_decodes_as_from_one(version):
    """A Produce request larger than one read arrives as a bytearray (stamped in place by the append);
    from v13 it names its topic by id, and the decoders take the id from the bytearray as from bytes
    (``UUID`` refuses a bytearray: that used to close the connection as an internal error)."""
    topic_id = uuid.UUID(int=(7 << 96) | 42)
    request = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30_000,
        topic_data=[
            TopicProduceData(
                name="t" if version < 13 else "",
                topic_id=topic_id if version >= 13 else uuid.UUID(int=0),
                partition_data=[PartitionProduceData(p, simple_batch([b"x" * 1000] * 40)) for p in range(3)],
            )
        ],
    )
    body = request_header.encode_v2(RequestHeader(0, version, 1, "c")) + REQUEST_ENCODERS[version](request)
    assert len(body) > _CHUNKED
    stream = stream_of([body])
    frames = feed_in(FrameReader(1 << 20), stream, [1000, 70_000])
    assert len(frames) == 1 and type(frames[0]) is bytearray
    pos = request_header_v2(frames[0])[1]
    for decode in (REQUEST_DECODERS[version], GENERATED[version]):
        got, _end = decode(frames[0], pos)
        want, _end = decode(body, pos)
        assert got.topic_data[0].topic_id == want.topic_data[0].topic_id
        assert [bytes(p.records) for p in got.topic_data[0].partition_data] == [
            bytes(p.records) for p in want.topic_data[0].partition_data
        ]
    if version >= 13:
        assert got.topic_data[0].topic_id == topic_id
