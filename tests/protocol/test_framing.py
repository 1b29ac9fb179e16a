"""broker.protocol.framing.FrameReader: any stream of frames, cut into reads anywhere, gives back
exactly its frames (as bytes), with ``buffered`` counting what arrived and is not yet returned;
large frames are gathered from views of the reads and joined once."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.protocol.framing import _CHUNKED, FrameError, FrameReader


def stream_of(bodies: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(b)) + b for b in bodies)


def feed_in(reader: FrameReader, stream: bytes, cuts: list[int]) -> list[bytes]:
    frames: list[bytes] = []
    returned = 0
    bounds = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    for a, b in zip(bounds, bounds[1:], strict=False):
        got = reader.feed(stream[a:b])
        assert all(type(f) is bytes for f in got)
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
