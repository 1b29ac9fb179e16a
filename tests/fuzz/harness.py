"""Shared pieces of the wire-protocol fuzz suite (tests/fuzz/test_*.py): routing a frame as the
connection does, mutations and hypothesis strategies of request frames, the TCP exchange that sends a
stream plus a sentinel and judges the answers, the bystander client and the log checks.

See tests/fuzz/test_decoders.py (the decoders alone), test_connection.py (frames through the real
connection handler) and test_semantic.py (well-formed requests with absurd values). Everything is
derandomized (CI reproduces the same examples); hypothesis prints the falsifying example and the
``note()``s hold the frame bytes in hex. The cases run per API (by layer: decoder, TCP, semantic) are
printed in pytest's terminal summary (tests/fuzz/tally.py).
"""

from __future__ import annotations

import functools
import logging
import re
import socket
import struct
import threading
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, currently_in_test_context, note, settings
from hypothesis import strategies as st

from broker.dispatch import build_registry
from broker.protocol.errors import ErrorCode
from broker.protocol.framing import REQUEST_PREFIX
from broker.protocol.generated import APIS, codec, request_header
from broker.protocol.generated.api_versions import ApiVersionsRequest
from broker.protocol.generated.api_versions import decode_response_v0 as decode_api_versions_v0
from broker.protocol.generated.metadata import MetadataRequest
from broker.protocol.generated.request_header import RequestHeader
from broker.protocol.primitives import DecodeError
from broker.server import pipeline
from tests.fuzz import tally
from tests.support.values import all_specs, sample
from tests.support.wire import WireClient, request_bytes

API_VERSIONS, METADATA, PRODUCE, FETCH, LIST_OFFSETS = 18, 3, 0, 1, 2
OFFSET_COMMIT, JOIN_GROUP, SYNC_GROUP, CREATE_TOPICS, CREATE_PARTITIONS = 8, 11, 14, 19, 37
CONSUMER_GROUP_HEARTBEAT = 68

REGISTRY = build_registry()
#: (api key, version) for every version we serve.
SERVED: list[tuple[int, int]] = [(k, v) for k, lo, hi in REGISTRY.ranges() for v in range(lo, hi + 1)]
REQUEST_SPECS = {m.api_key: m for m in all_specs() if m.type == "request"}
#: Requests that may wait for something else before they are answered (a legitimate "no answer yet").
PARKABLE = {FETCH, JOIN_GROUP, SYNC_GROUP}
KNOWN_ERROR_CODES = {int(c) for c in ErrorCode}
#: What the connection closes on as "cannot decode"; checked against the connection module below.
EXPECTED_DECODE_ERRORS = {
    DecodeError,
    struct.error,
    IndexError,
    UnicodeDecodeError,
    ValueError,
    OverflowError,
}
DECODE_ERRORS = pipeline.DECODE_ERRORS
#: A frame of at most 1 KiB must not make the decoders allocate more than this (tracemalloc peak);
#: larger frames get 200 bytes more per byte.
MAX_DECODE_PEAK = 1 << 20
#: "Big" samples (arrays of 130) larger than this are left out: nested arrays make some megabytes.
MAX_BIG = 16 << 10

FUZZ = settings(deadline=None, derandomize=True, database=None, print_blob=True)
#: Over TCP the broker's state changes from one example to the next, so shrinking would replay
#: examples against a different broker: report the first failing example as it is (its notes hold
#: the bytes sent).
TCP = settings(FUZZ, phases=[Phase.explicit, Phase.generate])
SOCKET_HEALTH = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large]


# ============================================================================ routing, like the broker


@dataclass
class Routed:
    """What ``KafkaConnection._handle`` does with a frame before (or instead of) the handler."""

    kind: str  # "close", "answer" (ApiVersions at a version we don't serve) or "request"
    api_key: int | None = None
    version: int | None = None
    correlation_id: int | None = None
    request: Any = None
    why: str = ""


def route(frame: bytes) -> Routed:
    """Mirror of the connection's decode path; exceptions outside DECODE_ERRORS propagate."""
    try:
        api_key, version, corr = REQUEST_PREFIX.unpack_from(frame, 0)
    except struct.error:
        return Routed("close", why="too short for a request header")
    api = REGISTRY.get(api_key)
    if api is None:
        return Routed("close", api_key, version, corr, why="unknown API key")
    plan = api.plans.get(version)
    if plan is None:
        if api_key == API_VERSIONS:
            return Routed("answer", api_key, version, corr, why="ApiVersions at an unserved version")
        return Routed("close", api_key, version, corr, why="unsupported version")
    decode_header, decode_body = plan[0], plan[1]
    try:
        _header, pos = decode_header(frame)
        request, _end = decode_body(frame, pos)
    except DECODE_ERRORS as e:
        return Routed("close", api_key, version, corr, why=f"does not decode: {type(e).__name__}: {e}")
    # a request that decodes but that Kafka's request classes refuse to build (the ACL APIs with
    # UNKNOWN codes): the handler closes the connection, as Kafka does
    unparseable = getattr(api.module, "unparseable", None)
    why = unparseable(request) if unparseable is not None else None
    if why is not None:
        return Routed("close", api_key, version, corr, why=why)
    return Routed("request", api_key, version, corr, request)


def route_or_fail(frame: bytes, layer: str | None = "decoder") -> Routed:
    """``route``, failing the test if an exception escapes; counted for the summary per ``layer``."""
    if layer is not None:
        tally.count(layer, frame)
    try:
        return route(frame)
    except Exception as e:
        pytest.fail(
            f"{type(e).__name__} escapes the request decoders, so the connection would log 'unexpected "
            f"error' and close: {e!r}\nframe ({len(frame)} bytes): {frame.hex()}",
            pytrace=True,
        )


def header_bytes(
    api_key: int, version: int, correlation_id: int = 7, client_id: str | None = "fuzz"
) -> bytes:
    hdr = RequestHeader(api_key, version, correlation_id, client_id)
    if APIS[api_key].is_flexible(version):
        return request_header.encode_v2(hdr)
    return request_header.encode_v1(hdr)


@functools.cache
def sample_frame(api_key: int, version: int, nulls: bool, seed: int, big: bool = False) -> bytes:
    """A valid request frame (header + body, no size prefix) with every field set; ``big``: arrays
    of 130 (two-byte varint counts, fixed-width arrays past the precompiled-Struct cut-off)."""
    body = sample(REQUEST_SPECS[api_key], version, nulls, seed, big)
    return request_bytes(api_key, version, body, correlation_id=7, client_id="fuzz")[4:]


# ============================================================================ mutations

#: Boundary bytes written over or into an encoding: lengths/counts of -1, 0x7f.., 0x80.., huge
#: varints (5 and 10 bytes), overlong varints, invalid UTF-8.
CHUNKS = [
    b"\x00",
    b"\x01",
    b"\x7f",
    b"\x80",
    b"\xff",
    b"\x00\x00",
    b"\x7f\xff",
    b"\x80\x00",
    b"\xff\xff",
    b"\x00\x00\x00\x00",
    b"\x00\x00\x10\x00",
    b"\x7f\xff\xff\xff",
    b"\x80\x00\x00\x00",
    b"\xff\xff\xff\xff",
    b"\xff\xff\xff\xff\x0f",
    b"\x80\x80\x80\x80\x08",
    b"\xfe\xff\xff\xff\x07",
    b"\xff\xff\xff\xff\xff\xff\xff\xff\x7f",
    b"\x80\x80\x80\x80\x80\x80",
    b"\xc0\xc4\x07",
    b"\xc3\x28",
    b"\xed\xa0\x80",
]


def mutate(data: bytes, ops: list[tuple]) -> bytes:
    """Apply mutation ops (from ``mutation_ops``); positions are taken modulo the current length."""
    b = bytearray(data)
    for op in ops:
        kind, pos = op[0], op[1] % (len(b) + 1)
        if kind == "flip" and pos < len(b):
            b[pos] ^= op[2] or 1
        elif kind == "overwrite":
            b[pos : pos + len(op[2])] = op[2]
        elif kind == "insert":
            b[pos:pos] = op[2]
        elif kind == "delete":
            del b[pos : pos + op[2]]
        elif kind == "truncate":
            del b[pos:]
        elif kind == "extend":
            b += op[2]
        elif kind == "splice":  # a slice of another valid encoding
            donor = op[2]
            start = op[3] % (len(donor) + 1)
            b[pos : pos + op[4]] = donor[start : start + op[4]]
    return bytes(b)


def mutation_ops(donors: st.SearchStrategy[bytes]) -> st.SearchStrategy[list[tuple]]:
    pos = st.integers(0, 4096)
    op = st.one_of(
        st.tuples(st.just("flip"), pos, st.integers(1, 255)),
        st.tuples(st.just("overwrite"), pos, st.sampled_from(CHUNKS)),
        st.tuples(st.just("overwrite"), pos, st.binary(min_size=1, max_size=8)),
        st.tuples(st.just("insert"), pos, st.sampled_from(CHUNKS)),
        st.tuples(st.just("delete"), pos, st.integers(1, 16)),
        st.tuples(st.just("truncate"), pos),
        st.tuples(st.just("extend"), pos, st.binary(min_size=1, max_size=64)),
        st.tuples(st.just("splice"), pos, donors, st.integers(0, 4096), st.integers(1, 64)),
    )
    return st.lists(op, min_size=1, max_size=4)


served = st.sampled_from(SERVED)


@st.composite
def sample_frames(draw: Any, apis: list[tuple[int, int]] = SERVED) -> tuple[int, int, bytes]:
    key, version = draw(st.sampled_from(apis))
    nulls, seed = draw(st.booleans()), draw(st.integers(0, 2))
    frame = sample_frame(key, version, nulls, seed)
    if draw(st.integers(0, 9)) == 0 and len(sample_frame(key, version, nulls, seed, True)) <= MAX_BIG:
        frame = sample_frame(key, version, nulls, seed, True)
    return key, version, frame


donor_frames = st.builds(
    lambda kv, nulls: sample_frame(kv[0], kv[1], nulls, 0), st.sampled_from(SERVED), st.booleans()
)


@st.composite
def mutated_frames(draw: Any, apis: list[tuple[int, int]] = SERVED) -> bytes:
    _key, _version, frame = draw(sample_frames(apis))
    return mutate(frame, draw(mutation_ops(donor_frames)))


@st.composite
def garbage_body_frames(draw: Any, apis: list[tuple[int, int]] = SERVED) -> bytes:
    key, version = draw(st.sampled_from(apis))
    client_id = draw(st.sampled_from(["fuzz", "", None, "é☃" * 3]))
    return header_bytes(key, version, draw(st.integers(-(2**31), 2**31 - 1)), client_id) + draw(
        st.binary(max_size=300)
    )


@st.composite
def random_frames(draw: Any) -> bytes:
    """Random bytes, optionally starting with a served (api key, version) so they reach a decoder."""
    data = draw(st.binary(max_size=200))
    if draw(st.booleans()):
        key, version = draw(served)
        data = struct.pack(">hh", key, version) + data
    return data


#: What one frame of a fuzzed stream is: mostly mutated valid requests, some untouched ones (so that
#: the answers to the frames before a bad one are checked too), garbage bodies and random bytes.
any_frame = st.one_of(
    mutated_frames(),
    sample_frames().map(lambda t: t[2]),
    garbage_body_frames(),
    random_frames(),
)


# ============================================================================ over TCP: exchanges, the bystander, log checks

SENTINEL_CORR = 0x5E471E1
MAX_PAD = 1 << 16


def split_frames(stream: bytes, cap: int) -> tuple[list[bytes], bytes | None]:
    """(complete frames, leftover bytes) as FrameReader splits ``stream``; leftover None on a size
    prefix outside 0..cap (the broker closes there)."""
    frames = []
    pos = 0
    while len(stream) - pos >= 4:
        size = struct.unpack_from(">i", stream, pos)[0]
        if size < 0 or size > cap:
            return frames, None
        if pos + 4 + size > len(stream):
            break
        frames.append(stream[pos + 4 : pos + 4 + size])
        pos += 4 + size
    return frames, stream[pos:]


@dataclass
class Exchange:
    frames: list[bytes]
    routed: list[Routed]
    framing_error: bool
    incomplete: bool
    sentinel: int | None = None  # correlation id of the sentinel request, when one was sent
    outcome: str = ""  # "answered" (the sentinel came back), "closed" or "waiting"
    responses: list[bytes] = field(default_factory=list)
    decoded: list[tuple[Routed, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def plan_stream(stream: bytes, cap: int, layer: str = "tcp") -> tuple[bytes, Exchange]:
    """Complete a trailing partial frame with zeros (when small) and append the sentinel request."""
    for _ in range(3):
        frames, rest = split_frames(stream, cap)
        if rest is None or not rest:
            break
        if len(rest) < 4:
            stream += bytes(4 - len(rest))
            continue
        need = 4 + struct.unpack_from(">i", rest)[0] - len(rest)
        if need > MAX_PAD:
            break
        stream += bytes(need)
    frames, rest = split_frames(stream, cap)
    ex = Exchange(frames, [route_or_fail(f, layer) for f in frames], rest is None, bool(rest))
    if not ex.framing_error and not ex.incomplete:
        corrs = {r.correlation_id for r in ex.routed}
        corr = SENTINEL_CORR
        while corr in corrs:
            corr += 1
        sentinel = request_bytes(API_VERSIONS, 3, ApiVersionsRequest("fuzz-sentinel", "1.0"), corr)
        stream += sentinel
        ex.sentinel = corr
        ex.frames.append(sentinel[4:])
        ex.routed.append(route_or_fail(sentinel[4:], None))
    return stream, ex


def _expects_answer(r: Routed) -> bool:
    if r.kind == "answer":
        return True
    if r.kind != "request":
        return False
    return not (r.api_key == PRODUCE and r.request.acks == 0)


def _check_response(ex: Exchange, r: Routed, frame: bytes) -> str | None:
    """None when ``frame`` is a well-formed response to ``r``, else what is wrong with it."""
    if len(frame) < 4:
        return f"response frame of {len(frame)} bytes"
    try:
        if r.kind == "answer":
            resp, end = decode_api_versions_v0(frame, 4)
        else:
            flexible = APIS[r.api_key].is_flexible(r.version) and r.api_key != API_VERSIONS
            pos = 4
            if flexible:
                if frame[4] != 0:
                    return "tagged fields in the response header"
                pos = 5
            resp, end = codec(r.api_key).RESPONSE_DECODERS[r.version](frame, pos)
    except Exception as e:
        return f"response to {APIS[r.api_key].name} v{r.version} does not decode: {e!r}"
    if end != len(frame):
        return f"{len(frame) - end} trailing bytes in the response to {APIS[r.api_key].name} v{r.version}"
    bad = sorted(set(error_codes(resp)) - KNOWN_ERROR_CODES)
    if bad:
        return f"unknown error codes {bad} in the response to {APIS[r.api_key].name} v{r.version}"
    ex.decoded.append((r, resp))
    return None


def error_codes(obj: Any) -> Iterator[int]:
    if isinstance(obj, list):
        for x in obj:
            yield from error_codes(x)
        return
    for name in getattr(obj, "_fields", ()):
        v = getattr(obj, name)
        if name == "error_code":
            yield v
        elif isinstance(v, list) or hasattr(v, "_fields"):
            yield from error_codes(v)


def exchange(
    port: int, stream: bytes, cap: int, timeout: float = 5.0, park_timeout: float = 0.5, layer: str = "tcp"
) -> Exchange:
    """Send ``stream`` (+ sentinel) on a fresh connection and read until the sentinel's answer, close
    or timeout; check every response against the request it answers."""
    data, ex = plan_stream(stream, cap, layer)
    parkable = any(r.kind == "request" and r.api_key in PARKABLE for r in ex.routed)
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        try:
            sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed by the broker while we were still sending; the reads below see it
        # behind a frame we cannot complete cheaply the broker legitimately waits for more bytes:
        # just collect the answers to the frames before it
        sock.settimeout(0.3 if ex.incomplete else park_timeout if parkable else timeout)
        buf = b""
        while True:
            try:
                chunk = sock.recv(1 << 16)
            except TimeoutError:
                ex.outcome = "waiting"
                break
            except (ConnectionResetError, BrokenPipeError):
                ex.outcome = "closed"
                break
            if not chunk:
                ex.outcome = "closed"
                break
            buf += chunk
            while len(buf) >= 4:
                size = struct.unpack_from(">i", buf)[0]
                if size < 0:
                    ex.problems.append(f"response size prefix {size}")
                    break
                if len(buf) < 4 + size:
                    break
                ex.responses.append(buf[4 : 4 + size])
                buf = buf[4 + size :]
            if ex.problems:
                ex.outcome = "malformed"
                break
            if ex.sentinel is not None and any(_corr(r) == ex.sentinel for r in ex.responses):
                ex.outcome = "answered"
                break
    finally:
        sock.close()
    _judge(ex, parkable)
    return ex


def _corr(frame: bytes) -> int | None:
    return struct.unpack_from(">i", frame)[0] if len(frame) >= 4 else None


def _judge(ex: Exchange, parkable: bool) -> None:
    """Match responses to requests in order and decide whether the outcome is acceptable."""
    i = 0  # next frame that may be answered
    for resp in ex.responses:
        corr = _corr(resp)
        while i < len(ex.routed) and not (
            ex.routed[i].kind in ("answer", "request") and ex.routed[i].correlation_id == corr
        ):
            if ex.outcome == "answered" and _expects_answer(ex.routed[i]):
                ex.problems.append(f"no response to frame {i} ({_describe(ex.routed[i])})")
            i += 1
        if i == len(ex.routed):
            ex.problems.append(f"response with correlation id {corr} answers no request (or out of order)")
            break
        why = _check_response(ex, ex.routed[i], resp)
        if why:
            ex.problems.append(f"frame {i}: {why}")
        i += 1
    first_close = next((j for j, r in enumerate(ex.routed) if r.kind == "close"), None)
    if ex.outcome == "answered" and first_close is not None:
        ex.problems.append(
            f"frame {first_close} should have closed the connection ({ex.routed[first_close].why}) "
            "but the broker answered requests after it"
        )
    if ex.outcome == "waiting" and not (parkable or ex.incomplete):
        ex.problems.append("no answer and no close within the timeout (hang)")


def _describe(r: Routed) -> str:
    if r.api_key in APIS:
        return f"{r.kind} {APIS[r.api_key].name} v{r.version} corr {r.correlation_id}"
    return f"{r.kind} key {r.api_key} v{r.version} {r.why}"


def report(ex: Exchange, stream: bytes) -> str:
    lines = [f"outcome {ex.outcome}; problems: {ex.problems}", f"stream: {stream.hex()}"]
    lines += [f"  frame {i}: {_describe(r)} {r.why}" for i, r in enumerate(ex.routed)]
    return "\n".join(lines)


class Bystander(threading.Thread):
    """A well-behaved client sending ApiVersions + Metadata in a loop on its own connection."""

    def __init__(self, port: int, ranges: list[tuple[int, int, int]]):
        super().__init__(name="bystander", daemon=True)
        self.port = port
        self.ranges = ranges
        self.stop = threading.Event()
        self.rounds = 0
        self.failures: list[str] = []

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                with WireClient(self.port, timeout=10) as c:
                    while not self.stop.is_set():
                        av = c.call(API_VERSIONS, 3, ApiVersionsRequest("bystander", "1.0"))
                        got = [(k.api_key, k.min_version, k.max_version) for k in av.api_keys]
                        if av.error_code != 0 or got != self.ranges:
                            self.failures.append(f"ApiVersions answered {av!r}")
                        md = c.call(METADATA, 12, MetadataRequest(topics=[], allow_auto_topic_creation=False))
                        if len(md.brokers) != 1 or md.topics or md.cluster_id is None:
                            self.failures.append(f"Metadata answered {md!r}")
                        self.rounds += 1
                        self.stop.wait(0.005)
            except Exception as e:  # noqa: BLE001 - any failure of the bystander is a finding
                self.failures.append(f"{type(e).__name__}: {e}")
                self.stop.wait(0.1)


@contextmanager
def bystander(bt: Any) -> Iterator[Bystander]:
    b = Bystander(bt.port, bt.broker.registry.ranges())
    b.start()
    try:
        yield b
    finally:
        b.stop.set()
        b.join(15)
    assert not b.failures, f"the bystander client saw failures: {b.failures[:5]}"
    assert b.rounds > 0, "the bystander client never got an answer"


#: Log lines that mean the broker hit a bug rather than bad input.
_SUSPICIOUS = re.compile(
    r"unexpected error|handler failed|internal error|cannot encode|v\d+ failed(?!.*acks=0)"
)


def broker_problems(records: list[logging.LogRecord]) -> list[str]:
    out = []
    for r in records:
        if not (r.name.startswith("broker") or r.name == "asyncio"):
            continue
        msg = r.getMessage()
        if r.exc_info or r.levelno >= logging.ERROR or _SUSPICIOUS.search(msg):
            text = f"{r.levelname} {r.name}: {msg}"
            if r.exc_info:
                text += "\n" + logging.Formatter().formatException(r.exc_info)
            out.append(text)
    return out


def assert_clean_log(caplog: pytest.LogCaptureFixture) -> None:
    problems = broker_problems(caplog.records)
    assert not problems, "the broker logged errors:\n" + "\n\n".join(problems[:5])


def _stream(parts: list[tuple[bytes, int | None]]) -> bytes:
    out = b""
    for body, size in parts:
        out += struct.pack(">i", len(body) if size is None else size) + body
    return out


#: Size prefixes: the right one (None), a little off either way, negative, above the cap.
size_prefixes = st.one_of(
    st.none(),
    st.none(),
    st.integers(0, 64),
    st.integers(-(2**31), -1),
    st.integers(104857601, 2**31 - 1),
)


@st.composite
def fuzz_streams(draw: Any, frames: st.SearchStrategy[bytes] = any_frame) -> bytes:
    parts = draw(st.lists(st.tuples(frames, size_prefixes), min_size=1, max_size=3))
    parts = [
        (body, size if size is None or size < 0 or size > 64 else len(body) + size - 32)
        for body, size in parts
    ]
    return _stream(parts)


@dataclass
class Guarded:
    """A broker under fuzzing: its bystander client, and counts of outcomes for the summary."""

    bt: Any
    bystander: Bystander
    outcomes: dict[str, int] = field(default_factory=dict)
    layer: str = "tcp"  # what the frames count as in the per-API summary

    @property
    def port(self) -> int:
        return self.bt.port

    def run(self, stream: bytes, caplog: pytest.LogCaptureFixture, park_timeout: float = 0.5) -> Exchange:
        if currently_in_test_context():  # under hypothesis (failures report the stream anyway)
            note(f"stream ({len(stream)} bytes): {stream.hex()}")
        start = len(caplog.records)
        ex = exchange(
            self.port,
            stream,
            self.bt.config["socket.request.max.bytes"],
            park_timeout=park_timeout,
            layer=self.layer,
        )
        self.outcomes[ex.outcome] = self.outcomes.get(ex.outcome, 0) + 1
        assert not ex.problems, report(ex, stream)
        problems = broker_problems(caplog.records[start:])
        assert not problems, (
            "the broker logged errors:\n" + "\n\n".join(problems[:3]) + "\n" + report(ex, stream)
        )
        return ex


@contextmanager
def guarded(bt: Any, caplog: pytest.LogCaptureFixture) -> Iterator[Guarded]:
    """Run a bystander client against ``bt`` meanwhile; afterwards check it and the broker's log."""
    caplog.set_level(logging.WARNING, logger="broker")
    with bystander(bt) as by:
        g = Guarded(bt, by)
        yield g
    print(f"outcomes: {g.outcomes}; bystander rounds: {by.rounds}")
    assert_clean_log(caplog)


# ============================================================================ allocation


def peak_of(fn: Any, *args: Any) -> int:
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    fn(*args)
    return tracemalloc.get_traced_memory()[1] - base


@functools.cache
def _decode_paths_loaded() -> None:
    """Load every API's handler module and codec (``Api.load``: otherwise on the API's first request)
    and decode a header-only frame and a valid sample of every served version once. A peak measured
    afterwards is then the decode's own, never a module import's (the Produce handler alone imports
    the log, the compression codecs and ctypes: over 1 MiB) -- the same whichever tests ran before in
    this process, alone, in another order or on another xdist worker."""
    for api in REGISTRY.apis.values():
        api.load()
    for key, version in SERVED:
        route(header_bytes(key, version))
        route(sample_frame(key, version, False, 0))


@contextmanager
def traced() -> Iterator[None]:
    """Trace allocations (for ``peak_of``), with the decode paths loaded before tracing starts."""
    _decode_paths_loaded()
    tracemalloc.start()
    try:
        yield
    finally:
        tracemalloc.stop()
