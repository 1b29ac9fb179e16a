"""The protocol trace journal: every request and its response, decoded, one JSON line each.

Off by default. On with ``trace.file`` (config; ``trace.max.bytes`` caps the file, which is then
rotated to FILE.1 ... FILE.<trace.backups>; ``trace.groups``, ``trace.apis``, ``trace.clients``
filter) or at runtime (``PUT /trace``). The request pipeline (broker/server/pipeline.py) calls
:meth:`TraceJournal.handle` / :meth:`TraceJournal.complete` only while a journal is set (it is a
``TracedPipeline`` meanwhile): with tracing off it costs nothing.

A line (orjson) has: ``wall_ms`` and ``virtual_ms`` (the broker clock, see broker/clock.py),
``conn`` (connection id), ``peer``, ``client_id``, ``software`` (name/version from ApiVersions
v3+), ``api``, ``api_key``, ``version``, ``correlation_id``, ``groups`` (the group ids the request
names), ``request`` and ``response`` (every field, decoded; the consumer protocol's subscriptions
and assignments decoded too; record batches summarised as base offset, count, bytes, compression,
producer id/epoch/sequence -- never dumped; other bytes as their length and first bytes in hex),
``errors`` (every non-zero error code with its path and name), ``latency_ms``, ``outcome``
(``response``, ``no-response`` or ``close`` with ``reason``) and ``fault`` (the fault rule that
fired on the request: the fault injector reports it with :meth:`TraceJournal.fault_fired`).

Reading it: ``pykbroker trace FILE [--group g] [--api JoinGroup] [--client c]`` prints each
group's conversation, request by request.
"""

from __future__ import annotations

import logging
import os
import re
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import click
import orjson

from broker.control.clock import Target
from broker.coordinator.embedded import EmbeddedProtocolError, decode_assignment, decode_subscription
from broker.log.batch import InvalidBatch, iter_batches
from broker.protocol.errors import ErrorCode
from broker.protocol.framing import REQUEST_PREFIX
from broker.protocol.primitives import Message
from broker.server.pipeline import Close, Pending, RequestPipeline

log = logging.getLogger(__name__)

COMPRESSION = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
#: bytes shown (hex) of a bytes field that is neither records nor the consumer protocol
HEX_PREVIEW = 32
#: requests waiting for their response (parked joins, long polls) kept at most
MAX_OPEN = 10_000
_ERRORS = {int(e): e.name for e in ErrorCode}


class TraceJournal:
    """Writes the journal; set it as the request pipeline's ``tracer``."""

    def __init__(
        self,
        path: str | Path,
        max_bytes: int = 100 * 1024 * 1024,
        backups: int = 3,
        groups: Iterable[str] = (),
        apis: Iterable[str | int] = (),
        clients: str | None = None,
        clock: Any = None,
        registry: Any = None,
    ):
        """``groups``: record only requests naming one of these groups; ``apis``: only these APIs
        (names or keys); ``clients``: only clients whose id matches this regular expression.
        Raises ValueError for an unknown API or a bad expression."""
        self.path = Path(path)
        self.max_bytes = max_bytes
        self.backups = backups
        self.clock = clock
        self.groups = frozenset(groups)
        self.api_keys = _api_keys(apis, registry) if apis else None
        try:
            self.clients = re.compile(clients) if clients else None
        except re.error as e:
            raise ValueError(f"bad client expression {clients!r}: {e}") from None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "ab", buffering=0)  # noqa: SIM115 (closed by close())
        self._size = self._file.tell()
        self._open: OrderedDict[tuple[int, int], dict] = OrderedDict()
        self._faults: dict[tuple[int, int], Any] = {}
        self.lines = 0
        self.failures = 0

    # ------------------------------------------------------------------ pipeline hooks

    def handle(self, pipeline: Any, frame: bytes, client: Any) -> Any:
        """The pipeline's outcome of ``frame`` (handled untraced), recorded."""
        wall = time.time()
        start = time.perf_counter()
        out = RequestPipeline.handle(pipeline, frame, client)
        latency = (time.perf_counter() - start) * 1000
        try:
            entry = self._begin(pipeline, frame, client, wall)
            if entry is not None:
                if type(out) is Pending:
                    entry["_start"] = start
                    self._open[(id(client), entry["correlation_id"])] = entry
                    while len(self._open) > MAX_OPEN:
                        self._open.popitem(last=False)
                else:
                    self._finish(entry, pipeline, out, latency)
        except Exception:
            self._failed(frame)
        return out

    def complete(self, pipeline: Any, pending: Any, result: Any, exc: BaseException | None) -> Any:
        out = RequestPipeline.complete(pipeline, pending, result, exc)
        entry = self._open.pop((id(pending.client), pending.correlation_id), None)
        if entry is not None:
            try:
                latency = (time.perf_counter() - entry.pop("_start")) * 1000
                self._finish(entry, pipeline, out, latency)
            except Exception:
                self._failed(b"")
        return out

    def fault_fired(self, client: Any, correlation_id: int, rule: Any) -> None:
        """The fault injector's report: ``rule`` (JSON-able) fired on this request."""
        self._faults[(id(client), correlation_id)] = rule

    def event(self, kind: str, details: dict, groups: list[str] | None = None) -> None:
        """A line for something the broker did on command (a cluster operation: leader and
        coordinator moves, nodes down and up), between the requests it affects."""
        entry = {
            "wall_ms": round(time.time() * 1000, 3),
            "virtual_ms": self.clock.now_ms() if self.clock is not None else None,
            "event": kind,
            "details": details,
            "groups": groups or [],
        }
        self._write(orjson.dumps(entry, default=_default) + b"\n")

    def _failed(self, frame: bytes) -> None:
        self.failures += 1
        if self.failures <= 5:
            log.exception("trace: cannot record a request of %d bytes", len(frame))

    # ------------------------------------------------------------------ lines

    def _begin(self, pipeline: Any, frame: bytes, client: Any, wall: float) -> dict | None:
        fault = self._faults.pop((id(client), _correlation_id(frame)), None) if self._faults else None
        api_key, version, correlation_id = REQUEST_PREFIX.unpack_from(frame, 0)
        if self.api_keys is not None and api_key not in self.api_keys:
            return None
        if self.clients is not None and not self.clients.search(client.client_id or ""):
            return None
        api = pipeline.registry.get(api_key)
        plan = api.plans.get(version) if api is not None else None
        request: Any = None
        if plan is not None:
            try:
                _header, pos = plan[0](frame)
                request, _end = plan[1](frame, pos)
            except Exception:
                request = None
        groups = _groups_of(api_key, request)
        if self.groups and not self.groups.intersection(groups):
            return None
        entry: dict[str, Any] = {
            "wall_ms": round(wall * 1000, 3),
            "virtual_ms": self.clock.now_ms() if self.clock is not None else None,
            "conn": getattr(client, "connection_id", None) or client.peer,
            "peer": client.peer,
            "client_id": client.client_id,
            "software": (
                {"name": client.software_name, "version": client.software_version}
                if client.software_name
                else None
            ),
            "api": api.name if api is not None else None,
            "api_key": api_key,
            "version": version,
            "correlation_id": correlation_id,
            "groups": groups,
            "request": to_json(request) if request is not None else None,
            "fault": fault,
        }
        return entry

    def _finish(self, entry: dict, pipeline: Any, out: Any, latency: float) -> None:
        entry["latency_ms"] = round(latency, 3)
        if out is None:
            entry["outcome"], entry["response"] = "no-response", None
        elif type(out) is Close:
            entry["outcome"], entry["response"], entry["reason"] = "close", None, out.reason
        else:
            entry["outcome"] = "response"
            api = pipeline.registry.get(entry["api_key"])
            if type(out) is tuple:  # a large answer, in parts
                out = b"".join(out)
            if api is not None and entry["version"] in api.plans:
                entry["response"] = to_json(_decode_response(api, entry["version"], out))
            else:  # e.g. ApiVersions at a version we do not serve: answered in v0
                entry["response"] = {"bytes": len(out)}
        entry["errors"] = list(_errors(entry["response"], ""))
        self._write(orjson.dumps(entry, default=_default) + b"\n")

    def _write(self, line: bytes) -> None:
        if self._size > 0 and self._size + len(line) > self.max_bytes:
            self._rotate()
        self._file.write(line)
        self._size += len(line)
        self.lines += 1

    def _rotate(self) -> None:
        self._file.close()
        if self.backups > 0:
            for i in range(self.backups - 1, 0, -1):
                src = self.path.with_name(f"{self.path.name}.{i}")
                if src.exists():
                    os.replace(src, self.path.with_name(f"{self.path.name}.{i + 1}"))
            os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))
        else:
            self.path.unlink(missing_ok=True)
        self._file = open(self.path, "ab", buffering=0)  # noqa: SIM115
        self._size = 0

    def close(self) -> None:
        self._file.close()

    def describe(self) -> dict:
        return {
            "enabled": True,
            "file": str(self.path),
            "max_bytes": self.max_bytes,
            "backups": self.backups,
            "groups": sorted(self.groups),
            "api_keys": sorted(self.api_keys) if self.api_keys is not None else [],
            "clients": self.clients.pattern if self.clients is not None else None,
            "lines": self.lines,
            "failures": self.failures,
        }


# ---------------------------------------------------------------------- decoding


def to_json(value: Any, name: str = "") -> Any:
    """A decoded message as JSON-able values: records summarised, consumer protocol bytes decoded."""
    t = type(value)
    if t is int or t is str or value is None or t is bool:
        return value
    if t is list:
        return [to_json(v, name) for v in value]
    if isinstance(value, Message):
        return {f: to_json(getattr(value, f), f) for f in value._fields}
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _bytes(bytes(value), name)
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


def _bytes(data: bytes, name: str) -> Any:
    if name == "auth_bytes":  # SASL tokens (a PLAIN token holds the password): their size only
        return {"bytes": len(data), "redacted": True}
    if name == "records":
        return summarize_batches(data)
    if name in ("metadata", "member_metadata") and data:
        try:
            return {"subscription": to_json(decode_subscription(data))}
        except EmbeddedProtocolError:
            pass
    if name in ("assignment", "member_assignment") and data:
        try:
            return {"assignment": decode_assignment(data)}
        except EmbeddedProtocolError:
            pass
    return {"bytes": len(data), "hex": data[:HEX_PREVIEW].hex()}


def summarize_batches(data: bytes) -> dict:
    """Record batches as their headers: never the records themselves."""
    try:
        infos = iter_batches(data, verify_crc=False)
    except (InvalidBatch, ValueError, IndexError) as e:
        return {"bytes": len(data), "unreadable": str(e)}
    return {
        "bytes": len(data),
        "batches": [
            {
                "base_offset": b.base_offset,
                "count": b.records_count,
                "bytes": b.size,
                "compression": COMPRESSION.get(b.compression, b.compression),
                "producer_id": b.producer_id,
                "producer_epoch": b.producer_epoch,
                "base_sequence": b.base_sequence,
                **({"transactional": True} if b.is_transactional else {}),
                **({"control": True} if b.is_control else {}),
            }
            for b in infos
        ],
    }


def _decode_response(api: Any, version: int, frame: bytes) -> Any:
    """Decode the body of a response frame we produced (size, correlation id, header tags)."""
    pos = 8 + (1 if api.plans[version][3] else 0)
    return api.codec.RESPONSE_DECODERS[version](bytes(frame), pos)[0]


def _errors(value: Any, path: str) -> Iterator[dict]:
    if type(value) is dict:
        for k, v in value.items():
            t = type(v)
            if t is int:
                if v and k.endswith("error_code"):
                    yield {"path": f"{path}.{k}" if path else k, "code": v, "name": _ERRORS.get(v, str(v))}
            elif t is list or t is dict:
                yield from _errors(v, f"{path}.{k}" if path else k)
    elif type(value) is list:
        for i, v in enumerate(value):
            if type(v) is dict or type(v) is list:
                yield from _errors(v, f"{path}[{i}]")


def _groups_of(api_key: int, request: Any) -> list[str]:
    """The group ids a request names."""
    if request is None:
        return []
    gid = getattr(request, "group_id", None)
    if isinstance(gid, str):
        return [gid]
    out: list[str] = []
    if api_key == 10:  # FindCoordinator: group keys only (key_type 0)
        if getattr(request, "key_type", 0) == 0:
            if getattr(request, "key", None):
                out.append(request.key)
            out.extend(getattr(request, "coordinator_keys", None) or [])
        return out
    for g in getattr(request, "groups", None) or []:
        if isinstance(g, str):
            out.append(g)
        elif isinstance(getattr(g, "group_id", None), str):
            out.append(g.group_id)
    return out


def _correlation_id(frame: bytes) -> int:
    try:
        return REQUEST_PREFIX.unpack_from(frame, 0)[2]
    except Exception:
        return -1


def _api_keys(apis: Iterable[str | int], registry: Any) -> frozenset[int]:
    by_name: dict[str, int] = {}
    if registry is not None:
        by_name = {api.name.lower(): key for key, api in registry.apis.items()}
    keys = set()
    for a in apis:
        if isinstance(a, int) or (isinstance(a, str) and a.strip().isdigit()):
            keys.add(int(a))
        elif a.lower() in by_name:
            keys.add(by_name[a.lower()])
        else:
            valid = ", ".join(sorted(api.name for api in registry.apis.values())) if registry else "?"
            raise ValueError(f"unknown API {a!r}; valid: {valid}")
    return frozenset(keys)


def _default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, set | frozenset):
        return sorted(value)
    return repr(value)


# ---------------------------------------------------------------------- switching


def start(control: Any, path: str | Path, **options: Any) -> TraceJournal:
    """Start (or restart, with new options) the journal of a broker; raises ValueError for bad
    options, leaving the running journal as it was."""
    target = Target.of(control)
    if target.pipeline is None:
        raise ValueError("the broker has not started")
    journal = TraceJournal(path, clock=target.clock, registry=target.pipeline.registry, **options)
    stop(control)
    target.pipeline.set_tracer(journal)
    log.info("trace journal on: %s", journal.describe())
    return journal


def stop(control: Any) -> dict | None:
    """Stop the journal; returns what it was."""
    target = Target.of(control)
    journal = getattr(target.pipeline, "tracer", None)
    if journal is None:
        return None
    target.pipeline.set_tracer(None)
    journal.close()
    return journal.describe()


def start_from_config(control: Any, config: Any) -> TraceJournal | None:
    """The journal ``trace.file`` (and its options) configure, if set."""
    path = config["trace.file"]
    if not path:
        return None
    return start(control, path, **_config_options(config))


def _config_options(config: Any) -> dict:
    def listed(key: str) -> list[str]:
        return [x.strip() for x in str(config[key]).split(",") if x.strip()]

    return {
        "max_bytes": config["trace.max.bytes"],
        "backups": config["trace.backups"],
        "groups": listed("trace.groups"),
        "apis": listed("trace.apis"),
        "clients": config["trace.clients"] or None,
    }


# ---------------------------------------------------------------------- reading: pykbroker trace


def read_lines(paths: Iterable[str]) -> Iterator[dict]:
    for p in paths:
        with open(p, "rb") as f:
            for raw in f:
                raw = raw.strip()
                if raw:
                    yield orjson.loads(raw)


def select(
    lines: Iterable[dict], group: str | None = None, api: str | None = None, client: str | None = None
) -> list[dict]:
    out = []
    pattern = re.compile(client) if client else None
    for e in lines:
        if group is not None and group not in (e.get("groups") or []):
            continue
        if api is not None and (e.get("api") or "").lower() != api.lower() and str(e.get("api_key")) != api:
            continue
        if pattern is not None and not pattern.search(e.get("client_id") or ""):
            continue
        out.append(e)
    return out


def render(lines: list[dict]) -> str:
    """Each group's conversation in time order (requests naming no group last)."""
    by_group: dict[str, list[dict]] = {}
    for e in lines:
        for g in e.get("groups") or ["(no group)"]:
            by_group.setdefault(g, []).append(e)
    out: list[str] = []
    for g in sorted(by_group, key=lambda k: (k == "(no group)", k)):
        entries = sorted(by_group[g], key=lambda e: e["wall_ms"])
        out.append(f"== group {g}: {len(entries)} request(s) ==")
        t0 = entries[0]["wall_ms"]
        for e in entries:
            out.append(_render_one(e, t0))
    return "\n".join(out)


def _render_one(e: dict, t0: float) -> str:
    ts = time.strftime("%H:%M:%S", time.gmtime(e["wall_ms"] / 1000)) + f".{int(e['wall_ms'] % 1000):03d}"
    if "event" in e:  # a cluster operation (TraceJournal.event)
        return f"{ts} +{(e['wall_ms'] - t0) / 1000:7.3f}s  ** {e['event']} {e.get('details')}"
    who = e.get("client_id") or "?"
    head = f"{ts} +{(e['wall_ms'] - t0) / 1000:7.3f}s  {who:<16} {e['api']} v{e['version']} #{e['correlation_id']}"
    req = _summary(e["api"], e.get("request") or {}, request=True)
    if e.get("outcome") == "close":
        resp = f"connection closed: {e.get('reason')}"
    elif e.get("outcome") == "no-response":
        resp = "(no response)"
    else:
        resp = _summary(e["api"], e.get("response") or {}, request=False)
    errors = ", ".join(x["name"] for x in e.get("errors") or [])
    fault = f"  [fault {e['fault']}]" if e.get("fault") is not None else ""
    err = f"  !{errors}" if errors else ""
    return f"{head}  {req}\n{'':>24}-> {resp}{err}  ({e.get('latency_ms', 0):.1f} ms){fault}"


def _assignment_text(a: Any) -> str:
    if isinstance(a, dict) and "assignment" in a:
        parts = a["assignment"]
        return "{" + ", ".join(f"{t}: {ps}" for t, ps in sorted(parts.items())) + "}"
    if isinstance(a, dict) and "subscription" in a:
        return "topics=" + ",".join(a["subscription"].get("topics") or [])
    return "-" if not a else f"<{a.get('bytes', '?')} bytes>"


def _summary(api: str, m: dict, request: bool) -> str:
    f = []
    for key in ("member_id", "group_instance_id", "generation_id", "member_epoch", "protocol_type"):
        if m.get(key) not in (None, "", -1) or (key == "member_id" and request and key in m):
            f.append(f"{key}={m[key]!r}")
    if api == "JoinGroup" and request:
        f.append(
            "protocols=["
            + ", ".join(f"{p['name']}: {_assignment_text(p['metadata'])}" for p in m.get("protocols", []))
            + "]"
        )
    if api == "JoinGroup" and not request:
        f.append(f"leader={m.get('leader')!r} protocol={m.get('protocol_name')!r}")
        if m.get("members"):
            f.append(
                "members=["
                + ", ".join(f"{x['member_id']}: {_assignment_text(x['metadata'])}" for x in m["members"])
                + "]"
            )
    if api == "SyncGroup" and request and m.get("assignments"):
        f.append(
            "assignments=["
            + ", ".join(f"{a['member_id']}: {_assignment_text(a['assignment'])}" for a in m["assignments"])
            + "]"
        )
    if api == "SyncGroup" and not request:
        f.append(f"assignment={_assignment_text(m.get('assignment'))}")
    if api == "ConsumerGroupHeartbeat":
        for key in ("subscribed_topic_names", "heartbeat_interval_ms", "assignment"):
            if m.get(key) is not None:
                f.append(f"{key}={m[key]}")
    if api == "OffsetCommit" and request:
        f.append(
            "offsets="
            + ", ".join(
                f"{t.get('name') or t.get('topic_id')}[{p['partition_index']}]={p['committed_offset']}"
                for t in m.get("topics", [])
                for p in t.get("partitions", [])
            )
        )
    if api == "LeaveGroup" and request and m.get("members"):
        f.append("members=" + ",".join(x.get("member_id", "") for x in m["members"]))
    if api == "FindCoordinator":
        if request:
            keys = [m["key"]] if m.get("key") else list(m.get("coordinator_keys") or [])
            f.append(f"keys={keys}")
        else:
            nodes = [c.get("node_id") for c in m.get("coordinators") or []] or [m.get("node_id")]
            f.append(f"coordinator={nodes}")
    return " ".join(f) or "{}"


@click.command("trace")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--group", default=None, help="Only requests naming this group.")
@click.option("--api", default=None, help="Only this API (name, e.g. JoinGroup, or key).")
@click.option("--client", default=None, help="Only clients whose id matches this regular expression.")
@click.option("--json", "as_json", is_flag=True, help="Print the selected lines as JSON instead.")
def trace_command(
    files: tuple[str, ...], group: str | None, api: str | None, client: str | None, as_json: bool
) -> None:
    """Print a trace journal (trace.file) as each group's conversation, request by request."""
    lines = select(read_lines(files), group, api, client)
    if as_json:
        for e in lines:
            click.echo(orjson.dumps(e).decode())
        return
    if not lines:
        click.echo("no matching requests", err=True)
        return
    click.echo(render(lines))
