"""The differential engine: send the same scripted requests to pykbroker and to a real Kafka broker,
normalise the two answers and list their differences field by field.

A *case* is a list of :class:`Step` s built for one API version with fresh topic and group names;
every step goes to both brokers (one connection per broker per case, reopened after a close) and its
two outcomes are compared unless the step says ``compare=False`` (set-up such as creating the topic a
Produce case writes to). An outcome is the decoded response, normalised (:func:`normalise`), or
``"<closed>"`` when the broker closed the connection instead of answering.

Differences are paths such as ``topics[0].partitions[0].error_code`` with both values; each is then
matched against tests/differential/allowed.py. Counts per API go to tests/differential/tally.py for
the end-of-session table.
"""

from __future__ import annotations

import itertools
import re
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from broker.log.batch import HEADER_SIZE, InvalidBatch
from broker.log.records import decode_batch
from broker.protocol.errors import ErrorCode
from broker.protocol.generated import APIS
from broker.protocol.primitives import Message
from tests.support.wire import WireClient, request_bytes

CLOSED = "<closed>"
NO_ANSWER = "<no answer>"
ZERO_UUID = UUID(int=0)

#: Fields holding a broker id: the two brokers' own ids are both shown as "<node>".
NODE_FIELDS = {"node_id", "leader_id", "controller_id", "broker_id", "coordinator_id"}
NODE_LIST_FIELDS = {
    "replica_nodes",
    "isr_nodes",
    "offline_replicas",
    "eligible_leader_replicas",
    "last_known_elr",
}
#: Lists whose order carries no meaning: compared as maps by this key (paths read ``configs[retention.ms]``).
UNORDERED: dict[str, tuple[str, ...]] = {
    "api_keys": ("api_key",),
    "supported_features": ("name",),
    "finalized_features": ("name",),
    "configs": ("name",),
    "groups": ("group_id",),
    "results": ("group_id", "resource_name", "name", "topic_name"),
    "responses": ("name", "topic", "resource_name"),
    "topics": ("name", "topic"),
    "partitions": ("partition_index", "partition"),
    "partition_responses": ("index",),
    "members": ("member_id",),
    "config_resources": ("resource_name",),
    "values": ("key",),
    "results_by_transaction": ("transactional_id",),
    "results_by_topic_v3_and_below": ("name",),
    "topic_results": ("name",),
    "results_by_partition": ("partition_index",),
    "transaction_states": ("transactional_id",),
}
_MEMBER_ID = re.compile(r"^(.*-)?[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_KAFKA_MEMBER_ID = re.compile(r"^[A-Za-z0-9_-]{22}$")


# ============================================================================================= steps


@dataclass
class Step:
    """One request of a case. ``frame`` (optional) rewrites the encoded frame (bad lengths...)."""

    api: int
    version: int
    #: the request, or a function of the peer building it (for per-broker values: topic ids,
    #: member ids remembered from earlier answers)
    body: Any
    compare: bool = True
    frame: Callable[[bytes], bytes] | None = None
    #: topics that must have a leader (on each broker) before the next step: Kafka creates topics
    #: asynchronously, so a Produce right after CreateTopics could see UNKNOWN_TOPIC_OR_PARTITION.
    settle: tuple[str, ...] = ()
    #: stores values of the response in ``peer.memory`` for later steps (e.g. a member id)
    remember: Callable[[Any, dict], None] | None = None
    #: a note shown with differences ("second join", ...)
    label: str = ""
    #: which of the peer's connections carries the step (members of a group on their own sockets)
    conn: int = 0
    #: "call" (send and wait), "send" (answer read by a later "recv" step on the same connection:
    #: a JoinGroup that waits for the rebalance) or "recv"
    mode: str = "call"
    #: repeat the call (up to 10 s) until this holds for the answer: a barrier on asynchronous work
    #: (Kafka's handler threads, its offloaded assignor) so that both brokers are compared in the
    #: same state
    until: Callable[[Any], bool] | None = None


@dataclass
class Outcome:
    raw: Any  # the decoded response (Message), CLOSED or NO_ANSWER
    norm: Any  # what is compared


@dataclass
class Peer:
    """One of the two brokers, seen over raw TCP."""

    name: str
    port: int
    node_id: int
    client: WireClient | None = None
    corr: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    #: topic name -> id, learned from every answer that carries both
    topic_ids: dict[str, UUID] = field(default_factory=dict)
    #: per-case values remembered by steps (cleared at the start of each case)
    memory: dict[str, Any] = field(default_factory=dict)

    def topic_id(self, name: str) -> UUID:
        """The id of ``name`` on this broker (asked with Metadata if not yet seen); zero if unknown."""
        if name not in self.topic_ids:
            from broker.protocol.generated.metadata import MetadataRequest, MetadataRequestTopic

            req = MetadataRequest(topics=[MetadataRequestTopic(name=name)], allow_auto_topic_creation=False)
            self.send(Step(3, 12, req))
        return self.topic_ids.get(name, ZERO_UUID)

    #: connections 1, 2, ... of scripted group scenarios, and their requests awaiting an answer
    extra: dict[int, WireClient] = field(default_factory=dict)
    pending: dict[int, tuple[int, Step]] = field(default_factory=dict)

    def connect(self, conn: int = 0) -> WireClient:
        if conn:
            if conn not in self.extra:
                self.extra[conn] = WireClient(self.port, timeout=15.0)
            return self.extra[conn]
        if self.client is None:
            self.client = WireClient(self.port, timeout=15.0)
        return self.client

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
        for c in self.extra.values():
            c.close()
        self.extra.clear()
        self.pending.clear()

    def send(self, step: Step, timeout: float = 15.0) -> Any:
        """The decoded response to ``step``, CLOSED or NO_ANSWER."""
        c = self.connect(step.conn)
        c.sock.settimeout(timeout)
        mode = step.mode
        if mode == "recv":
            cid, step = self.pending.pop(step.conn)
        else:
            body = step.body(self) if callable(step.body) else step.body
            cid = next(self.corr)
            frame = request_bytes(step.api, step.version, body, cid, client_id="differential")
            if step.frame is not None:
                frame = step.frame(frame)
        try:
            if mode != "recv":
                c.send_raw(frame)
            if mode == "send":
                self.pending[step.conn] = (cid, step)
                return "<sent>"
            while True:
                corr, resp = c.recv(step.api, step.version)
                if corr == cid:
                    self._learn(resp)
                    if step.remember is not None:
                        step.remember(resp, self.memory)
                    return resp
        except (ConnectionError, BrokenPipeError, ConnectionResetError):
            self._drop(step.conn)
            return CLOSED
        except TimeoutError:
            self._drop(step.conn)
            return NO_ANSWER

    def _drop(self, conn: int) -> None:
        if conn:
            c = self.extra.pop(conn, None)
            if c is not None:
                c.close()
            self.pending.pop(conn, None)
        elif self.client is not None:
            self.client.close()
            self.client = None

    def _learn(self, obj: Any) -> None:
        if isinstance(obj, Message):
            name, tid = getattr(obj, "name", None), getattr(obj, "topic_id", None)
            if isinstance(name, str) and isinstance(tid, UUID) and tid != ZERO_UUID:
                self.topic_ids[name] = tid
            for f in obj._fields:
                v = getattr(obj, f)
                if isinstance(v, (list, Message)):
                    self._learn(v)
        elif isinstance(obj, list):
            for x in obj:
                if isinstance(x, Message):
                    self._learn(x)

    def wait_for_leaders(self, topics: tuple[str, ...], deadline: float = 15.0) -> None:
        """Until every partition of ``topics`` has a leader in Metadata and answers ListOffsets (Kafka
        applies a new topic to its partitions a moment after the controller commits it)."""
        from broker.protocol.generated.list_offsets import (
            ListOffsetsPartition,
            ListOffsetsRequest,
            ListOffsetsTopic,
        )
        from broker.protocol.generated.metadata import MetadataRequest, MetadataRequestTopic

        end = time.monotonic() + deadline
        req = MetadataRequest(
            topics=[MetadataRequestTopic(name=t) for t in topics], allow_auto_topic_creation=False
        )
        while time.monotonic() < end:
            resp = self.send(Step(3, 9, req))
            if isinstance(resp, Message) and all(
                t.error_code == 0 and t.partitions and all(p.leader_id >= 0 for p in t.partitions)
                for t in resp.topics
            ):
                lo = ListOffsetsRequest(
                    -1,
                    0,
                    [
                        ListOffsetsTopic(
                            t.name, [ListOffsetsPartition(p.partition_index, -1, -1, 1) for p in t.partitions]
                        )
                        for t in resp.topics
                    ],
                )
                got = self.send(Step(2, 1, lo))
                if isinstance(got, Message) and all(
                    p.error_code == 0 for t in got.topics for p in t.partitions
                ):
                    return
            time.sleep(0.05)


# ========================================================================================= normalise


def _is_time(name: str, v: Any) -> bool:
    return isinstance(v, int) and v > 10**11 and ("time" in name or "timestamp" in name)


MEMBER_FIELDS = ("member_id", "leader", "generated_member_id")


def normalise(obj: Any, node_id: int, name: str = "", aliases: dict[str, str] | None = None) -> Any:
    """A comparable view of a response: dicts and lists of plain values, with the fields that
    legitimately differ between two brokers replaced by placeholders."""
    if isinstance(obj, Message):
        obj = obj.to_dict()
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            out[k] = normalise(v, node_id, k, aliases)
        return out
    if isinstance(obj, list):
        items = [normalise(x, node_id, name, aliases) for x in obj]
        if name in NODE_LIST_FIELDS:
            return ["<node>" if x == node_id else x for x in items]
        for key in UNORDERED.get(name, ()):
            if all(isinstance(x, dict) and key in x for x in items):
                keys = [str(x[key]) for x in items]
                if len(set(keys)) == len(keys):
                    return {"<keyed>": True, **{f"[{k}]": x for k, x in zip(keys, items, strict=True)}}
                break
        return items
    if name == "throttle_time_ms":
        return 0
    if name in NODE_FIELDS and obj == node_id:
        return "<node>"
    if name in ("host",) and isinstance(obj, str):
        return "<host>"
    if name == "port" and isinstance(obj, int):
        return "<port>"
    if name == "cluster_id" and obj is not None:
        return "<cluster>"
    if name == "log_dir" and isinstance(obj, str):  # each broker's own directory
        return "<log dir>"
    if name in ("total_bytes", "usable_bytes") and isinstance(obj, int) and obj >= 0:
        return "<volume bytes>"
    if isinstance(obj, UUID):
        return "<zero-uuid>" if obj == ZERO_UUID else "<uuid>"
    if name.endswith("error_message"):
        return "<message>" if obj else None
    if name in MEMBER_FIELDS and isinstance(obj, str):
        if _MEMBER_ID.match(obj) or _KAFKA_MEMBER_ID.match(obj):
            if aliases is None:
                return "<member>"
            return aliases.setdefault(obj, f"<member {len(aliases) + 1}>")
    if name == "session_id" and isinstance(obj, int) and obj != 0:
        return "<session>"
    if name == "producer_id" and isinstance(obj, int) and obj >= 0:
        return "<producer id>"
    if _is_time(name, obj):
        return "<time>"
    if isinstance(obj, (bytes, bytearray, memoryview)):
        if name == "records":
            return _records(bytes(obj))
        return bytes(obj).hex()
    return obj


def _records(data: bytes) -> Any:
    """Record bytes as hex, or, when they hold transactional or control batches (whose producer id
    and marker timestamps are each broker's own), as a list of batches with those replaced by
    placeholders: offsets, attributes, epochs, sequences, records and the markers' type and
    coordinator epoch are compared."""
    pos, batches = 0, []
    try:
        while pos + HEADER_SIZE <= len(data):
            info, recs = decode_batch(data, pos)
            batches.append((info, recs))
            pos += info.size
    except (InvalidBatch, ValueError):
        return data.hex()
    if not any(i.is_transactional or i.is_control for i, _ in batches):
        return data.hex()
    out: list[Any] = []
    for info, recs in batches:
        pid = "<producer id>" if info.producer_id >= 0 else info.producer_id
        b: dict[str, Any] = {
            "base_offset": info.base_offset,
            "last_offset_delta": info.last_offset_delta,
            "attributes": info.attributes,
            "producer_id": pid,
            "producer_epoch": info.producer_epoch,
            "base_sequence": info.base_sequence,
            "partition_leader_epoch": info.partition_leader_epoch,
        }
        if info.is_control:
            b["timestamps"] = "<time>"
            b["markers"] = [
                (r.key.hex() if r.key else r.key, r.value.hex() if r.value else r.value) for r in recs
            ]
        else:
            b["timestamps"] = (info.base_timestamp, info.max_timestamp)
            b["records"] = [(r.offset_delta, r.timestamp_delta, r.key, r.value, r.headers) for r in recs]
        out.append(b)
    if pos < len(data):
        out.append({"partial batch": data[pos:].hex()})
    return out


# ============================================================================================== diff


def _fmt(path: str, v: Any) -> str:
    if path.endswith("error_code") and isinstance(v, int):
        try:
            return f"{v} ({ErrorCode(v).name})"
        except ValueError:
            return str(v)
    s = repr(v)
    return s if len(s) <= 120 else s[:117] + "..."


@dataclass(frozen=True)
class Difference:
    path: str
    ours: Any
    theirs: Any

    def __str__(self) -> str:
        return f"{self.path}: ours {_fmt(self.path, self.ours)}, Kafka {_fmt(self.path, self.theirs)}"


def diff(ours: Any, theirs: Any, path: str = "") -> list[Difference]:
    if isinstance(ours, dict) and isinstance(theirs, dict):
        out: list[Difference] = []
        keyed = "<keyed>" in ours or "<keyed>" in theirs
        for k in list(ours) + [k for k in theirs if k not in ours]:
            if k == "<keyed>":
                continue
            p = f"{path}{k}" if keyed else f"{path}.{k}" if path else k
            if k not in ours or k not in theirs:
                out.append(Difference(p, ours.get(k, "<absent>"), theirs.get(k, "<absent>")))
            else:
                out += diff(ours[k], theirs[k], p)
        return out
    if isinstance(ours, list) and isinstance(theirs, list):
        if len(ours) != len(theirs) and not all(isinstance(x, dict) for x in ours + theirs):
            return [Difference(path, ours, theirs)]
        out = []
        for i in range(max(len(ours), len(theirs))):
            p = f"{path}[{i}]"
            if i >= len(ours) or i >= len(theirs):
                out.append(
                    Difference(
                        p,
                        ours[i] if i < len(ours) else "<absent>",
                        theirs[i] if i < len(theirs) else "<absent>",
                    )
                )
            else:
                out += diff(ours[i], theirs[i], p)
        return out
    if ours != theirs:
        return [Difference(path or "<outcome>", ours, theirs)]
    return []


# =========================================================================================== running


@dataclass
class StepResult:
    case: str
    api: int
    version: int
    step: int
    ours: Outcome
    theirs: Outcome
    differences: list[Difference]
    compared: bool


def run_case(case: str, steps: list[Step], ours: Peer, theirs: Peer) -> list[StepResult]:
    """Run ``steps`` on both peers (fresh connections) and return one result per step."""
    results: list[StepResult] = []
    for peer in (ours, theirs):
        peer.close()
        peer.memory.clear()
    try:
        for i, step in enumerate(steps):
            outs = []
            for peer in (ours, theirs):
                raw = peer.send(step)
                end = time.monotonic() + 10
                while step.until is not None and isinstance(raw, Message) and not step.until(raw):
                    if time.monotonic() > end:
                        break
                    time.sleep(0.05)
                    raw = peer.send(step)
                aliases = peer.memory.setdefault("aliases", {})
                outs.append(
                    Outcome(
                        raw,
                        normalise(raw, peer.node_id, aliases=aliases) if isinstance(raw, Message) else raw,
                    )
                )
                if step.settle:
                    peer.wait_for_leaders(step.settle)
            d = diff(outs[0].norm, outs[1].norm) if step.compare and step.mode != "send" else []
            compared = step.compare and step.mode != "send"
            results.append(StepResult(case, step.api, step.version, i, outs[0], outs[1], d, compared))
    finally:
        for peer in (ours, theirs):
            peer.close()
    return results


def api_name(key: int) -> str:
    return APIS[key].name


def truncate(n: int) -> Callable[[bytes], bytes]:
    """Drop the last ``n`` body bytes, keeping the size prefix honest."""

    def f(frame: bytes) -> bytes:
        body = frame[4:-n]
        return struct.pack(">i", len(body)) + body

    return f


def trailing(extra: bytes) -> Callable[[bytes], bytes]:
    """Bytes after the end of a well-formed request body."""

    def f(frame: bytes) -> bytes:
        body = frame[4:] + extra
        return struct.pack(">i", len(body)) + body

    return f
