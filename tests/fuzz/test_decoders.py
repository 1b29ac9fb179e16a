"""Fuzzing the request decoders alone (no sockets).

Feeds the request-header and body decoders of every API version we serve with mutated valid
encodings and random bytes, routed exactly as ``KafkaConnection._handle`` routes a frame. The only
outcomes allowed are a decoded request or one of the exception types the connection treats as "does
not decode" (``connection._DECODE_ERRORS``): anything else would reach its last-resort handler. A
small frame must not make a decoder allocate much (tracemalloc).
"""

from __future__ import annotations

import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

from broker.protocol.generated import APIS
from tests.fuzz.harness import (
    CHUNKS,
    DECODE_ERRORS,
    EXPECTED_DECODE_ERRORS,
    FUZZ,
    MAX_BIG,
    MAX_DECODE_PEAK,
    REGISTRY,
    SERVED,
    garbage_body_frames,
    header_bytes,
    mutated_frames,
    peak_of,
    random_frames,
    route_or_fail,
    sample_frame,
    traced,
)

# ============================================================================ decoders


def test_decode_errors_are_the_set_the_connection_closes_on():
    assert set(DECODE_ERRORS) == EXPECTED_DECODE_ERRORS


@pytest.mark.parametrize("api_key", sorted(REGISTRY.apis))
def test_decoders_systematic_mutations(api_key):
    """Every truncation, and every boundary chunk written over / into every position, of valid
    encodings of every served version (with nullable fields set and null; and, more sparsely, of
    encodings with arrays of 130 elements where those stay small)."""
    api = REGISTRY.get(api_key)
    counts = {"close": 0, "request": 0, "answer": 0}
    for version in range(api.min_version, api.max_version + 1):
        for nulls in (False, True):
            frame = sample_frame(api_key, version, nulls, 0)
            assert route_or_fail(frame).kind == "request", f"{api.name} v{version} sample does not decode"
            for i in range(len(frame) + 1):
                counts[route_or_fail(frame[:i]).kind] += 1
                for chunk in CHUNKS:
                    counts[route_or_fail(frame[:i] + chunk + frame[i + len(chunk) :]).kind] += 1
                    counts[route_or_fail(frame[:i] + chunk + frame[i:]).kind] += 1
        big = sample_frame(api_key, version, False, 0, True)
        if len(big) <= MAX_BIG:
            for i in sorted(set(range(0, len(big) + 1, max(1, len(big) // 150))) | {len(big) - 1}):
                counts[route_or_fail(big[:i]).kind] += 1
                counts[route_or_fail(big[:i] + b"\xff\xff\xff\xff" + big[i + 4 :]).kind] += 1
    assert counts["close"] > 0 and counts["request"] > 0


@settings(FUZZ, max_examples=1500)
@given(frame=st.one_of(mutated_frames(), garbage_body_frames(), random_frames()))
def test_decoders_hypothesis(frame):
    note(f"frame ({len(frame)} bytes): {frame.hex()}")
    with traced():
        peak = peak_of(route_or_fail, frame)
    allowed = MAX_DECODE_PEAK + 200 * len(frame)
    assert peak < allowed, f"decoding {len(frame)} bytes peaked at {peak} bytes: {frame[:2000].hex()}"


#: Filler for 1 KiB bodies: counts/lengths of 1, 64, 127, 1023, 2^31-1 in every width, so that every
#: array count, string length and tagged-field count the decoder meets is as large as possible.
FILLERS = [
    b"\x00",
    b"\x01",
    b"\x02",
    b"\x7f",
    b"\xff",
    b"\x00\x01",
    b"\x00\x00\x00\x01",
    b"\x00\x00\x00\x40",
    b"\x00\x00\x03\xff",
    b"\x7f\xff\xff\xff",
    b"\x02\x00",
    b"\x02\x01",
    b"\x80\x08",
    b"\x00\x00\x00\x01\x02",
]


def test_decoders_bounded_memory_on_1kb_frames():
    worst = (0, "")
    with traced():
        for key, version in SERVED:
            head = header_bytes(key, version)
            for filler in FILLERS:
                frame = head + (filler * 1024)[: 1024 - len(head)]
                peak = peak_of(route_or_fail, frame)
                if peak > worst[0]:
                    worst = (peak, f"{APIS[key].name} v{version} filler {filler.hex()}")
    assert worst[0] < MAX_DECODE_PEAK, f"worst decode peak {worst[0]} bytes for a 1 KiB frame: {worst[1]}"
