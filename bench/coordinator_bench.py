"""Group coordinator benchmark: Heartbeat and OffsetCommit rates through the whole broker stack against a
bare uvloop echo server, and the time a 100-member group takes to get from its last JoinGroup to its
last SyncGroup answer.

    python bench/coordinator_bench.py [--seconds 5] [--warmup 1] [--rounds 3] [--flush interval,always]
                                      [--parts heartbeat,commit,rebalance] [--groups 100] [--members 10]
                                      [--inflight 5] [--load-procs 1] [--rebalance-members 100]
                                      [--rebalance-groups 5] [--session-timeout-ms 600000] [--no-pin]
                                      [--broker-config K=V] [--broker-root DIR] [--baseline-root DIR]
                                      [--commit-partitions 1,10]

For each ``log.flush`` mode of ``--flush`` (in order) our broker runs as a subprocess (``python -m broker
serve --config group.initial.rebalance.delay.ms=0 --config log.flush=MODE``, temp data dir);
bench/echo_server.py runs once for the whole run. Then:

Setup (not timed): a topic with ``--members`` partitions (CreateTopics); ``--groups`` classic groups of
``--members`` members each, formed like real consumers would: every member on its own connection,
JoinGroup v9 (MEMBER_ID_REQUIRED, then again with the id), SyncGroup v5 (the leader assigns member k
partition k), and -- should the broker close the join phase before everyone is in -- heartbeats and
rejoins until all members of the group are synced in one generation. Session timeouts are long
(``--session-timeout-ms``), so nobody expires during the run. Each member's Heartbeat v4 and OffsetCommit
v9 (its own partition, its generation) are then sent once and must answer error 0; those answers are
the bytes every later answer is checked against.

1. Heartbeats (first flush mode only: a heartbeat writes nothing): one connection per group (100),
   each keeping ``--inflight`` heartbeats outstanding, round-robin over its group's members, vs the
   echo server fed the very same request frames. Bar: heartbeats/s >= 0.5 x echo round trips/s.
2. Offset commits, same load shape, per flush mode and per ``--commit-partitions`` width (each member
   commits its own partition and the next ones): requests/s, committed partitions/s, the broker's CPU
   per request, and the ratio to echo round trips/s of the same commit frames (no bar: a commit waits
   for its flush). With ``--baseline-root`` (another checkout, e.g. ``git worktree add`` of the base
   commit) its broker runs the same commit workloads first, in the same run, and the ratios to it are
   printed (issue 19's goal: >= 100k partitions/s at 10 partitions, >= 50k requests/s at 1).
3. Rebalance (per flush mode): ``--rebalance-members`` members of a new group, each on its own
   connection, get their member ids (JoinGroup, MEMBER_ID_REQUIRED); then all rejoin at once, every
   member sends SyncGroup as soon as its JoinGroup answer arrives (the leader with assignments for
   all). Timed on the client from writing the last JoinGroup to reading the last SyncGroup answer, over
   ``--rebalance-groups`` groups; best and median printed. Bar: median < 50 ms. With the initial
   rebalance delay at 0 the broker may close the join phase before the last member's JoinGroup has
   been read (as Kafka would); such a "split" group is reported and replaced by a new one.

The load generators are separate processes (multiprocessing, a uvloop ``asyncio.Protocol`` client, as
in bench/transport_bench.py); every response is checked (size, correlation id in order, and the same
bytes as the member's verified answer: anything else counts as an error, decoded in the report). The
broker and the echo server run pinned to the first CPU and the load generators (and this process) to
the others unless ``--no-pin``. Rates are the best of ``--rounds`` runs, broker and echo alternating.
Exit status 1 if a bar is missed, 2 if the benchmark itself fails (errors, lost connections, timeouts).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from struct import Struct
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from transport_bench import free_port, machine_busy, probe, proc_cpu, start, stop

_CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_user_sys(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of ``pid`` (all its threads) so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / _CLK_TCK, int(fields[12]) / _CLK_TCK


from broker.protocol.errors import ErrorCode
from broker.protocol.generated import APIS, codec, request_header
from broker.protocol.generated.consumer_group_describe import ConsumerGroupDescribeRequest
from broker.protocol.generated.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatRequestTopicPartitions,
)
from broker.protocol.generated.create_topics import CreatableTopic, CreateTopicsRequest
from broker.protocol.generated.heartbeat import HeartbeatRequest
from broker.protocol.generated.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from broker.protocol.generated.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from broker.protocol.generated.sync_group import SyncGroupRequest, SyncGroupRequestAssignment

HEARTBEAT_BAR = 0.5
REBALANCE_BAR_MS = 50.0

JOIN, SYNC, HEARTBEAT, COMMIT, CREATE_TOPICS = 11, 14, 12, 8, 19
CG_HEARTBEAT, CG_DESCRIBE = 68, 69
VERSIONS = {JOIN: 9, SYNC: 5, HEARTBEAT: 4, COMMIT: 9, CREATE_TOPICS: 5, CG_HEARTBEAT: 1, CG_DESCRIBE: 1}
CG_REBALANCE_TIMEOUT_MS = 60_000
CLASSIC_PARTS = {"heartbeat", "commit", "rebalance"}
CONSUMER_PARTS = {"consumer-heartbeat", "consumer-rebalance"}
PROTOCOL_TYPE = "consumer"
ASSIGNOR = "range"
COMMITTED_OFFSET = 4242
REQUEST_TIMEOUT = 30.0

_SIZE = Struct(">i")
_I16 = Struct(">h")
_I32 = Struct(">i")


class BenchError(Exception):
    """The benchmark cannot go on (the broker misbehaved, timed out, or is not reachable)."""


def err_name(code: int) -> str:
    try:
        return f"{ErrorCode(code).name} ({code})"
    except ValueError:
        return str(code)


# ---------------------------------------------------------------------------------------- wire


def request_frame(api_key: int, body: Any, correlation_id: int = 0, client_id: str = "coord-bench") -> bytes:
    """A complete request frame (size prefix included) from our generated codecs."""
    version = VERSIONS[api_key]
    hdr = request_header.RequestHeader(api_key, version, correlation_id, client_id)
    head = (
        request_header.encode_v2(hdr) if APIS[api_key].is_flexible(version) else request_header.encode_v1(hdr)
    )
    payload = head + codec(api_key).REQUEST_ENCODERS[version](body)
    return _SIZE.pack(len(payload)) + payload


def decode_response(api_key: int, payload: bytes) -> Any:
    """The decoded body of a response payload (size prefix stripped, correlation id first)."""
    version = VERSIONS[api_key]
    pos = 5 if APIS[api_key].is_flexible(version) else 4
    resp, end = codec(api_key).RESPONSE_DECODERS[version](payload, pos)
    if end != len(payload):
        raise BenchError(f"{APIS[api_key].name} v{version}: {len(payload) - end} trailing response bytes")
    return resp


def subscription(topic: str) -> bytes:
    """ConsumerProtocolSubscription v0: one topic, no user data."""
    name = topic.encode()
    return _I16.pack(0) + _I32.pack(1) + _I16.pack(len(name)) + name + _I32.pack(-1)


def assignment(topic: str, partitions: list[int]) -> bytes:
    """ConsumerProtocolAssignment v0: these partitions of one topic, no user data."""
    name = topic.encode()
    parts = b"".join(_I32.pack(p) for p in partitions)
    return (
        _I16.pack(0) + _I32.pack(1) + _I16.pack(len(name)) + name + _I32.pack(len(partitions)) + parts
    ) + _I32.pack(-1)


def assigned_partitions(data: bytes) -> list[int]:
    pos = 2 + 4
    (n,) = _I16.unpack_from(data, pos)
    pos += 2 + n
    (count,) = _I32.unpack_from(data, pos)
    return [_I32.unpack_from(data, pos + 4 + 4 * i)[0] for i in range(count)]


class Conn(asyncio.Protocol):
    """A client connection for setup and the rebalance timing: requests may be pipelined, responses
    are matched in order by correlation id and decoded."""

    def __init__(self, label: str):
        self.label = label
        self.transport: asyncio.Transport | None = None
        self.buf = b""
        self.pending: deque[tuple[asyncio.Future, int, int]] = deque()
        self.next_id = 1
        self.lost: Exception | None = None
        #: when a list: every answer payload is kept here too, in order
        self.raw: list[bytes] | None = None

    @classmethod
    async def open(cls, port: int, label: str) -> Conn:
        loop = asyncio.get_running_loop()
        try:
            _t, conn = await asyncio.wait_for(
                loop.create_connection(lambda: cls(label), "127.0.0.1", port), REQUEST_TIMEOUT
            )
        except (OSError, TimeoutError) as e:
            raise BenchError(f"{label}: cannot connect to 127.0.0.1:{port}: {e!r}") from e
        return conn

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = ConnectionError(f"{self.label}: the broker closed the connection ({exc!r})")
        while self.pending:
            fut, _k, _c = self.pending.popleft()
            if not fut.done():
                fut.set_exception(self.lost)

    def data_received(self, data: bytes) -> None:
        buf = self.buf + data if self.buf else data
        pos, end = 0, len(buf)
        while end - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            stop = pos + 4 + size
            if stop > end:
                break
            payload = buf[pos + 4 : stop]
            pos = stop
            if self.raw is not None:
                self.raw.append(payload)
            if not self.pending:
                self.transport.abort()
                return
            fut, api_key, corr = self.pending.popleft()
            if fut.done():  # timed out meanwhile
                continue
            try:
                (got,) = _I32.unpack_from(payload, 0)
                if got != corr:
                    raise BenchError(f"{self.label}: correlation id {got}, expected {corr}")
                fut.set_result(decode_response(api_key, payload))
            except Exception as e:
                fut.set_exception(e if isinstance(e, BenchError) else BenchError(f"{self.label}: {e!r}"))
        self.buf = buf[pos:]

    def frame(self, api_key: int, body: Any) -> tuple[bytes, int]:
        corr = self.next_id
        self.next_id += 1
        return request_frame(api_key, body, corr), corr

    def send_frame(self, api_key: int, frame: bytes, corr: int) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        if self.lost is not None:
            fut.set_exception(self.lost)
            return fut
        self.pending.append((fut, api_key, corr))
        self.transport.write(frame)
        return fut

    def send(self, api_key: int, body: Any) -> asyncio.Future:
        frame, corr = self.frame(api_key, body)
        return self.send_frame(api_key, frame, corr)

    async def call(self, api_key: int, body: Any, timeout: float = REQUEST_TIMEOUT) -> Any:
        return await self.wait(self.send(api_key, body), api_key, timeout)

    async def wait(self, fut: asyncio.Future, api_key: int, timeout: float = REQUEST_TIMEOUT) -> Any:
        try:
            return await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            raise BenchError(f"{self.label}: no {APIS[api_key].name} answer within {timeout:g} s") from None

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


async def gather_all(coros: Any) -> list:
    """``asyncio.gather``, but the first failure cancels (and waits for) the others, so nothing is left
    running or unretrieved when the error is reported."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


# ---------------------------------------------------------------------------------------- setup


@dataclass
class Group:
    group_id: str
    generation: int = -1
    #: (member id, partition) in member order
    members: list[tuple[str, int]] = field(default_factory=list)


def join_request(group_id: str, member_id: str, meta: bytes, session_ms: int, rebalance_ms: int) -> Any:
    return JoinGroupRequest(
        group_id=group_id,
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        member_id=member_id,
        group_instance_id=None,
        protocol_type=PROTOCOL_TYPE,
        protocols=[JoinGroupRequestProtocol(ASSIGNOR, meta)],
        reason=None,
    )


def sync_request(group_id: str, generation: int, member_id: str, assignments: list) -> Any:
    return SyncGroupRequest(
        group_id=group_id,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=None,
        protocol_type=PROTOCOL_TYPE,
        protocol_name=ASSIGNOR,
        assignments=assignments,
    )


def leader_assignments(topic: str, nparts: int, members: list) -> list:
    """Member k (in the order the broker listed them) gets partition k, when there is one."""
    return [
        SyncGroupRequestAssignment(m.member_id, assignment(topic, [k] if k < nparts else []))
        for k, m in enumerate(members)
    ]


async def create_topic(port: int, topic: str, partitions: int) -> None:
    conn = await Conn.open(port, "CreateTopics")
    try:
        req = CreateTopicsRequest(
            topics=[CreatableTopic(name=topic, num_partitions=partitions, replication_factor=1)],
            timeout_ms=10000,
            validate_only=False,
        )
        resp = await conn.call(CREATE_TOPICS, req)
        code = resp.topics[0].error_code
        if code not in (0, ErrorCode.TOPIC_ALREADY_EXISTS):
            raise BenchError(f"CreateTopics {topic}: {err_name(code)} {resp.topics[0].error_message}")
    finally:
        conn.close()


async def form_group(port: int, group_id: str, n: int, topic: str, nparts: int, args: Any) -> Group:
    """Get ``n`` members of ``group_id`` synced in one generation, as consumers would: join (twice:
    MEMBER_ID_REQUIRED), sync, and on REBALANCE_IN_PROGRESS (from SyncGroup or a heartbeat) rejoin."""
    meta = subscription(topic)
    conns = [await Conn.open(port, f"group {group_id} member {i}") for i in range(n)]
    synced: dict[int, tuple[int, str, bytes]] = {}
    done = asyncio.Event()
    deadline = time.monotonic() + args.setup_timeout

    def check_done() -> None:
        if len(synced) == n and len({g for g, _m, _a in synced.values()}) == 1:
            done.set()

    async def member(i: int, conn: Conn) -> tuple[int, str, bytes]:
        member_id = ""
        while True:
            if time.monotonic() > deadline:
                raise BenchError(f"group {group_id}: not formed within {args.setup_timeout:g} s")
            jr = await conn.call(
                JOIN,
                join_request(group_id, member_id, meta, args.session_timeout_ms, args.rebalance_timeout_ms),
            )
            if jr.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                member_id = jr.member_id
                continue
            if jr.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                member_id = ""
                synced.pop(i, None)
                continue
            if jr.error_code:
                raise BenchError(f"{conn.label}: JoinGroup failed: {err_name(jr.error_code)}")
            member_id, generation = jr.member_id, jr.generation_id
            assignments = leader_assignments(topic, nparts, jr.members) if jr.leader == member_id else []
            sr = await conn.call(SYNC, sync_request(group_id, generation, member_id, assignments))
            if sr.error_code == ErrorCode.REBALANCE_IN_PROGRESS:
                continue
            if sr.error_code:
                raise BenchError(f"{conn.label}: SyncGroup failed: {err_name(sr.error_code)}")
            synced[i] = (generation, member_id, bytes(sr.assignment))
            check_done()
            rejoin = False
            while not done.is_set():
                try:
                    await asyncio.wait_for(done.wait(), 0.05)
                    break
                except TimeoutError:
                    pass
                hb = await conn.call(HEARTBEAT, HeartbeatRequest(group_id, generation, member_id, None))
                if hb.error_code == ErrorCode.REBALANCE_IN_PROGRESS:
                    rejoin = True
                    break
                if hb.error_code:
                    raise BenchError(f"{conn.label}: Heartbeat failed: {err_name(hb.error_code)}")
                if time.monotonic() > deadline:
                    raise BenchError(f"group {group_id}: not formed within {args.setup_timeout:g} s")
            if not rejoin:
                return synced[i]

    try:
        results = await gather_all(member(i, c) for i, c in enumerate(conns))
    finally:
        for c in conns:
            c.close()
    generation = results[0][0]
    group = Group(group_id, generation)
    for _gen, member_id, data in results:
        parts = assigned_partitions(data)
        if len(parts) != 1:
            raise BenchError(
                f"group {group_id}: member {member_id} was assigned {parts}, expected one partition"
            )
        group.members.append((member_id, parts[0]))
    return group


async def verify(port: int, api_key: int, frames: list[list[bytes]], expect_ok: Any) -> list[list[bytes]]:
    """Send every frame once (one connection per group, pipelined), check each answer with
    ``expect_ok(decoded)`` (an error message or None); return the answer payloads."""

    async def one(g: int, group_frames: list[bytes]) -> list[bytes]:
        conn = await Conn.open(port, f"verify group {g}")
        raw: list[bytes] = []
        conn.raw = raw
        try:
            futs = [conn.send_frame(api_key, f, 0) for f in group_frames]
            for k, fut in enumerate(futs):
                resp = await conn.wait(fut, api_key)
                problem = expect_ok(resp)
                if problem:
                    raise BenchError(f"{APIS[api_key].name} of group {g} member {k}: {problem}")
            return raw
        finally:
            conn.close()

    return await gather_all(one(g, fs) for g, fs in enumerate(frames))


def hb_ok(resp: Any) -> str | None:
    return None if resp.error_code == 0 else f"error {err_name(resp.error_code)}"


def commit_ok(resp: Any) -> str | None:
    codes = [p.error_code for t in resp.topics for p in t.partitions]
    return None if codes and not any(codes) else f"errors {[err_name(c) for c in codes]}"


@dataclass
class Workload:
    name: str
    api_key: int
    #: per connection: [(request frame with correlation id 0, verified answer payload)]
    per_conn: list[list[tuple[bytes, bytes]]]

    def specs(self, echo: bool) -> list[list[tuple[bytes, bytes, tuple]]]:
        """Per connection, per request: (pre, post, check) where request(c) = pre + pack(c) + post and
        check = (payload length, correlation id offset, payload head, payload tail)."""
        out = []
        for conn in self.per_conn:
            rows = []
            for frame, answer in conn:
                payload = frame[4:]
                if echo:
                    check = (len(payload), 4, payload[:4], payload[8:])
                else:
                    check = (len(answer), 0, b"", answer[4:])
                rows.append((frame[:8], frame[12:], check))
            out.append(rows)
        return out


def commit_frames_for(groups: list[Group], topic: str, nparts: int, width: int) -> list[list[bytes]]:
    """Per group, per member: an OffsetCommit of ``width`` partitions, the member's own first and
    then the next ones round the topic (Kafka does not check what a member commits against its
    assignment)."""
    return [
        [
            request_frame(
                COMMIT,
                OffsetCommitRequest(
                    group_id=g.group_id,
                    generation_id_or_member_epoch=g.generation,
                    member_id=m,
                    group_instance_id=None,
                    topics=[
                        OffsetCommitRequestTopic(
                            name=topic,
                            partitions=[
                                OffsetCommitRequestPartition(
                                    partition_index=(p + k) % nparts,
                                    committed_offset=COMMITTED_OFFSET,
                                    committed_leader_epoch=-1,
                                    committed_metadata="",
                                )
                                for k in range(width)
                            ],
                        )
                    ],
                ),
            )
            for m, p in g.members
        ]
        for g in groups
    ]


async def setup(port: int, args: Any, topic: str) -> tuple[list[Group], Workload, dict[int, Workload]]:
    """The groups, the heartbeat workload, and a commit workload per ``--commit-partitions`` width."""
    await create_topic(port, topic, args.members)
    sem = asyncio.Semaphore(args.setup_concurrency)

    async def formed(g: int) -> Group:
        async with sem:
            return await form_group(port, f"bench-group-{g}", args.members, topic, args.members, args)

    groups = await gather_all(formed(g) for g in range(args.groups))
    hb_frames = [
        [request_frame(HEARTBEAT, HeartbeatRequest(g.group_id, g.generation, m, None)) for m, _p in g.members]
        for g in groups
    ]
    hb_answers = await verify(port, HEARTBEAT, hb_frames, hb_ok)
    hb = Workload(
        "heartbeat",
        HEARTBEAT,
        [list(zip(f, a, strict=True)) for f, a in zip(hb_frames, hb_answers, strict=True)],
    )
    commits = {}
    for width in args.commit_partitions:
        frames = commit_frames_for(groups, topic, args.members, width)
        answers = await verify(port, COMMIT, frames, commit_ok)
        commits[width] = Workload(
            "commit",
            COMMIT,
            [list(zip(f, a, strict=True)) for f, a in zip(frames, answers, strict=True)],
        )
    return groups, hb, commits


# ---------------------------------------------------------------------------------------- rebalance timing


class Split(Exception):
    pass


async def timed_rebalance(port: int, group_id: str, n: int, topic: str, nparts: int, args: Any) -> float:
    """Milliseconds from writing the last (second) JoinGroup to reading the last SyncGroup answer."""
    meta = subscription(topic)
    conns = [await Conn.open(port, f"{group_id} member {i}") for i in range(n)]
    try:
        first = await gather_all(
            c.call(JOIN, join_request(group_id, "", meta, args.session_timeout_ms, args.rebalance_timeout_ms))
            for c in conns
        )
        for c, r in zip(conns, first, strict=True):
            if r.error_code != ErrorCode.MEMBER_ID_REQUIRED:
                raise BenchError(
                    f"{c.label}: first JoinGroup: {err_name(r.error_code)}, expected MEMBER_ID_REQUIRED"
                )
        frames = [
            c.frame(
                JOIN,
                join_request(group_id, r.member_id, meta, args.session_timeout_ms, args.rebalance_timeout_ms),
            )
            for c, r in zip(conns, first, strict=True)
        ]
        futs = [c.send_frame(JOIN, f, corr) for c, (f, corr) in zip(conns, frames, strict=True)]
        t0 = time.perf_counter()

        async def member(i: int) -> tuple[float, Any, Any, bytes]:
            conn = conns[i]
            jr = await conn.wait(futs[i], JOIN)
            if jr.error_code:
                raise BenchError(f"{conn.label}: JoinGroup: {err_name(jr.error_code)}")
            assignments = []
            if jr.leader == jr.member_id:
                if len(jr.members) < n:
                    raise Split(len(jr.members))
                assignments = leader_assignments(topic, nparts, jr.members)
            sr = await conn.call(SYNC, sync_request(group_id, jr.generation_id, jr.member_id, assignments))
            return time.perf_counter(), jr, sr, assignments

        results = await gather_all(member(i) for i in range(n))
        t1 = max(r[0] for r in results)
        gens = {jr.generation_id for _t, jr, _s, _a in results}
        if len(gens) != 1:
            raise Split(-1)
        expected = {a.member_id: bytes(a.assignment) for _t, _j, _s, al in results for a in al}
        for _t, jr, sr, _a in results:
            if sr.error_code == ErrorCode.REBALANCE_IN_PROGRESS:
                raise Split(-1)
            if sr.error_code:
                raise BenchError(f"{group_id}: SyncGroup of {jr.member_id}: {err_name(sr.error_code)}")
            if bytes(sr.assignment) != expected.get(jr.member_id):
                raise BenchError(
                    f"{group_id}: member {jr.member_id} got another assignment than the leader's"
                )
        return (t1 - t0) * 1000
    finally:
        for c in conns:
            c.close()


async def rebalance_series(
    port: int, args: Any, topic: str, nparts: int, tag: str
) -> tuple[list[float], list]:
    times: list[float] = []
    splits: list[int] = []
    attempt = 0
    while len(times) < args.rebalance_groups:
        if attempt >= args.rebalance_groups + args.rebalance_retries:
            break
        group_id = f"bench-rebalance-{tag}-{attempt}"
        attempt += 1
        try:
            times.append(await timed_rebalance(port, group_id, args.rebalance_members, topic, nparts, args))
        except Split as s:
            splits.append(s.args[0])
        await asyncio.sleep(0.2)  # let the broker settle (closed connections, logging)
    return times, splits


# ---------------------------------------------------------------------------------------- KIP-848


def cg_request(group_id: str, member_id: str, epoch: int, owned: dict, topic: str | None = None) -> Any:
    """ConsumerGroupHeartbeat v1: a join (epoch 0: subscription and rebalance timeout, no owned
    partitions) or a heartbeat carrying the member's epoch and everything it owns."""
    joining = epoch == 0
    return ConsumerGroupHeartbeatRequest(
        group_id=group_id,
        member_id=member_id,
        member_epoch=epoch,
        rebalance_timeout_ms=CG_REBALANCE_TIMEOUT_MS if joining else -1,
        subscribed_topic_names=[topic] if joining else None,
        topic_partitions=[
            ConsumerGroupHeartbeatRequestTopicPartitions(t, sorted(ps)) for t, ps in sorted(owned.items())
        ],
    )


class CgMember:
    """A KIP-848 consumer as the coordinator sees it: it adopts every assignment it is sent (revoking
    at once) and reports what it owns on its next heartbeat."""

    __slots__ = ("member_id", "epoch", "owned")

    def __init__(self) -> None:
        self.member_id = str(uuid.uuid4())
        self.epoch = 0
        self.owned: dict = {}

    def apply(self, resp: Any, label: str) -> bool:
        """Take a response in; True when the member's epoch or assignment changed."""
        if resp.error_code:
            raise BenchError(
                f"{label}: ConsumerGroupHeartbeat: {err_name(resp.error_code)} {resp.error_message}"
            )
        changed = resp.member_epoch != self.epoch
        self.epoch = resp.member_epoch
        if resp.assignment is not None:
            owned = {
                tp.topic_id: frozenset(tp.partitions)
                for tp in resp.assignment.topic_partitions
                if tp.partitions
            }
            changed = changed or owned != self.owned
            self.owned = owned
        return changed


async def create_topics(port: int, names: list[str], partitions: int) -> None:
    conn = await Conn.open(port, "CreateTopics")
    try:
        req = CreateTopicsRequest(
            topics=[CreatableTopic(name=n, num_partitions=partitions, replication_factor=1) for n in names],
            timeout_ms=30000,
            validate_only=False,
        )
        resp = await conn.call(CREATE_TOPICS, req)
        for t in resp.topics:
            if t.error_code not in (0, ErrorCode.TOPIC_ALREADY_EXISTS):
                raise BenchError(f"CreateTopics {t.name}: {err_name(t.error_code)} {t.error_message}")
    finally:
        conn.close()


async def cg_describe(conn: Conn, group_id: str) -> Any:
    resp = await conn.call(CG_DESCRIBE, ConsumerGroupDescribeRequest(group_ids=[group_id]))
    g = resp.groups[0]
    if g.error_code:
        raise BenchError(f"ConsumerGroupDescribe {group_id}: {err_name(g.error_code)} {g.error_message}")
    return g


def cg_stable(g: Any, members: list[CgMember]) -> bool:
    """Stable at the group epoch, every member at it and owning exactly what the coordinator says."""
    if g.group_state != "Stable" or g.assignment_epoch != g.group_epoch or len(g.members) != len(members):
        return False
    described = {
        m.member_id: (
            m.member_epoch,
            {tp.topic_id: frozenset(tp.partitions) for tp in m.assignment.topic_partitions if tp.partitions},
        )
        for m in g.members
    }
    return all(described.get(m.member_id) == (g.group_epoch, m.owned) for m in members)


async def cg_settle(port: int, group_id: str, n: int, topic: str, args: Any) -> list[CgMember]:
    """``n`` members join ``group_id`` and heartbeat (one connection, in turn) until the group is Stable."""
    conn = await Conn.open(port, f"consumer group {group_id}")
    members = [CgMember() for _ in range(n)]
    deadline = time.monotonic() + args.setup_timeout
    try:
        joins = [conn.send(CG_HEARTBEAT, cg_request(group_id, m.member_id, 0, {}, topic)) for m in members]
        for m, fut in zip(members, joins, strict=True):
            m.apply(await conn.wait(fut, CG_HEARTBEAT), f"{group_id} {m.member_id}")
        while not cg_stable(await cg_describe(conn, group_id), members):
            if time.monotonic() > deadline:
                raise BenchError(f"consumer group {group_id}: not Stable within {args.setup_timeout:g} s")
            for m in members:
                resp = await conn.call(CG_HEARTBEAT, cg_request(group_id, m.member_id, m.epoch, m.owned))
                m.apply(resp, f"{group_id} {m.member_id}")
        return members
    finally:
        conn.close()


async def cg_setup(port: int, args: Any) -> Workload:
    """Topics (one per group), settled groups, and each member's steady-state heartbeat verified."""
    topics = [f"cg-bench-topic-{g}" for g in range(args.groups)]
    await create_topics(port, topics, args.consumer_partitions)
    sem = asyncio.Semaphore(args.setup_concurrency)

    async def settled(g: int) -> list[CgMember]:
        async with sem:
            return await cg_settle(port, f"cg-bench-group-{g}", args.members, topics[g], args)

    groups = await gather_all(settled(g) for g in range(args.groups))
    frames = [
        [
            request_frame(CG_HEARTBEAT, cg_request(f"cg-bench-group-{g}", m.member_id, m.epoch, m.owned))
            for m in ms
        ]
        for g, ms in enumerate(groups)
    ]

    def steady(resp: Any) -> str | None:
        if resp.error_code:
            return f"error {err_name(resp.error_code)}"
        if resp.assignment is not None:
            return "a settled member was sent a new assignment"
        return None

    answers = await verify(port, CG_HEARTBEAT, frames, steady)
    return Workload(
        "consumer heartbeat",
        CG_HEARTBEAT,
        [list(zip(f, a, strict=True)) for f, a in zip(frames, answers, strict=True)],
    )


async def cg_timed_rebalance(port: int, group_id: str, n: int, topic: str, args: Any) -> float:
    """Milliseconds from writing ``n`` joins (epoch 0, each member on its own connection) to the
    response after which every member is at the group epoch, owning its target: then the group is
    Stable, which ConsumerGroupDescribe confirms (untimed)."""
    conns = [await Conn.open(port, f"{group_id} member {i}") for i in range(n)]
    members = [CgMember() for _ in range(n)]
    poll = args.consumer_poll_ms / 1000
    done = asyncio.Event()
    t1 = 0.0
    nparts = args.consumer_partitions

    def converged() -> bool:
        top = max(m.epoch for m in members)
        if any(m.epoch != top for m in members):
            return False
        # all at the newest epoch, so nobody is revoking; owned partitions are within each
        # member's target, so when they cover every partition each member owns its whole target
        return sum(len(ps) for m in members for ps in m.owned.values()) == nparts

    try:
        futs = [
            c.send(CG_HEARTBEAT, cg_request(group_id, m.member_id, 0, {}, topic))
            for c, m in zip(conns, members, strict=True)
        ]
        t0 = time.perf_counter()

        async def member(i: int) -> None:
            nonlocal t1
            conn, m = conns[i], members[i]
            changed = m.apply(await conn.wait(futs[i], CG_HEARTBEAT), conn.label)
            while True:
                if not done.is_set() and converged():
                    t1 = time.perf_counter()
                    done.set()
                if done.is_set():
                    return
                if not changed:  # waiting for others to release: heartbeat again shortly
                    try:
                        await asyncio.wait_for(done.wait(), poll)
                        return
                    except TimeoutError:
                        pass
                resp = await conn.call(CG_HEARTBEAT, cg_request(group_id, m.member_id, m.epoch, m.owned))
                changed = m.apply(resp, conn.label)

        await asyncio.wait_for(gather_all(member(i) for i in range(n)), args.setup_timeout)
        elapsed = (t1 - t0) * 1000
        g = await cg_describe(conns[0], group_id)
        if not cg_stable(g, members):
            raise BenchError(
                f"{group_id}: the members converged but ConsumerGroupDescribe says {g.group_state} "
                f"(group epoch {g.group_epoch}, assignment epoch {g.assignment_epoch})"
            )
        return elapsed
    except TimeoutError:
        raise BenchError(f"{group_id}: not Stable within {args.setup_timeout:g} s") from None
    finally:
        for c in conns:
            c.close()


async def cg_rebalance_series(port: int, args: Any, tag: str) -> list[float]:
    topic = f"cg-bench-rebalance-{tag}"
    await create_topics(port, [topic], args.consumer_partitions)
    times = []
    for k in range(args.rebalance_groups):
        times.append(
            await cg_timed_rebalance(
                port, f"cg-bench-rebalance-{tag}-{k}", args.rebalance_members, topic, args
            )
        )
        await asyncio.sleep(0.2)
    return times


# ---------------------------------------------------------------------------------------- load generator


class Stats:
    __slots__ = ("count", "reads", "errors", "first_error", "fatal", "lost")

    def __init__(self) -> None:
        self.count = 0
        self.reads = 0
        self.errors = 0
        self.first_error = b""
        self.fatal = ""
        self.lost = 0


class LoadConnection(asyncio.Protocol):
    """Keeps ``inflight`` requests outstanding, cycling over its templates; checks and counts each
    response (same size, correlation id in order, same head, same tail as the verified answer)."""

    def __init__(self, stats: Stats, inflight: int, templates: list):
        self.stats = stats
        self.inflight = inflight
        self.reqs = [(pre, post) for pre, post, _c in templates]
        self.checks = [c for _p, _q, c in templates]
        self.m = len(templates)
        self.transport: asyncio.Transport | None = None
        self.buf = b""
        self.next_send = 0
        self.next_expect = 0
        self.running = False
        self.closing = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def _send(self, n: int) -> None:
        reqs, m, pack, c = self.reqs, self.m, _SIZE.pack, self.next_send
        out = []
        for i in range(c, c + n):
            pre, post = reqs[i % m]
            out.append(pre + pack(i) + post)
        self.transport.write(out[0] if n == 1 else b"".join(out))
        self.next_send = c + n

    def data_received(self, data: bytes) -> None:
        buf = self.buf + data if self.buf else data
        pos = 0
        end = len(buf)
        n = 0
        checks, m = self.checks, self.m
        expect = self.next_expect
        unpack_from = _SIZE.unpack_from
        stats = self.stats
        while end - pos >= 4:
            size = unpack_from(buf, pos)[0]
            stop = pos + 4 + size
            if stop > end:
                break
            p = pos + 4
            length, corr_off, head, tail = checks[expect % m]
            if size != length or unpack_from(buf, p + corr_off)[0] != expect or not buf.startswith(head, p):
                self._fail(f"expected correlation id {expect}, {length} bytes; got {buf[pos:stop][:80]!r}")
                return
            if not buf.endswith(tail, p, stop):
                stats.errors += 1
                if not stats.first_error:
                    stats.first_error = buf[p:stop]
            expect += 1
            n += 1
            pos = stop
        self.buf = buf[pos:] if pos < end else b""
        self.next_expect = expect
        stats.reads += 1
        if n:
            stats.count += n
            if self.running:
                self._send(n)

    def _fail(self, message: str) -> None:
        if not self.stats.fatal:
            self.stats.fatal = message
        self.closing = True
        self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closing:
            self.stats.lost += 1


async def _load(port: int, specs: list, inflight: int, warmup: float, seconds: float, go, ready) -> dict:
    loop = asyncio.get_running_loop()
    stats = Stats()
    conns = []
    for templates in specs:
        _t, proto = await loop.create_connection(
            lambda: LoadConnection(stats, inflight, templates), "127.0.0.1", port
        )
        conns.append(proto)
    ready.put(os.getpid())
    while not go.is_set():
        await asyncio.sleep(0.001)
    for c in conns:
        c.running = True
        c._send(c.inflight)
    await asyncio.sleep(warmup)
    c0, r0, e0, w0, p0 = stats.count, stats.reads, stats.errors, time.perf_counter(), time.process_time()
    await asyncio.sleep(seconds)
    c1, r1, e1, w1, p1 = stats.count, stats.reads, stats.errors, time.perf_counter(), time.process_time()
    for c in conns:
        c.running = False
    # let the outstanding requests come back (so the broker is idle for the next run), then close
    deadline = time.monotonic() + 10
    while any(c.next_expect < c.next_send for c in conns if not c.closing) and time.monotonic() < deadline:
        await asyncio.sleep(0.005)
    for c in conns:
        c.closing = True
        c.transport.close()
    await asyncio.sleep(0.05)
    return {
        "count": c1 - c0,
        "reads": r1 - r0,
        "window_errors": e1 - e0,
        "wall": w1 - w0,
        "cpu": p1 - p0,
        "errors": stats.errors,
        "first_error": stats.first_error,
        "fatal": stats.fatal,
        "lost": stats.lost,
    }


def load_worker(port, specs, inflight, warmup, seconds, go, ready, results, cpus) -> None:
    import uvloop

    if cpus:
        os.sched_setaffinity(0, cpus)
    try:
        results.put(uvloop.run(_load(port, specs, inflight, warmup, seconds, go, ready)))
    except BaseException as e:  # report, don't hang the parent
        ready.put(os.getpid())
        results.put({"exception": repr(e)})


def run_load(name: str, server_pid: int, port: int, specs: list, args: Any, load_cpus) -> dict:
    ctx = mp.get_context("spawn")
    go, ready, results = ctx.Event(), ctx.Queue(), ctx.Queue()
    nprocs = max(1, min(args.load_procs, len(specs)))
    chunks = [specs[i::nprocs] for i in range(nprocs)]
    procs = []
    for chunk in chunks:
        p = ctx.Process(
            target=load_worker,
            args=(port, chunk, args.inflight, args.warmup, args.seconds, go, ready, results, load_cpus),
        )
        p.start()
        procs.append(p)
    try:
        for _ in procs:
            ready.get(timeout=60)
        go.set()
        time.sleep(args.warmup)
        s0, m0 = proc_user_sys(server_pid), machine_busy()
        time.sleep(args.seconds)
        s1, m1 = proc_user_sys(server_pid), machine_busy()
        outs = [results.get(timeout=60) for _ in procs]
    finally:
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
    for o in outs:
        if "exception" in o:
            raise BenchError(f"{name}: load generator failed: {o['exception']}")
    return {
        "name": name,
        "count": sum(o["count"] for o in outs),
        "per_read": sum(o["count"] for o in outs) / max(sum(o["reads"] for o in outs), 1),
        "wall": max(o["wall"] for o in outs),
        "rate": sum(o["count"] / o["wall"] for o in outs),
        "load_cpu": [o["cpu"] / o["wall"] for o in outs],
        "server_cpu": (s1[0] + s1[1] - s0[0] - s0[1]) / args.seconds,
        "server_sys": (s1[1] - s0[1]) / args.seconds,
        "machine": (m1[0] - m0[0]) / max(m1[1] - m0[1], 1) * (os.cpu_count() or 1),
        "errors": sum(o["errors"] for o in outs),
        "first_error": next((o["first_error"] for o in outs if o["first_error"]), b""),
        "fatal": next((o["fatal"] for o in outs if o["fatal"]), ""),
        "lost": sum(o["lost"] for o in outs),
    }


def describe_error(api_key: int, payload: bytes) -> str:
    try:
        resp = decode_response(api_key, payload)
    except Exception as e:
        return f"undecodable answer {payload[:80]!r} ({e!r})"
    if api_key in (HEARTBEAT, CG_HEARTBEAT):
        return f"error {err_name(resp.error_code)}"
    return "errors " + ", ".join(err_name(p.error_code) for t in resp.topics for p in t.partitions)


def compare(
    label: str, work: Workload, broker_pid: int, bport: int, echo_pid: int, eport: int, args, load_cpus
):
    """Alternate broker and echo ``--rounds`` times with the same request frames; the best of each."""
    best: dict[str, dict] = {}
    rates: dict[str, list[float]] = {"broker": [], "echo": []}
    for _round in range(args.rounds):
        for name, pid, port, echo in (("broker", broker_pid, bport, False), ("echo", echo_pid, eport, True)):
            r = run_load(name, pid, port, work.specs(echo), args, load_cpus)
            unit = f"{work.name}s/s" if name == "broker" else "round trips/s"
            load = "+".join(f"{c:.0%}" for c in r["load_cpu"])
            other = r["machine"] - r["server_cpu"] - sum(r["load_cpu"])
            print(
                f"  {label} {name:6} {r['rate']:10,.0f} {unit:14} ({r['count']:,} in {r['wall']:.2f} s; "
                f"{r['per_read']:.1f} responses/read; CPU: server {r['server_cpu']:.0%} "
                f"(sys {r['server_sys']:.0%}), load gen {load}, "
                f"other {max(other, 0):.0%}; errors {r['errors']}, connections lost {r['lost']})",
                flush=True,
            )
            if other > 0.2:
                print(f"  warning: other processes used {other:.0%} of a core during this run")
            if r["fatal"] or r["lost"]:
                raise BenchError(f"{label} {name}: {r['fatal'] or 'connections were lost'}")
            if r["errors"]:
                what = describe_error(work.api_key, r["first_error"]) if name == "broker" else "bad echo"
                raise BenchError(f"{label} {name}: {r['errors']} responses were not error 0; first: {what}")
            rates[name].append(r["rate"])
            if name not in best or r["rate"] > best[name]["rate"]:
                best[name] = r
    for name, rs in rates.items():
        if len(rs) > 1 and min(rs) < 0.7 * max(rs):
            print(f"  note: {label} {name} runs varied {min(rs):,.0f}-{max(rs):,.0f}/s; the best counts")
    return best["broker"], best["echo"]


# ---------------------------------------------------------------------------------------- main


def wait_ready(proc: Any, port: int, timeout: float, what: str) -> None:
    """Until ``proc`` answers an ApiVersions request on ``port``; BenchError if it exits or times out."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise BenchError(f"{what} exited with status {proc.returncode} before it answered")
        try:
            probe(port, 0.5)
            return
        except OSError as e:
            if time.monotonic() > deadline:
                raise BenchError(f"{what} did not answer on port {port} within {timeout:g} s: {e!r}") from e


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0, help="measured window per load run")
    ap.add_argument("--warmup", type=float, default=1.0, help="load before the window starts")
    ap.add_argument("--rounds", type=int, default=3, help="alternate broker and echo this often; best counts")
    ap.add_argument(
        "--flush",
        default="interval,always",
        help="log.flush modes, comma-separated; heartbeats run on the first, commits and rebalances on each",
    )
    ap.add_argument("--groups", type=int, default=100, help="groups = load connections")
    ap.add_argument("--members", type=int, default=10, help="members per group (and topic partitions)")
    ap.add_argument("--inflight", type=int, default=5, help="requests outstanding per load connection")
    ap.add_argument("--load-procs", type=int, default=1, help="load-generator processes")
    ap.add_argument("--rebalance-members", type=int, default=100)
    ap.add_argument("--rebalance-groups", type=int, default=5, help="timed rebalances per flush mode")
    ap.add_argument("--rebalance-retries", type=int, default=40, help="extra groups allowed for split joins")
    ap.add_argument("--session-timeout-ms", type=int, default=600_000)
    ap.add_argument("--rebalance-timeout-ms", type=int, default=60_000)
    ap.add_argument("--setup-concurrency", type=int, default=10, help="groups formed at the same time")
    ap.add_argument("--setup-timeout", type=float, default=120.0, help="seconds to form one group")
    ap.add_argument("--no-pin", action="store_true", help="let the OS place the processes")
    ap.add_argument("--broker-root", type=Path, default=ROOT, help="checkout whose broker to run")
    ap.add_argument("--broker-config", action="append", default=[], metavar="K=V", help="extra broker config")
    ap.add_argument(
        "--baseline-root",
        type=Path,
        default=None,
        help="another checkout whose broker runs the commit part too, first, in the same run (ratios)",
    )
    ap.add_argument(
        "--commit-partitions",
        default="1",
        help="partitions per OffsetCommit request, comma-separated: one commit workload each [default 1]",
    )
    ap.add_argument(
        "--parts",
        default="heartbeat,commit,rebalance,consumer-heartbeat,consumer-rebalance",
        help="which measurements to run (comma-separated; default all)",
    )
    ap.add_argument(
        "--consumer-protocol",
        action="store_true",
        help="only the KIP-848 measurements (same as --parts consumer-heartbeat,consumer-rebalance)",
    )
    ap.add_argument(
        "--consumer-partitions", type=int, default=6, help="partitions of each KIP-848 group's topic"
    )
    ap.add_argument(
        "--consumer-poll-ms",
        type=float,
        default=2.0,
        help="KIP-848 rebalance: pause before heartbeating again when the last answer changed nothing",
    )
    args = ap.parse_args()
    if args.consumer_protocol:
        args.parts = ",".join(sorted(CONSUMER_PARTS))
    modes = [m.strip() for m in args.flush.split(",") if m.strip()]
    if not modes or any(m not in ("always", "interval", "never") for m in modes):
        ap.error("--flush takes always, interval and/or never, comma-separated")
    if not (args.broker_root / "broker" / "__main__.py").is_file():
        ap.error(f"--broker-root {args.broker_root}: no broker/__main__.py there")
    try:
        args.commit_partitions = [int(w) for w in args.commit_partitions.split(",") if w.strip()]
    except ValueError:
        ap.error("--commit-partitions takes numbers, comma-separated")
    if not args.commit_partitions or not all(1 <= w <= args.members for w in args.commit_partitions):
        ap.error(f"--commit-partitions: each from 1 to --members ({args.members})")
    if args.baseline_root is not None and not (args.baseline_root / "broker" / "__main__.py").is_file():
        ap.error(f"--baseline-root {args.baseline_root}: no broker/__main__.py there")
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    if not parts or parts - CLASSIC_PARTS - CONSUMER_PARTS:
        ap.error(
            "--parts takes heartbeat, commit, rebalance, consumer-heartbeat and/or consumer-rebalance, "
            "comma-separated"
        )

    import uvloop

    tmp = tempfile.TemporaryDirectory(prefix="coordinator-bench-")
    tmpdir = Path(tmp.name)
    eport = free_port()
    echo = start(
        [sys.executable, str(ROOT / "bench" / "echo_server.py"), "--port", str(eport)], tmpdir / "echo.log"
    )
    cpus = sorted(os.sched_getaffinity(0))
    load_cpus = None
    if not args.no_pin and len(cpus) >= 2:
        os.sched_setaffinity(echo.pid, {cpus[0]})
        load_cpus = set(cpus[1:])
        os.sched_setaffinity(0, load_cpus)  # the setup/rebalance client too
    topic = "coordinator-bench"
    bars: list[tuple[str, bool]] = []
    summary: list[str] = []
    broker = None
    try:
        wait_ready(echo, eport, 15, "echo server")
        print(
            f"{args.groups} groups x {args.members} members, {args.groups} connections x {args.inflight} in "
            f"flight; Heartbeat v4 / OffsetCommit v9; {args.warmup:g} s warm-up + {args.seconds:g} s, "
            f"best of {args.rounds}; {len(cpus)} CPUs"
            + (
                f" (servers pinned to CPU {cpus[0]}, clients to {sorted(load_cpus)})"
                if load_cpus
                else " (unpinned)"
            ),
            flush=True,
        )

        def start_broker(root: Path, mode: str, tag: str) -> tuple[Any, int]:
            bport = free_port()
            data = tmpdir / f"data-{mode}{tag}"
            cmd = [sys.executable, "-m", "broker", "serve", "--port", str(bport), "--data-dir", str(data)]
            for kv in [
                "group.initial.rebalance.delay.ms=0",
                "group.consumer.session.timeout.ms=60000",
                f"log.flush={mode}",
                *args.broker_config,
            ]:
                cmd += ["--config", kv]
            proc = start(cmd, tmpdir / f"broker-{mode}{tag}.log", cwd=root)
            if load_cpus:
                os.sched_setaffinity(proc.pid, {cpus[0]})
            wait_ready(proc, bport, 30, f"broker{tag} (log.flush={mode})")
            return proc, bport

        def commit_rates(label: str, pid: int, port: int, commits: dict[int, Workload], mode: str) -> dict:
            """Per commit width: (broker best, echo best), printed with the broker's CPU per request."""
            out = {}
            for width, work in commits.items():
                b, e = compare(
                    f"{label}[{mode}, {width}p]", work, pid, port, echo.pid, eport, args, load_cpus
                )
                out[width] = (b, e)
            return out

        def commit_line(label: str, mode: str, width: int, b: dict, e: dict) -> str:
            cpu_us = b["server_cpu"] / b["rate"] * 1e6 if b["rate"] else float("nan")
            return (
                f"{label} (log.flush={mode}, {width} partition{'s' if width > 1 else ''}/request) "
                f"{b['rate']:,.0f} requests/s = {b['rate'] * width:,.0f} partitions/s, broker CPU "
                f"{cpu_us:.1f} us/request ({b['server_cpu']:.0%} of a core), echo round trips/s "
                f"{e['rate']:,.0f}, ratio {b['rate'] / e['rate']:.2f}"
            )

        for i, mode in enumerate(modes):
            baseline = None
            if args.baseline_root is not None and "commit" in parts:
                # the same commit workloads against the baseline checkout's broker, first
                broker, bport = start_broker(args.baseline_root, mode, "-baseline")
                print(f"log.flush={mode} baseline {args.baseline_root} (broker pid {broker.pid})", flush=True)
                _g, _hb, base_commits = uvloop.run(setup(bport, args, topic))
                baseline = commit_rates("baseline commits", broker.pid, bport, base_commits, mode)
                stop(broker)
                broker = None
            broker, bport = start_broker(args.broker_root, mode, "")
            print(f"log.flush={mode} (broker pid {broker.pid})", flush=True)
            if parts & CLASSIC_PARTS:
                t = time.perf_counter()
                groups, hb, commits = uvloop.run(setup(bport, args, topic))
                print(
                    f"  setup: {len(groups)} groups x {args.members} members joined, synced, heartbeat and "
                    f"commit verified in {time.perf_counter() - t:.1f} s",
                    flush=True,
                )
            if i == 0 and "heartbeat" in parts:
                b, e = compare("heartbeat", hb, broker.pid, bport, echo.pid, eport, args, load_cpus)
                ratio = b["rate"] / e["rate"]
                ok = ratio >= HEARTBEAT_BAR
                bars.append(("heartbeat", ok))
                line = (
                    f"heartbeats/s {b['rate']:,.0f}, echo round trips/s {e['rate']:,.0f}, ratio {ratio:.2f}  "
                    f">={HEARTBEAT_BAR} {'ok' if ok else 'MISS'}"
                )
                print("  " + line, flush=True)
                summary.append(line)
            if "commit" in parts:
                ours = commit_rates("commits", broker.pid, bport, commits, mode)
                for width, (b, e) in ours.items():
                    lines = [commit_line("commits", mode, width, b, e)]
                    if baseline is not None:
                        bb, be = baseline[width]
                        lines.append(commit_line("  baseline", mode, width, bb, be))
                        cpu = (bb["server_cpu"] / bb["rate"]) / (b["server_cpu"] / b["rate"])
                        lines.append(
                            f"  vs baseline: {b['rate'] / bb['rate']:.2f}x requests/s, "
                            f"{cpu:.2f}x less broker CPU per request"
                        )
                    for line in lines:
                        print("  " + line, flush=True)
                        summary.append(line)
            if "rebalance" in parts:
                m0, s0, c0 = machine_busy(), proc_cpu(broker.pid), time.process_time()
                times, splits = uvloop.run(rebalance_series(bport, args, topic, args.members, mode))
                m1, s1, c1 = machine_busy(), proc_cpu(broker.pid), time.process_time()
                busy = (m1[0] - m0[0]) / max(m1[1] - m0[1], 1) * (os.cpu_count() or 1)
                wall = (m1[1] - m0[1]) / (os.cpu_count() or 1) / os.sysconf("SC_CLK_TCK")
                other = busy - ((s1 - s0) + (c1 - c0)) / max(wall, 1e-9)
                if other > 0.2:
                    print(
                        f"  warning: other processes used {other:.0%} of a core during the rebalance timing"
                    )
                if splits:
                    print(
                        f"  note: {len(splits)} group(s) split: the broker completed the join phase before every "
                        f"member had rejoined (leader saw {[s for s in splits if s >= 0]} members); replaced",
                        flush=True,
                    )
                if len(times) < args.rebalance_groups:
                    raise BenchError(
                        f"rebalance (log.flush={mode}): only {len(times)} of {args.rebalance_groups} groups "
                        f"formed in one join phase after {len(times) + len(splits)} attempts"
                    )
                best, med = min(times), statistics.median(times)
                ok = med < REBALANCE_BAR_MS
                bars.append((f"rebalance[{mode}]", ok))
                line = (
                    f"rebalance {args.rebalance_members} members (log.flush={mode}): last JoinGroup -> last "
                    f"SyncGroup best {best:.1f} ms, median {med:.1f} ms of {len(times)} "
                    f"({', '.join(f'{x:.1f}' for x in times)})  <{REBALANCE_BAR_MS:g} ms {'ok' if ok else 'MISS'}"
                )
                print("  " + line, flush=True)
                summary.append(line)
            if i == 0 and "consumer-heartbeat" in parts:
                t = time.perf_counter()
                cg = uvloop.run(cg_setup(bport, args))
                print(
                    f"  setup: {args.groups} KIP-848 groups x {args.members} members ({args.consumer_partitions}-"
                    f"partition topic each) Stable, ConsumerGroupHeartbeat verified in "
                    f"{time.perf_counter() - t:.1f} s",
                    flush=True,
                )
                b, e = compare("consumer-heartbeat", cg, broker.pid, bport, echo.pid, eport, args, load_cpus)
                line = (
                    f"ConsumerGroupHeartbeat v1/s {b['rate']:,.0f} ({args.groups * args.members} members), "
                    f"echo round trips/s {e['rate']:,.0f}, ratio {b['rate'] / e['rate']:.2f} (no bar)"
                )
                print("  " + line, flush=True)
                summary.append(line)
            if "consumer-rebalance" in parts:
                times = uvloop.run(cg_rebalance_series(bport, args, mode))
                line = (
                    f"KIP-848 rebalance {args.rebalance_members} members (log.flush={mode}): joins sent -> "
                    f"Stable at the group epoch best {min(times):.1f} ms, median "
                    f"{statistics.median(times):.1f} ms of {len(times)} ({', '.join(f'{x:.1f}' for x in times)}) "
                    "(no bar)"
                )
                print("  " + line, flush=True)
                summary.append(line)
            stop(broker)
            broker = None
        print("summary:")
        for line in summary:
            print("  " + line)
        return 0 if all(ok for _n, ok in bars) else 1
    except BenchError as e:
        print(f"error: {e}", file=sys.stderr)
        if broker is not None:
            if broker.poll() is not None:
                print(f"the broker exited with status {broker.returncode}", file=sys.stderr)
            logs = sorted(tmpdir.glob("broker-*.log"), key=lambda f: f.stat().st_mtime)
            if logs:
                tail = logs[-1].read_text(errors="replace").splitlines()[-15:]
                print(f"last lines of {logs[-1].name}:", *tail, sep="\n  ", file=sys.stderr)
        return 2
    finally:
        if broker is not None:
            stop(broker)
        stop(echo)
        tmp.cleanup()


if __name__ == "__main__":
    sys.exit(main())
