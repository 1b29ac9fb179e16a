"""Our generated codecs against kafka-python 3.0.12's independent implementation.

For every message and version both sides know, with a non-default value in every field:
(a) our encoding decodes in kafka-python to the same values;
(b) kafka-python's encoding of the same values is byte-identical to ours and decodes in ours to an
    object equal to the original.

kafka-python reads every message from version 0 up; below the validVersions of its (Kafka 4) schema
a version is tested only when that schema still describes it with our layout.
"""

from __future__ import annotations

import io

import pytest

from codegen.spec import MessageSpec
from tests.support.kafka_python import diff_paths, from_kp, message_classes, raw_schema, to_kp
from tests.support.reference import compare_layouts, in_versions, reference_layout, spec_layout
from tests.support.values import all_specs, codec, sample, spec

KP = message_classes()
CASES = [(m, v) for m in all_specs() if m.name in KP for v in m.versions]
IDS = [f"{m.name}-v{v}" for m, v in CASES]
NULLS = pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
KIP848 = {
    "ConsumerGroupHeartbeatRequest",
    "ConsumerGroupHeartbeatResponse",
    "ConsumerGroupDescribeRequest",
    "ConsumerGroupDescribeResponse",
}


def kp_supports(m: MessageSpec, v: int) -> None:
    """Skip, with the reason, the few versions kafka-python cannot represent."""
    cls = KP[m.name]
    if m.name == "RequestHeader" and v == 0:
        pytest.skip("kafka-python's RequestHeader has no v0 (its validVersions are 1-2)")
    if m.type == "header":
        return
    if v > cls.max_version:
        pytest.skip(f"kafka-python's {m.name} stops at v{cls.max_version}")
    raw = raw_schema(m.name)
    if not in_versions(v, raw["validVersions"]):
        diffs = compare_layouts(spec_layout(m, v), reference_layout(raw, v, any_version=True), "kafka-python")
        if diffs:
            pytest.skip(f"kafka-python's schema dropped {m.name} v{v} and reads it differently: {diffs[0]}")


def kp_decode(m: MessageSpec, v: int, data: bytes):
    cls = KP[m.name]
    if m.type == "header":
        buf = io.BytesIO(data)
        obj = cls.decode(buf, flexible=m.is_flexible(v))
        assert buf.tell() == len(data), f"kafka-python read {buf.tell()} of {len(data)} header bytes"
        return obj
    return cls.decode(data, version=v)


def kp_encode(m: MessageSpec, v: int, kp_obj) -> bytes:
    if m.type == "header":
        return bytes(kp_obj.encode(flexible=m.is_flexible(v)))
    return bytes(kp_obj.encode(version=v))


def test_kafka_python_knows_every_api_but_the_kip848_ones() -> None:
    assert {m.name for m in all_specs() if m.name not in KP} == KIP848


@NULLS
@pytest.mark.parametrize("m, v", CASES, ids=IDS)
def test_ours_decoded_by_kafka_python(m: MessageSpec, v: int, nulls: bool) -> None:
    kp_supports(m, v)
    enc, _ = codec(m, v)
    obj = sample(m, v, nulls=nulls)
    if m.name == "ApiVersionsResponse":
        # kafka-python, like the Java client, reads any ApiVersionsResponse with a non-zero ErrorCode
        # as v0 (test_api_versions_error_response_falls_back_to_v0); keep the body at v.
        obj.error_code = 0
    back = from_kp(m, kp_decode(m, v, enc(obj)), v)
    diffs = diff_paths(back, obj)
    assert not diffs, f"{m.name} v{v}: kafka-python read different values:\n" + "\n".join(diffs)


@NULLS
@pytest.mark.parametrize("m, v", CASES, ids=IDS)
def test_kafka_python_encoding_is_identical_and_decodes_in_ours(m: MessageSpec, v: int, nulls: bool) -> None:
    kp_supports(m, v)
    enc, dec = codec(m, v)
    obj = sample(m, v, nulls=nulls)
    ours = enc(obj)
    theirs = kp_encode(m, v, to_kp(m, obj, v, KP[m.name]))
    back, end = dec(theirs)
    assert end == len(theirs)
    diffs = diff_paths(back, obj)
    assert not diffs, f"{m.name} v{v}: we read kafka-python's bytes differently:\n" + "\n".join(diffs)
    if theirs != ours:
        at = next((i for i, (a, b) in enumerate(zip(theirs, ours, strict=False)) if a != b), None)
        pytest.fail(
            f"{m.name} v{v}: encodings differ at byte {at} "
            f"(kafka-python {len(theirs)} bytes, ours {len(ours)} bytes)"
        )


BIG = [(m, v) for m, v in CASES if v in (m.valid.lo, m.valid.hi)]


@pytest.mark.parametrize("m, v", BIG, ids=[f"{m.name}-v{v}" for m, v in BIG])
def test_long_arrays_agree_with_kafka_python(m: MessageSpec, v: int) -> None:
    """130-element arrays (two-byte compact counts) encode identically on both sides."""
    kp_supports(m, v)
    enc, dec = codec(m, v)
    obj = sample(m, v, nulls=False, big=True)
    if m.name == "ApiVersionsResponse":
        obj.error_code = 0
    ours = enc(obj)
    assert kp_encode(m, v, to_kp(m, obj, v, KP[m.name])) == ours
    assert diff_paths(from_kp(m, kp_decode(m, v, ours), v), obj) == []


def test_api_versions_error_response_falls_back_to_v0() -> None:
    """Why the ApiVersionsResponse case above clears ErrorCode: clients read error bodies as v0."""
    m = spec("ApiVersionsResponse")
    sent = sample(m, 0, nulls=False)
    sent.error_code = 35  # UNSUPPORTED_VERSION
    data = codec(m, 0)[0](sent)
    for v in m.versions:
        got = from_kp(m, KP[m.name].decode(data, version=v), 0)
        assert diff_paths(got, sent) == [], v


def test_bitfield_conversion_round_trips() -> None:
    from tests.support.kafka_python import from_bits, to_bits

    for n in (0, 1, 0b1011, -1, -(2**31), -(2**31) + 5, 2**31 - 1):
        assert from_bits(to_bits(n)) == n
    assert to_bits(-(2**31)) is None and to_bits(0b101) == {0, 2}


def test_cross_check_detects_a_changed_value() -> None:
    """The comparison is live: a value changed after encoding is reported at its path."""
    m = spec("JoinGroupResponse")
    obj = sample(m, 9, nulls=False)
    data = codec(m, 9)[0](obj)
    original = obj.members[1].metadata
    obj.members[1].metadata = b"other"
    diffs = diff_paths(from_kp(m, kp_decode(m, 9, data), 9), obj)
    assert diffs == [f".members[1].metadata: {original!r} != b'other'"]
