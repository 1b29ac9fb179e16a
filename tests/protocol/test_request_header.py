"""broker.protocol.framing.request_header_v1/v2, the pipeline's request-header readers, give what the
generated ``request_header.decode_v1/v2`` give (client id, position of the body) on any frame, and
refuse the same frames with the same exception type."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.protocol.framing import request_header_v1, request_header_v2
from broker.protocol.generated import request_header
from broker.protocol.generated.request_header import RequestHeader

READERS = {1: (request_header_v1, request_header.decode_v1), 2: (request_header_v2, request_header.decode_v2)}


def outcome(fn, frame: bytes) -> tuple:
    try:
        got = fn(frame)
    except Exception as e:  # the type is what must agree (the pipeline closes on DECODE_ERRORS)
        return ("raises", type(e))
    if isinstance(got[0], RequestHeader):
        return (got[0].client_id, got[1])
    return got


def header(version: int, client_id: str | None, tags: list[tuple[int, bytes]] | None) -> bytes:
    h = RequestHeader(
        request_api_key=3,
        request_api_version=12,
        correlation_id=99,
        client_id=client_id,
        _unknown_tagged=tags,
    )
    return request_header.ENCODERS[version](h)


def test_the_common_headers():
    for version, (ours, generated) in READERS.items():
        for client_id in ("rdkafka", "", None, "ünïcode-client"):
            frame = header(version, client_id, None) + b"body"
            assert outcome(ours, frame) == outcome(generated, frame) == (client_id, len(frame) - 4)


def test_tagged_fields_in_a_v2_header_are_skipped():
    frame = header(2, "c", [(0, b"abc"), (7, b""), (200, b"x" * 300)]) + b"body"
    assert (
        outcome(request_header_v2, frame) == outcome(request_header.decode_v2, frame) == ("c", len(frame) - 4)
    )


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from([1, 2]),
    st.one_of(st.none(), st.text(max_size=20)),
    st.one_of(st.none(), st.lists(st.tuples(st.integers(0, 300), st.binary(max_size=140)), max_size=3)),
    st.binary(max_size=8),
    st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), max_size=4),
    st.integers(0, 1 << 16),
)
def test_any_header_mutated_or_cut_reads_the_same(version, client_id, tags, body, flips, cut):
    tags = sorted({t: v for t, v in tags}.items()) if tags else None
    frame = bytearray(header(version, client_id, tags) + body)
    for at, value in flips:
        if frame:
            frame[at % len(frame)] = value
    data = bytes(frame[: cut % (len(frame) + 1)])
    ours, generated = READERS[version]
    assert outcome(ours, data) == outcome(generated, data)


def test_a_client_id_length_past_the_frame_is_refused():
    frame = struct.pack(">hhih", 3, 12, 1, 50) + b"short"
    for ours, generated in READERS.values():
        assert outcome(ours, frame) == outcome(generated, frame) == ("raises", outcome(ours, frame)[1])
        assert outcome(ours, frame)[0] == "raises"
