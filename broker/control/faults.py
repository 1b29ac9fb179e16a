"""Fault rules: make the broker misbehave on purpose, request by request.

A rule is *match* + *action* + *how often*:

- match (every given field must hold): ``api`` (name or key), ``min_version``/``max_version``,
  ``client_id`` (a regular expression, searched), ``client_software_name`` and
  ``client_software_version`` (from ApiVersions v3+), ``group``, ``topic``, ``partition``,
  ``connection`` (the connection id the live state lists);
- action: ``error`` (a Kafka error name: answer with it instead of handling), ``delay_ms`` (the
  request is handled, its response goes out that much later; may be combined with ``error`` or
  ``throttle_ms``), ``drop`` (handle, send no response), ``close`` (``"before"`` or ``"after"``
  handling), ``throttle_ms`` (handle, answer with that ``throttle_time_ms``);
- how often: ``times`` (the next N matching requests), ``errors`` (a list of error names answered in
  order, one per matching request, as librdkafka's ``push_request_errors``), ``probability`` with
  an optional ``seed``, or none of these: until removed.

A rule is given as a dict, flat (``{"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER", "times":
3}``) or nested (``{"match": {...}, "action": {...}, "times": 3}``). :func:`parse_rule` checks all of
it before anything is added; a mistake raises :class:`BadRule` naming the valid choices.

The request pipeline calls :meth:`FaultInjector.intercept` only while some rule is set (the
pipeline's ``faults`` attribute is ``None`` otherwise: the cost of this feature on the hot path is
one attribute check). Rules are evaluated in the order they were added; the first that matches and
fires decides. Every firing is counted on its rule and logged at INFO with the request it hit.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from broker.dispatch.registry import Api, ClientInfo, CloseConnection, Deferred, Registry
from broker.protocol.errors import ErrorCode
from broker.protocol.generated import fetch as fetch_codec
from broker.protocol.generated import find_coordinator as fc_codec
from broker.protocol.generated import list_offsets as lo_codec
from broker.protocol.generated import metadata as md_codec
from broker.protocol.generated import offset_fetch as of_codec
from broker.protocol.generated import produce as produce_codec
from broker.server.pipeline import Close, Outcome, Pending, RequestPipeline, encode

if TYPE_CHECKING:
    from broker.dispatch.services import Services

log = logging.getLogger(__name__)

FETCH, PRODUCE, METADATA, LIST_OFFSETS, OFFSET_FETCH, FIND_COORDINATOR = 1, 0, 3, 2, 9, 10

MATCH_KEYS = (
    "api",
    "min_version",
    "max_version",
    "client_id",
    "client_software_name",
    "client_software_version",
    "group",
    "topic",
    "partition",
    "connection",
)
ACTION_KEYS = ("error", "delay_ms", "drop", "close", "throttle_ms")
HOW_OFTEN_KEYS = ("times", "errors", "probability", "seed")
CLOSE_WHEN = ("before", "after")


class BadRule(ValueError):
    """A rule (or a control request) that cannot be applied; ``valid`` lists the valid choices."""

    def __init__(self, message: str, valid: list[Any] | None = None):
        super().__init__(message)
        self.message = message
        self.valid = valid

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"error": self.message}
        if self.valid is not None:
            out["valid"] = self.valid
        return out


# ---------------------------------------------------------------------- parsing


def error_names() -> list[str]:
    return [e.name for e in ErrorCode if e is not ErrorCode.NONE]


def parse_api(value: Any, registry: Registry) -> int:
    """An API given by name (``"Produce"``, case-insensitive) or key, that this broker serves."""
    served = {api.name: key for key, api in registry.apis.items()}
    if isinstance(value, bool):
        value = None
    if isinstance(value, int) and value in registry.apis:
        return value
    if isinstance(value, str):
        if value.strip().lstrip("-").isdigit() and int(value) in registry.apis:
            return int(value)
        for name, key in served.items():
            if name.lower() == value.strip().lower():
                return key
    raise BadRule(f"unknown API {value!r}", sorted(served))


def parse_error(value: Any) -> ErrorCode:
    """A Kafka error given by name (``"NOT_LEADER_OR_FOLLOWER"``, case-insensitive) or number."""
    if isinstance(value, str):
        try:
            code = ErrorCode[value.strip().upper()]
        except KeyError:
            code = None
        if code is not None and code is not ErrorCode.NONE:
            return code
    if isinstance(value, int) and not isinstance(value, bool) and value != 0:
        try:
            return ErrorCode(value)
        except ValueError:
            pass
    raise BadRule(f"unknown error {value!r}", error_names())


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m)?\s*$")
_UNITS = {None: 1, "ms": 1, "s": 1000, "m": 60000}


def parse_duration_ms(name: str, value: Any) -> int:
    """Milliseconds, given as a number of ms or a string such as ``"250ms"``, ``"2s"``, ``"1m"``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 2**31 - 1:
        return int(value)
    if isinstance(value, str):
        m = _DURATION.match(value)
        if m:
            ms = int(float(m.group(1)) * _UNITS[m.group(2)])
            if ms <= 2**31 - 1:
                return ms
    raise BadRule(
        f"bad duration for {name}: {value!r}",
        ["a number of milliseconds (0 to 2147483647)", "a string such as '250ms', '2s' or '1m'"],
    )


def _int(name: str, value: Any, lo: int, hi: int = 2**31 - 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise BadRule(f"{name} must be an integer, not {value!r}", [f"an integer from {lo} to {hi}"])
    try:
        v = int(value)
    except ValueError:
        raise BadRule(
            f"{name} must be an integer, not {value!r}", [f"an integer from {lo} to {hi}"]
        ) from None
    if not lo <= v <= hi:
        raise BadRule(f"{name} must be from {lo} to {hi}, not {v}", [f"an integer from {lo} to {hi}"])
    return v


def _str(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise BadRule(f"{name} must be a string, not {value!r}", ["a string"])
    return value


@dataclass
class Match:
    api_key: int | None = None
    min_version: int | None = None
    max_version: int | None = None
    client_id: re.Pattern | None = None
    client_software_name: str | None = None
    client_software_version: str | None = None
    group: str | None = None
    topic: str | None = None
    partition: int | None = None
    connection: int | None = None

    def to_json(self, registry: Registry) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.api_key is not None:
            out["api"] = registry.apis[self.api_key].name
        for k in MATCH_KEYS[1:]:
            v = getattr(self, k)
            if v is not None:
                out[k] = v.pattern if isinstance(v, re.Pattern) else v
        return out


@dataclass
class Action:
    error: ErrorCode | None = None
    delay_ms: int = 0
    drop: bool = False
    close: str | None = None  # "before" | "after"
    throttle_ms: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.error is not None:
            out["error"] = self.error.name
        if self.delay_ms:
            out["delay_ms"] = self.delay_ms
        if self.drop:
            out["drop"] = True
        if self.close:
            out["close"] = self.close
        if self.throttle_ms is not None:
            out["throttle_ms"] = self.throttle_ms
        return out


@dataclass
class FaultRule:
    id: int
    match: Match
    action: Action
    #: the next N matching requests (None: not limited by count)
    times: int | None = None
    #: answered in order, one per matching request
    errors: list[ErrorCode] | None = None
    probability: float | None = None
    seed: int | None = None
    fired: int = 0
    rng: random.Random | None = field(default=None, repr=False)

    @property
    def exhausted(self) -> bool:
        if self.errors is not None:
            return self.fired >= len(self.errors)
        return self.times is not None and self.fired >= self.times

    def to_json(self, registry: Registry) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "match": self.match.to_json(registry),
            "action": self.action.to_json(),
        }
        if self.times is not None:
            out["times"] = self.times
        if self.errors is not None:
            out["errors"] = [e.name for e in self.errors]
        if self.probability is not None:
            out["probability"] = self.probability
            if self.seed is not None:
                out["seed"] = self.seed
        out["fired"] = self.fired
        out["remaining"] = (
            len(self.errors) - self.fired
            if self.errors is not None
            else (self.times - self.fired if self.times is not None else None)
        )
        return out


def parse_rule(spec: Mapping[str, Any], registry: Registry, rule_id: int = 0) -> FaultRule:
    """A :class:`FaultRule` from its dict form (flat or nested, see the module docstring). Raises
    :class:`BadRule` on the first problem; nothing is applied by parsing."""
    if not isinstance(spec, Mapping):
        raise BadRule("a rule is a JSON object", list(MATCH_KEYS + ACTION_KEYS + HOW_OFTEN_KEYS))
    flat: dict[str, Any] = {}
    for key, value in spec.items():
        if key in ("match", "action"):
            if not isinstance(value, Mapping):
                raise BadRule(f"{key} must be an object")
            allowed = MATCH_KEYS if key == "match" else ACTION_KEYS
            for k, v in value.items():
                if k not in allowed:
                    raise BadRule(f"unknown {key} field {k!r}", list(allowed))
                flat[k] = v
        elif key in MATCH_KEYS or key in ACTION_KEYS or key in HOW_OFTEN_KEYS:
            flat[key] = value
        else:
            raise BadRule(
                f"unknown rule field {key!r}", ["match", "action", *MATCH_KEYS, *ACTION_KEYS, *HOW_OFTEN_KEYS]
            )

    m = Match()
    if flat.get("api") is not None:
        m.api_key = parse_api(flat["api"], registry)
    if flat.get("min_version") is not None:
        m.min_version = _int("min_version", flat["min_version"], 0, 32767)
    if flat.get("max_version") is not None:
        m.max_version = _int("max_version", flat["max_version"], 0, 32767)
    if m.min_version is not None and m.max_version is not None and m.min_version > m.max_version:
        raise BadRule(f"min_version {m.min_version} is above max_version {m.max_version}")
    if flat.get("client_id") is not None:
        try:
            m.client_id = re.compile(_str("client_id", flat["client_id"]))
        except re.error as e:
            raise BadRule(
                f"client_id is not a valid regular expression: {e}", ["a Python regular expression"]
            ) from e
    for k in ("client_software_name", "client_software_version", "group", "topic"):
        if flat.get(k) is not None:
            setattr(m, k, _str(k, flat[k]))
    if flat.get("partition") is not None:
        m.partition = _int("partition", flat["partition"], 0)
    if flat.get("connection") is not None:
        m.connection = _int("connection", flat["connection"], 0, 2**63 - 1)

    a = Action()
    errors = flat.get("errors")
    if flat.get("error") is not None:
        a.error = parse_error(flat["error"])
    if flat.get("delay_ms") is not None:
        a.delay_ms = parse_duration_ms("delay_ms", flat["delay_ms"])
    if flat.get("drop") is not None:
        if not isinstance(flat["drop"], bool):
            raise BadRule(f"drop must be true or false, not {flat['drop']!r}", [True, False])
        a.drop = flat["drop"]
    if flat.get("close") is not None:
        if flat["close"] not in CLOSE_WHEN:
            raise BadRule(f"close must be 'before' or 'after', not {flat['close']!r}", list(CLOSE_WHEN))
        a.close = flat["close"]
    if flat.get("throttle_ms") is not None:
        a.throttle_ms = parse_duration_ms("throttle_ms", flat["throttle_ms"])

    rule = FaultRule(rule_id, m, a)
    if errors is not None:
        if not isinstance(errors, list) or not errors:
            raise BadRule("errors must be a non-empty list of error names", error_names())
        rule.errors = [parse_error(e) for e in errors]
    kinds = [k for k in ("error", "drop", "close") if getattr(a, k)] + (
        ["errors"] if errors is not None else []
    )
    if len(kinds) > 1:
        raise BadRule(f"choose one of {', '.join(kinds)} per rule", ["error", "errors", "drop", "close"])
    if not kinds and not a.delay_ms and a.throttle_ms is None:
        raise BadRule("the rule has no action", list(ACTION_KEYS) + ["errors"])
    if (a.error is not None or rule.errors is not None) and m.api_key is not None:
        api = registry.apis[m.api_key]
        if not can_answer_error(api):
            raise BadRule(
                f"{api.name} has no error response; use delay_ms, drop, close or throttle_ms",
                sorted(registry.apis[k].name for k in registry.apis if can_answer_error(registry.apis[k])),
            )
    if (a.error is not None or rule.errors is not None) and m.api_key is None:
        raise BadRule(
            "an error rule must name its api (errors are encoded per API)",
            sorted(api.name for api in registry.apis.values()),
        )

    if flat.get("times") is not None:
        rule.times = _int("times", flat["times"], 1)
    if flat.get("probability") is not None:
        p = flat["probability"]
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p <= 1:
            raise BadRule(f"probability must be a number in (0, 1], not {p!r}", ["a number in (0, 1]"])
        rule.probability = float(p)
    if flat.get("seed") is not None:
        if rule.probability is None:
            raise BadRule("seed goes with probability", ["probability"])
        rule.seed = _int("seed", flat["seed"], -(2**63), 2**63 - 1)
    if rule.errors is not None and rule.times is not None:
        raise BadRule("errors already says how often; drop times", ["errors", "times"])
    if rule.probability is not None:
        rule.rng = random.Random(rule.seed)
    return rule


# ---------------------------------------------------------------------- what a request touches


def request_group(api_key: int, request: Any) -> Iterator[str]:
    """The group ids a request names."""
    g = getattr(request, "group_id", None)
    if isinstance(g, str):
        yield g
    if api_key == FIND_COORDINATOR:
        if getattr(request, "key_type", 0) == 0:
            if request.key:
                yield request.key
            yield from request.coordinator_keys
    for grp in getattr(request, "groups", None) or ():  # OffsetFetch v8+, DescribeGroups, DeleteGroups
        if isinstance(grp, str):
            yield grp
        elif isinstance(getattr(grp, "group_id", None), str):
            yield grp.group_id


_TOPIC_LISTS = ("topic_data", "topics")
_TOPIC_NAMES = ("name", "topic")
_PARTITION_LISTS = ("partition_data", "partitions", "partition_indexes")
_PARTITION_NUMBERS = ("index", "partition", "partition_index")


def request_partitions(
    request: Any, resolve_id: Callable[[Any], str | None]
) -> Iterator[tuple[str, int | None]]:
    """(topic, partition or None) for every topic (and partition) a request names."""
    for attr in _TOPIC_LISTS:
        for t in getattr(request, attr, None) or ():
            name = None
            for n in _TOPIC_NAMES:
                v = getattr(t, n, None)
                if isinstance(v, str) and v:
                    name = v
                    break
            if name is None and getattr(t, "topic_id", None) is not None:
                name = resolve_id(t.topic_id)
            if name is None:
                continue
            parts = None
            for p_attr in _PARTITION_LISTS:
                parts = getattr(t, p_attr, None)
                if parts is not None:
                    break
            if not parts:
                yield name, None
                continue
            for p in parts:
                if isinstance(p, int):
                    yield name, p
                    continue
                for n in _PARTITION_NUMBERS:
                    v = getattr(p, n, None)
                    if isinstance(v, int):
                        yield name, v
                        break


# ---------------------------------------------------------------------- error responses


def can_answer_error(api: Api) -> bool:
    if api.key in _BUILDERS or getattr(api.module, "error_response", None) is not None:
        return True
    cls = getattr(api.codec, api.name + "Response")
    return "error_code" in cls._fields


def error_response(api: Api, version: int, request: Any, code: ErrorCode, services: Services) -> Any:
    """The response Kafka would send for ``request`` failing with ``code`` at ``version``."""
    build = _BUILDERS.get(api.key)
    if build is not None:
        return build(request, version, code, services)
    return api.error_response(version, request, code)


def _leader_hint(code: ErrorCode, version: int, first: int) -> bool:
    return version >= first and code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH)


def _produce(req: Any, version: int, code: ErrorCode, services: Services) -> Any:
    hint = _leader_hint(code, version, 10)
    topics = []
    for t in req.topic_data:
        parts = []
        for p in t.partition_data:
            pr = produce_codec.PartitionProduceResponse(index=p.index, error_code=int(code), base_offset=-1)
            if hint:
                pr.current_leader = produce_codec.LeaderIdAndEpoch(*_leader(services, t.name, p.index))
            parts.append(pr)
        topics.append(
            produce_codec.TopicProduceResponse(name=t.name, topic_id=t.topic_id, partition_responses=parts)
        )
    resp = produce_codec.ProduceResponse(responses=topics)
    if hint:
        leaders = {pr.current_leader.leader_id for t in topics for pr in t.partition_responses}
        resp.node_endpoints = _endpoints(produce_codec.NodeEndpoint, services, leaders)
    return resp


def _leader(services: Services, name: str | None, partition: int, topic_id: Any = None) -> tuple[int, int]:
    """The partition's leader and epoch (this node at epoch 0 on a single node, or when unknown)."""
    nodes = getattr(services, "nodes", None)
    if nodes is None or not nodes.multi:
        return services.node_id, 0
    topic = services.topics.get(name) if name else services.topics.by_id(topic_id)
    if topic is None or not 0 <= partition < topic.partitions:
        return services.node_id, 0
    return nodes.leader(topic, partition)


def _endpoints(cls: Any, services: Services, leaders: set[int]) -> list[Any]:
    """The endpoints of the leaders named (this node's alone on a single node)."""
    nodes = getattr(services, "nodes", None)
    if nodes is None or not nodes.multi:
        return [_endpoint(cls, services)]
    return [_endpoint(cls, services, n) for n in sorted(leaders) if n >= 0]


def _endpoint(cls: Any, services: Services, node: int | None = None) -> Any:
    nodes = getattr(services, "nodes", None)
    address = nodes.address(node, "PLAINTEXT") if nodes is not None and node is not None else None
    host, port = address or services.advertised_address("PLAINTEXT")
    return cls(node_id=services.node_id if node is None else node, host=host, port=port, rack=services.rack)


_FETCH_SESSION_ERRORS = (
    ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
    ErrorCode.INVALID_FETCH_SESSION_EPOCH,
    ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR,
)


def _fetch(req: Any, version: int, code: ErrorCode, services: Services) -> Any:
    """A fetch-session error is the top-level error of an empty response (session id 0), as Kafka
    answers it; any other error is given to every partition of the request, with a top-level NONE,
    as Kafka's broker answers a partition it cannot serve (with the leader on NOT_LEADER_OR_FOLLOWER
    and FENCED_LEADER_EPOCH from v12)."""
    if code in _FETCH_SESSION_ERRORS:
        return fetch_codec.FetchResponse(error_code=int(code), session_id=0)
    hint = _leader_hint(code, version, 12)
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            pd = fetch_codec.PartitionData(
                partition_index=p.partition, error_code=int(code), high_watermark=-1
            )
            if hint:
                pd.current_leader = fetch_codec.LeaderIdAndEpoch(
                    *_leader(services, t.topic, p.partition, t.topic_id)
                )
            parts.append(pd)
        topics.append(
            fetch_codec.FetchableTopicResponse(topic=t.topic, topic_id=t.topic_id, partitions=parts)
        )
    resp = fetch_codec.FetchResponse(error_code=0, session_id=req.session_id, responses=topics)
    if hint:
        leaders = {pd.current_leader.leader_id for t in topics for pd in t.partitions}
        resp.node_endpoints = _endpoints(fetch_codec.NodeEndpoint, services, leaders)
    return resp


def _find_coordinator(req: Any, version: int, code: ErrorCode, services: Services) -> Any:
    if version >= 4:
        keys = req.coordinator_keys
        return fc_codec.FindCoordinatorResponse(
            coordinators=[
                fc_codec.Coordinator(
                    key=k, node_id=-1, host="", port=-1, error_code=int(code), error_message=None
                )
                for k in keys
            ]
        )
    return fc_codec.FindCoordinatorResponse(
        error_code=int(code), error_message=None, node_id=-1, host="", port=-1
    )


def _metadata(req: Any, version: int, code: ErrorCode, services: Services) -> Any:
    topics = [
        md_codec.MetadataResponseTopic(error_code=int(code), name=t.name, topic_id=t.topic_id)
        for t in (req.topics or ())
    ]
    return md_codec.MetadataResponse(cluster_id=services.cluster_id, controller_id=-1, topics=topics)


def _list_offsets(req: Any, version: int, code: ErrorCode, services: Services) -> Any:
    return lo_codec.ListOffsetsResponse(
        topics=[
            lo_codec.ListOffsetsTopicResponse(
                name=t.name,
                partitions=[
                    lo_codec.ListOffsetsPartitionResponse(
                        partition_index=p.partition_index, error_code=int(code), timestamp=-1, offset=-1
                    )
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ]
    )


def _offset_fetch(req: Any, version: int, code: ErrorCode, services: Services) -> Any:
    if version >= 8:
        return of_codec.OffsetFetchResponse(
            groups=[
                of_codec.OffsetFetchResponseGroup(group_id=g.group_id, error_code=int(code))
                for g in req.groups
            ]
        )
    return of_codec.OffsetFetchResponse(error_code=int(code))


_BUILDERS: dict[int, Callable[[Any, int, ErrorCode, Services], Any]] = {
    PRODUCE: _produce,
    FETCH: _fetch,
    FIND_COORDINATOR: _find_coordinator,
    METADATA: _metadata,
    LIST_OFFSETS: _list_offsets,
    OFFSET_FETCH: _offset_fetch,
}


# ---------------------------------------------------------------------- the injector


class FaultInjector:
    """The rules of one broker, and what they do to the requests they match."""

    def __init__(self, registry: Registry, services: Services):
        self.registry = registry
        self.services = services
        self.rules: list[FaultRule] = []
        self._next_id = 1
        #: called with True when the first rule is added and False when the last one goes
        self.on_change: Callable[[bool], None] | None = None

    # --------------------------------------------------------------- rule administration

    def add(self, spec: Mapping[str, Any]) -> FaultRule:
        rule = parse_rule(spec, self.registry, self._next_id)
        self._next_id += 1
        self.rules.append(rule)
        log.info("fault rule %d added: %s", rule.id, rule.to_json(self.registry))
        self._changed()
        return rule

    def remove(self, rule_id: int) -> FaultRule:
        for i, rule in enumerate(self.rules):
            if rule.id == rule_id:
                del self.rules[i]
                log.info("fault rule %d removed (fired %d times)", rule.id, rule.fired)
                self._changed()
                return rule
        raise KeyError(rule_id)

    def clear(self) -> int:
        n = len(self.rules)
        self.rules.clear()
        if n:
            log.info("fault rules cleared (%d)", n)
        self._changed()
        return n

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change(bool(self.rules))

    # --------------------------------------------------------------- matching

    def _matches(self, m: Match, api: Api, version: int, request: Any, client: ClientInfo) -> bool:
        if m.api_key is not None and m.api_key != api.key:
            return False
        if m.min_version is not None and version < m.min_version:
            return False
        if m.max_version is not None and version > m.max_version:
            return False
        if m.connection is not None and client.connection_id != m.connection:
            return False
        if m.client_id is not None and not m.client_id.search(client.client_id or ""):
            return False
        if m.client_software_name is not None and m.client_software_name != client.software_name:
            return False
        if m.client_software_version is not None and m.client_software_version != client.software_version:
            return False
        if m.group is not None and m.group not in request_group(api.key, request):
            return False
        if m.topic is not None or m.partition is not None:
            for topic, partition in request_partitions(request, self._topic_name):
                if (m.topic is None or m.topic == topic) and (
                    m.partition is None or m.partition == partition
                ):
                    break
            else:
                return False
        return True

    def fire(
        self, api: Api, version: int, request: Any, client: ClientInfo, correlation_id: int = -1
    ) -> tuple[FaultRule, Action] | None:
        """The first rule that matches this request and fires now (counted and logged), and the
        action to take (for an ``errors`` rule: its next error)."""
        for rule in self.rules:
            if rule.exhausted or not self._matches(rule.match, api, version, request, client):
                continue
            if rule.rng is not None and rule.rng.random() >= rule.probability:
                continue
            action = rule.action
            if rule.errors is not None:
                action = Action(
                    error=rule.errors[rule.fired], delay_ms=action.delay_ms, throttle_ms=action.throttle_ms
                )
            rule.fired += 1
            log.info(
                "fault rule %d fired (%d) on %s v%d correlation id %d%s from %s on connection %d: %s",
                rule.id,
                rule.fired,
                api.name,
                version,
                correlation_id,
                self._touches(api, request),
                client.describe(),
                client.connection_id,
                action.to_json(),
            )
            if rule.exhausted:
                self.rules.remove(rule)
                log.info("fault rule %d done after %d firing(s)", rule.id, rule.fired)
                self._changed()
            return rule, action
        return None

    def _touches(self, api: Api, request: Any) -> str:
        """`` (group g; topics t-0,u-1)`` for the log line."""
        parts = []
        groups = sorted(set(request_group(api.key, request)))
        if groups:
            parts.append("group " + ",".join(groups))
        topics = sorted(
            {t if p is None else f"{t}-{p}" for t, p in request_partitions(request, self._topic_name)}
        )
        if topics:
            parts.append("topics " + ",".join(topics[:10]) + (" ..." if len(topics) > 10 else ""))
        return f" ({'; '.join(parts)})" if parts else ""

    def _topic_name(self, topic_id: Any) -> str | None:
        t = self.services.topics.by_id(topic_id)
        return t.name if t is not None else None

    # --------------------------------------------------------------- acting

    def intercept(
        self,
        pipeline: RequestPipeline,
        api: Api,
        version: int,
        request: Any,
        correlation_id: int,
        client: ClientInfo,
    ) -> Outcome:
        """The outcome of a decoded request while rules are set (the pipeline calls this)."""
        hit = self.fire(api, version, request, client, correlation_id)
        if hit is None:
            response = pipeline.call(api, version, request, correlation_id, client)
            return pipeline.outcome(api, version, request, correlation_id, client, response)
        rule, action = hit
        if pipeline.tracer is not None:  # the trace journal records the rule that fired
            pipeline.tracer.fault_fired(client, correlation_id, {"rule": rule.id, "action": action.to_json()})
        rest = (api, version, request, correlation_id, client)
        if action.close == "before":
            return Close(f"fault rule {rule.id}: close before handling {api.name}")
        if action.error is not None:
            if api.key == PRODUCE and request.acks == 0:  # no response to carry it: Kafka closes
                return Close(f"fault rule {rule.id}: {action.error.name} on a Produce with acks=0")
            response = error_response(api, version, request, action.error, self.services)
            _set_throttle(response, action.throttle_ms)
            if action.delay_ms:
                return Pending(_later(action.delay_ms, response), False, *rest)
            return encode(api, version, correlation_id, response)

        response = pipeline.call(api, version, request, correlation_id, client)  # handled, whatever follows
        if type(response) is Close:
            return response
        deferred = type(response) is Deferred
        awaitable = response.awaitable if deferred else response
        waits = deferred or (response is not None and hasattr(response, "__await__"))
        if action.close == "after":
            if waits:
                return Pending(_then_close(awaitable, rule.id), deferred, *rest)
            return Close(f"fault rule {rule.id}: close after handling {api.name}")
        if action.drop:
            if waits:  # wait for the handler (e.g. a produce's fsync), answer nothing
                return Pending(_dropped(awaitable), False, *rest)
            return None
        if waits:
            return Pending(
                _adjusted(awaitable, action.delay_ms, action.throttle_ms, api, version), deferred, *rest
            )
        response = _throttled(response, action.throttle_ms, api, version)
        if action.delay_ms:
            return Pending(_later(action.delay_ms, response), False, *rest)
        return pipeline.outcome(api, version, request, correlation_id, client, response)


def _set_throttle(response: Any, throttle_ms: int | None) -> None:
    if throttle_ms is not None and hasattr(response, "throttle_time_ms"):
        response.throttle_time_ms = throttle_ms


async def _later(delay_ms: int, value: Any) -> Any:
    await asyncio.sleep(delay_ms / 1000)
    return value


async def _then_close(awaitable: Any, rule_id: int) -> Any:
    await awaitable
    raise CloseConnection(f"fault rule {rule_id}: close after handling")


async def _dropped(awaitable: Any) -> None:
    await awaitable
    return None


def _throttled(response: Any, throttle_ms: int | None, api: Api, version: int) -> Any:
    """``response`` with ``throttle_time_ms`` set (a body the handler encoded itself, such as
    ApiVersions', is decoded for that)."""
    if throttle_ms is None:
        return response
    if type(response) is bytes:
        response, _end = api.codec.RESPONSE_DECODERS[version](response, 0)
    _set_throttle(response, throttle_ms)
    return response


async def _adjusted(awaitable: Any, delay_ms: int, throttle_ms: int | None, api: Api, version: int) -> Any:
    result = _throttled(await awaitable, throttle_ms, api, version)
    if delay_ms:
        await asyncio.sleep(delay_ms / 1000)
    return result
