"""Client quotas: the entities and their values (DescribeClientQuotas / AlterClientQuotas), kept in
``<data dir>/client-quotas.json``, and their enforcement on Produce and Fetch.

Entities are Kafka's: a map of entity type (``user``, ``client-id``, ``ip``) to a name, or to
``None`` for the type's default entity. Validation follows Kafka's controller
(ClientQuotaControlManager): quota keys ``producer_byte_rate``, ``consumer_byte_rate`` (LONG),
``request_percentage``, ``controller_mutation_rate`` (DOUBLE) for user/client-id entities and
``connection_creation_rate`` (INT) for ip entities; anything else is INVALID_REQUEST, as are
values <= 0, fractions of integral keys, empty names, an ip combined with user or client-id, and
an empty entity. Describing filters as Kafka's ClientQuotasImage does.

Enforcement follows Kafka's ClientQuotaManager: the quota that applies to a (user, client id) is
looked up in Kafka's order (user+client, user+default client, user, default user+client, default
user+default client, default user, client, default client); the bytes of each request (Produce)
or response (Fetch) are recorded in a rate measured over ``quota.window.num`` samples of
``quota.window.size.seconds``, and a rate above the quota gives a throttle time
``(rate - quota) / quota * window``: the response carries it in ``throttle_time_ms`` and the
connection handles no further request for that long (KIP-219). Clients that share a quota entity
share its rate, as in Kafka. Without any byte-rate quota of a kind, recording costs one attribute
check. Request-rate (``request_percentage``) and connection-rate quotas are stored and described
but not enforced.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import math
import socket
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from broker.datadir import write_durably
from broker.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

FILE = "client-quotas.json"

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
#: key -> Kafka's config type, per kind of entity
USER_CLIENT_KEYS = {
    PRODUCER_BYTE_RATE: "LONG",
    CONSUMER_BYTE_RATE: "LONG",
    "request_percentage": "DOUBLE",
    "controller_mutation_rate": "DOUBLE",
}
IP_KEYS = {"connection_creation_rate": "INT"}
_TYPE_MAX = {"INT": 2**31 - 1, "LONG": 2**63 - 1}

#: above this many measured clients, those idle for a whole measuring span are forgotten
MAX_IDLE_RATES = 1000

MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_SPECIFIED = 2

#: an entity: ((type, name or None), ...) in the order Kafka's answers list the types (the order
#: of its small hash maps: client-id, user, ip, then any other type by name)
Entity = tuple[tuple[str, str | None], ...]
_TYPE_ORDER = {CLIENT_ID: "0", USER: "1", IP: "2"}


def entity_of(pairs: Iterable[tuple[str, str | None]]) -> Entity:
    """The entity of request parts, later parts of a type replacing earlier ones (as Kafka maps them)."""
    return tuple(sorted(dict(pairs).items(), key=lambda p: _TYPE_ORDER.get(p[0], "3" + p[0])))


def entity_text(entity: Entity) -> str:
    inner = ", ".join(f"{t}={n}" for t, n in entity)
    return f"ClientQuotaEntity(entries={{{inner}}})"


class Rate:
    """Kafka's Rate over a SampledStat sum: ``samples`` windows of ``window_ms``; the rate is the
    sum of the live samples over the elapsed time, counted as at least ``samples - 1`` whole
    windows."""

    __slots__ = ("samples", "window_ms", "_s", "_current")

    def __init__(self, samples: int, window_ms: int):
        self.samples = samples
        self.window_ms = window_ms
        #: [value, start_ms, last_event_ms] per sample; one extra for the overlapping one
        self._s: list[list[float]] = []
        self._current = 0

    def record(self, value: float, now: float) -> None:
        s = self._current_sample(now)
        if now - s[1] >= self.window_ms:
            self._current = (self._current + 1) % (self.samples + 1)
            if self._current >= len(self._s):
                s = [0.0, now, now]
                self._s.append(s)
            else:
                s = self._s[self._current]
                s[0], s[1], s[2] = 0.0, now, now
        s[0] += value
        s[2] = now

    def _current_sample(self, now: float) -> list[float]:
        if not self._s:
            self._s.append([0.0, now, now])
        return self._s[self._current]

    def idle_since(self, now: float) -> float:
        """Milliseconds since the last value was recorded."""
        return now - max((s[2] for s in self._s), default=now)

    def _purge(self, now: float) -> None:
        expire = self.samples * self.window_ms
        for s in self._s:
            if now - s[2] >= expire:
                s[0], s[1], s[2] = 0.0, now, now

    def window_size(self, now: float) -> float:
        self._purge(now)
        if not self._s:
            self._s.append([0.0, now, now])
        elapsed = now - min(s[1] for s in self._s)
        full = int(elapsed // self.window_ms)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1.0)

    def measure(self, now: float) -> float:
        """Per second."""
        self._purge(now)
        total = sum(s[0] for s in self._s)
        return total / (self.window_size(now) / 1000.0)


class ByteRateQuota:
    """One kind of byte-rate quota (produce or fetch) for every client: Kafka's ClientQuotaManager
    with its default callback."""

    __slots__ = ("key", "enabled", "_quotas", "_rates", "_clock", "samples", "window_ms")

    def __init__(
        self,
        key: str,
        quotas: dict[Entity, dict[str, float]],
        clock: Callable[[], float],
        samples: int,
        window_ms: int,
    ):
        self.key = key
        #: any quota of this key is set (else nothing is recorded)
        self.enabled = False
        self._quotas = quotas
        self._rates: dict[tuple[str, str], Rate] = {}
        self._clock = clock
        self.samples = samples
        self.window_ms = window_ms

    def refresh(self) -> None:
        """After the quotas changed: a client's rate carries on under its new quota, as Kafka's
        sensors do (one whose entity changed may be measured under other tags from now on)."""
        self.enabled = any(self.key in values for values in self._quotas.values())

    def _get(self, entity: Entity) -> float | None:
        values = self._quotas.get(entity)
        return None if values is None else values.get(self.key)

    def resolve(self, user: str, client_id: str) -> tuple[tuple[str, str], float | None]:
        """(the metric tags whose rate is shared, the quota) for a user and client id, in Kafka's
        order of precedence."""
        u, c, du, dc = (USER, user), (CLIENT_ID, client_id), (USER, None), (CLIENT_ID, None)
        for entity, tags in (
            ((c, u), (user, client_id)),
            ((dc, u), (user, client_id)),
            ((u,), (user, "")),
            ((c, du), (user, client_id)),
            ((dc, du), (user, client_id)),
            ((du,), (user, "")),
            ((c,), ("", client_id)),
            ((dc,), ("", client_id)),
        ):
            q = self._get(entity)
            if q is not None:
                return tags, q
        return ("", client_id), None

    def record(self, user: str, client_id: str, value: float) -> int:
        """Record ``value`` bytes for the client; the throttle time in ms (0: within its quota)."""
        tags, quota = self.resolve(user, client_id)
        if quota is None:
            return 0
        now = self._clock() * 1000.0
        rate = self._rates.get(tags)
        if rate is None:
            if len(self._rates) >= MAX_IDLE_RATES:
                self._forget_idle(now)
            rate = self._rates[tags] = Rate(self.samples, self.window_ms)
        rate.record(value, now)
        observed = rate.measure(now)
        if observed <= quota or math.isnan(quota):  # a NaN quota throttles for 0 ms in Kafka
            return 0
        return min(round((observed - quota) / quota * rate.window_size(now)), 2**31 - 1)

    def _forget_idle(self, now: float) -> None:
        """Drop the rates of clients idle for a whole measuring span (they would measure 0)."""
        span = self.samples * self.window_ms
        for tags in [t for t, r in self._rates.items() if r.idle_since(now) >= span]:
            del self._rates[tags]

    def unrecord(self, user: str, client_id: str, value: float) -> None:
        """Take back bytes recorded for a response that was not sent (a throttled fetch)."""
        tags, quota = self.resolve(user, client_id)
        rate = self._rates.get(tags)
        if quota is not None and rate is not None:
            rate.record(-value, self._clock() * 1000.0)

    def max_in_window(self, user: str, client_id: str) -> int | None:
        """The most bytes one response may hold without being throttled for sure (Kafka caps a
        consumer's fetch max_bytes to it), or None with no quota."""
        _tags, quota = self.resolve(user, client_id)
        if quota is None or math.isnan(quota):
            return None
        return int(min(quota * (self.samples - 1) * self.window_ms / 1000.0, 2**31 - 1))


def user_of(client: object) -> str:
    """The user name a connection's quotas are looked up by (``ANONYMOUS`` unless authenticated)."""
    principal = getattr(client, "principal", None) or "User:ANONYMOUS"
    return principal.split(":", 1)[1] if ":" in principal else principal


class ClientQuotas:
    """The quota entities of this broker and their enforcement."""

    def __init__(
        self,
        data_dir: Path | None,
        window_num: int = 11,
        window_size_seconds: int = 1,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.path = None if data_dir is None else Path(data_dir) / FILE
        #: entity -> key -> value, in the order entities were first set
        self.entities: dict[Entity, dict[str, float]] = {}
        if self.path is not None and self.path.exists():
            self.entities = _load(self.path)
        window_ms = window_size_seconds * 1000
        self.produce = ByteRateQuota(PRODUCER_BYTE_RATE, self.entities, clock, window_num, window_ms)
        self.fetch = ByteRateQuota(CONSUMER_BYTE_RATE, self.entities, clock, window_num, window_ms)
        self.produce.refresh()
        self.fetch.refresh()

    # ------------------------------------------------------------------ DescribeClientQuotas

    def describe(
        self, components: Iterable[tuple[str, int, str | None]], strict: bool
    ) -> list[tuple[Entity, dict[str, float]]]:
        """The entities a filter selects, as Kafka's ClientQuotasImage.describe; raises KafkaError
        (INVALID_REQUEST, or UNSUPPORTED_VERSION for an unknown entity type) for a bad filter."""
        exact: dict[str, str | None] = {}
        typed: set[str] = set()
        for entity_type, match_type, match in components:
            if entity_type == "":
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Invalid empty entity type.")
            if entity_type in exact or entity_type in typed:
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST,
                    f"Entity type {entity_type} cannot appear more than once in the filter.",
                )
            if entity_type not in ENTITY_TYPES:
                raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {entity_type}")
            if match_type == MATCH_EXACT:
                if match is None:
                    raise KafkaError(
                        ErrorCode.INVALID_REQUEST,
                        "Request specified MATCH_TYPE_EXACT, but set match string to null.",
                    )
                exact[entity_type] = match
            elif match_type == MATCH_DEFAULT:
                if match is not None:
                    raise KafkaError(
                        ErrorCode.INVALID_REQUEST,
                        "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
                    )
                exact[entity_type] = None
            elif match_type == MATCH_SPECIFIED:
                if match is not None:
                    raise KafkaError(
                        ErrorCode.INVALID_REQUEST,
                        "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
                    )
                typed.add(entity_type)
            else:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown match type {match_type}")
        named = exact.keys() | typed
        if IP in named and (USER in named or CLIENT_ID in named):
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                "Invalid entity filter component combination. IP filter component should not be used "
                "with user or clientId filter component.",
            )
        out = []
        for entity, values in self.entities.items():
            parts = dict(entity)
            if strict and len(parts) != len(exact) + len(typed):
                continue
            if any(t not in parts or parts[t] != name for t, name in exact.items()):
                continue
            if any(t not in parts for t in typed):
                continue
            out.append((entity, dict(values)))
        return out

    # ------------------------------------------------------------------ AlterClientQuotas

    def alter(
        self,
        entries: Iterable[tuple[Entity, list[tuple[str, float | None]]]],
        validate_only: bool,
    ) -> list[tuple[Entity, ErrorCode, str | None]]:
        """Apply (entity, [(key, value or None to remove)]) entries as Kafka's controller does: an
        entity with any bad part or value changes nothing and gets its error, the others change (all
        in one durable write). One result per distinct entity, in first-seen order."""
        results: dict[Entity, tuple[ErrorCode, str | None]] = {}
        changes: list[tuple[Entity, dict[str, float | None]]] = []
        for entity, ops in entries:
            alterations: dict[str, float | None] = {}
            for key, value in ops:
                if key in alterations:
                    results[entity] = (
                        ErrorCode.INVALID_REQUEST,
                        f"Duplicate quota key {key} not updating quota for this entity {entity_text(entity)}",
                    )
                else:
                    alterations[key] = value
            if entity in results:
                results[entity] = (
                    ErrorCode.INVALID_REQUEST,
                    f"Ignoring duplicate entity {entity_text(entity)}",
                )
                continue
            try:
                _validate(entity, alterations)
            except KafkaError as e:
                results[entity] = (e.code, e.message)
                continue
            results[entity] = (ErrorCode.NONE, None)
            changes.append((entity, alterations))
        if not validate_only and changes:
            updated = {e: dict(v) for e, v in self.entities.items()}
            for entity, alterations in changes:
                values = updated.setdefault(entity, {})
                for key, value in alterations.items():
                    if value is None:
                        values.pop(key, None)
                    else:
                        values[key] = float(value)
                if not values:
                    del updated[entity]
            if updated != self.entities:
                if self.path is not None:
                    _save(self.path, updated)
                self.entities.clear()
                self.entities.update(updated)
                self.produce.refresh()
                self.fetch.refresh()
        return [(entity, code, message) for entity, (code, message) in results.items()]


def _validate(entity: Entity, alterations: dict[str, float | None]) -> None:
    if not entity:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity")
    for entity_type, name in entity:
        if entity_type not in ENTITY_TYPES:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unhandled client quota entity type: {entity_type}")
        if name is not None and name == "":
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Empty {entity_type} not supported")
    parts = dict(entity)
    if IP in parts:
        if USER in parts or CLIENT_ID in parts:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId",
            )
        if not _valid_ip_entity(parts[IP]):
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"{parts[IP]} is not a valid IP or resolvable host.")
        keys = IP_KEYS
    else:
        keys = USER_CLIENT_KEYS
    for key, value in alterations.items():
        if value is None:
            continue
        kind = keys.get(key)
        if kind is None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Invalid configuration key {key}")
        if value <= 0.0:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Quota {key} must be greater than 0")
        if kind == "DOUBLE":
            continue
        if value > _TYPE_MAX[kind]:
            article = "an" if kind == "INT" else "a"
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"Proposed value for {key} is too large for {article} {kind}."
            )
        if not math.isnan(value) and abs(math.fmod(value, 1.0)) > 1e-6:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"{key} cannot be a fractional value.")


def _valid_ip_entity(name: str | None) -> bool:
    """An IP address or a host name that resolves (Kafka's InetAddress.getByName), or the default."""
    if name is None:
        return True
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        pass
    try:
        socket.getaddrinfo(name, None)
        return True
    except (OSError, UnicodeError):
        return False


def _load(path: Path) -> dict[Entity, dict[str, float]]:
    data = json.loads(path.read_text())
    out: dict[Entity, dict[str, float]] = {}
    for item in data.get("entities", []):
        entity = entity_of((p[0], p[1]) for p in item["entity"])
        out[entity] = {k: float(v) for k, v in item["quotas"].items()}
    return out


def _save(path: Path, entities: dict[Entity, dict[str, float]]) -> None:
    """Written whole, atomically and durably (temp file, fsync, rename, directory fsync)."""
    doc = {
        "version": 1,
        "entities": [
            {"entity": [list(p) for p in entity], "quotas": values} for entity, values in entities.items()
        ],
    }
    write_durably(path, json.dumps(doc, indent=1).encode())
