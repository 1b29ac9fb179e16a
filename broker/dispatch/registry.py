"""The API registry: which API keys and versions this broker serves, and the handler for each.

A handler module declares ``API_KEY``, optionally ``VERSIONS = (min, max)`` when it serves less than
the schema covers (the same range is in broker.dispatch.VERSIONS, so that the registry knows every
API's versions without importing its module: modules load on an API's first request), and ``handle(ctx, request)`` returning the response object (or ``None`` for "no
response", or an already-encoded body as ``bytes``, or an awaitable of any of these). ApiVersions answers from this registry, so an API is
advertised exactly when a handler for it is registered.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from broker import features
from broker.protocol.errors import ErrorCode
from broker.protocol.framing import request_header_v1, request_header_v2
from broker.protocol.generated import APIS, codec

if TYPE_CHECKING:
    from .services import Services

log = logging.getLogger(__name__)


class Deferred:
    """A response that will be ready later, for which the connection need not wait before handling
    the next request (Produce waiting for its fsync). Responses still go out in request order."""

    __slots__ = ("awaitable",)

    def __init__(self, awaitable: Any):
        self.awaitable = awaitable


class CloseConnection(Exception):
    """Raised by a handler when the right answer is to close the connection (e.g. acks=0 errors)."""


class ClientInfo:
    """What we know about the client on one connection (for logs and DescribeGroups). A plain
    class, not a dataclass: see broker.cluster.Topic."""

    def __init__(
        self,
        peer: str,
        listener: str = "PLAINTEXT",
        mute_ms: int = 0,
        client_id: str | None = None,
        software_name: str | None = None,
        software_version: str | None = None,
        connection_id: int = 0,
        security_protocol: str = "PLAINTEXT",
        principal: str = "User:ANONYMOUS",
        sasl: Any = None,
        node_id: int = -1,
    ) -> None:
        self.peer = peer
        #: the name of the listener the client connected to (its advertised address is the one given)
        self.listener = listener
        #: set by a handler whose client exceeded a quota: the connection handles no further request
        #: for this many ms once the response is out (KIP-219), then resets it to 0
        self.mute_ms = mute_ms
        self.client_id = client_id
        self.software_name = software_name
        self.software_version = software_version
        #: this connection's number in the broker (the control API lists and matches on it)
        self.connection_id = connection_id
        #: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (the listener's security protocol)
        self.security_protocol = security_protocol
        #: who the client is: ``User:<name>`` once SASL authenticated, the certificate's subject on
        #: TLS with a client certificate, else ``User:ANONYMOUS`` (Kafka's principals)
        self.principal = principal
        #: the SASL session (broker.security.sasl.SaslSession) on a SASL listener, else None
        self.sasl = sasl
        #: the node of a multi-node cluster the client reached (-1: the broker's node, services.node_id)
        self.node_id = node_id

    @property
    def host(self) -> str:
        """The client's address (the peer without its port), as ACL hosts name it."""
        return self.peer.rpartition(":")[0].strip("[]")

    def describe(self) -> str:
        sw = f" {self.software_name}/{self.software_version}" if self.software_name else ""
        return f"{self.peer} (client id {self.client_id!r}{sw})"


class RequestContext:
    """What a handler knows about the request besides its body, and the broker services it may use
    (a plain slotted class: one is built per request)."""

    __slots__ = ("services", "client", "api_key", "api_version", "correlation_id", "client_id")

    def __init__(
        self,
        services: Services,
        client: ClientInfo,
        api_key: int,
        api_version: int,
        correlation_id: int,
        client_id: str | None,
    ):
        self.services = services
        self.client = client
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id

    @property
    def node_id(self) -> int:
        """The node the client reached: the one answering (``services.node_id`` on a single node)."""
        node = self.client.node_id
        return self.services.node_id if node < 0 else node

    # Authorization: with no authorizer (the default) everything is allowed, at the cost of one
    # attribute check. Handlers call these with Kafka's operation and resource type codes
    # (broker.security.authorizer) and check what Kafka's KafkaApis checks for their API.

    def allowed(self, op: int, resource_type: int, name: str) -> bool:
        """May this connection's principal do ``op`` on the resource?"""
        authz = self.services.authorizer
        if authz is None:
            return True
        client = self.client
        return authz.authorize(client.principal, client.host, op, resource_type, name)

    def allowed_on_any(self, op: int, resource_type: int) -> bool:
        """May the principal do ``op`` on some resource of the type (Kafka's authorizeByResourceType)?"""
        authz = self.services.authorizer
        if authz is None:
            return True
        client = self.client
        return authz.authorize_any(client.principal, client.host, op, resource_type)

    def authorized_operations(self, resource_type: int, name: str, everything: int) -> int:
        """The KIP-430 bitfield of the operations allowed on the resource (``everything``: the bits of
        every operation that applies to it, the answer without an authorizer)."""
        authz = self.services.authorizer
        if authz is None:
            return everything
        client = self.client
        return authz.authorized_operations(client.principal, client.host, resource_type, name)


class Api:
    """One served API: its key, name and the version range served, known from the start; its handler
    module and generated codec are imported when a request of the API first needs them (reading
    ``handler``, ``plans``, ``codec``, ``decoders``, ``encoders`` or ``module`` imports them once;
    after that they are plain attributes, so the request path pays nothing for the laziness)."""

    #: attributes that only exist once the handler module and the codec are loaded
    LOADED = frozenset({"handler", "codec", "decoders", "encoders", "module", "plans"})

    def __init__(
        self,
        key: int,
        name: str,
        min_version: int,
        max_version: int,
        first_flexible_version: int | None,
        module_name: str,
        declared: tuple[int, int] | None = None,
    ):
        """``module_name``: the handler module (imported on first use); ``declared``: the versions the
        registry's table says the module serves (its ``VERSIONS``, checked when it is loaded)."""
        self.key = key
        self.name = name
        self.min_version = min_version
        self.max_version = max_version
        self.first_flexible_version = first_flexible_version
        self.module_name = module_name
        self.declared = declared

    def load(self) -> None:
        """Import the handler module and the generated codec (once)."""
        if "plans" in self.__dict__:
            return
        mod = importlib.import_module(self.module_name)
        if getattr(mod, "API_KEY", None) != self.key:
            raise ValueError(f"{mod.__name__}: API_KEY {getattr(mod, 'API_KEY', None)} is not {self.key}")
        if getattr(mod, "VERSIONS", None) != self.declared:
            raise ValueError(
                f"{mod.__name__}: VERSIONS {getattr(mod, 'VERSIONS', None)} differs from the registry's "
                f"table ({self.declared}; broker.dispatch.VERSIONS)"
            )
        c = codec(self.key)
        self.codec = c
        # a handler module may put its own decoders in front of the generated ones (Produce: one partition)
        self.decoders = getattr(mod, "REQUEST_DECODERS", c.REQUEST_DECODERS)
        self.encoders = c.RESPONSE_ENCODERS
        self.module = mod
        # Per version: (header reader, body decoder, body encoder, flexible response header?); the
        # header reader gives (client id, position of the body) (broker.protocol.framing). The body
        # encoder gives bytes, or for a response carrying record batches (Fetch) the list of its
        # parts (the generated RESPONSE_PART_ENCODERS): the pipeline writes a large one unjoined.
        # ApiVersions responses always use header v0 so any client can read them (KIP-511).
        parts = getattr(c, "RESPONSE_PART_ENCODERS", None)
        plans = {}
        for v in range(self.min_version, self.max_version + 1):
            flexible = self.flexible(v)
            plans[v] = (
                request_header_v2 if flexible else request_header_v1,
                self.decoders[v],
                parts[v] if parts is not None and parts[v] is not None else self.encoders[v],
                flexible and self.key != 18,
            )
        self.plans = plans
        self.handler = mod.handle  # last: a handler is never seen without its plans
        self.__class__ = Api  # (an UnloadedApi until now) its attributes read without a hook from now on

    def flexible(self, version: int) -> bool:
        f = self.first_flexible_version
        return f is not None and version >= f

    def error_response(self, version: int, request: Any, code: ErrorCode) -> Any | None:
        """A response carrying ``code``: the module's own builder, else the top-level error_code."""
        build = getattr(self.module, "error_response", None)
        if build is not None:
            return build(request, version, code)
        cls = getattr(self.codec, self.name + "Response")
        if "error_code" in cls._fields:
            return cls(error_code=int(code))
        return None

    def __repr__(self) -> str:
        return f"Api({self.key}, {self.name!r}, {self.min_version}-{self.max_version})"


class UnloadedApi(Api):
    """An :class:`Api` whose handler module and codec are not loaded yet: reading one of
    ``Api.LOADED`` loads them, and it becomes a plain Api (in CPython 3.11 a class with a
    ``__getattr__`` hook reads every attribute through it, ~2.5x slower: the request path reads
    ``plans`` and ``handler`` at each request)."""

    def __getattr__(self, attr: str) -> Any:
        # only called for attributes not set yet: the loaded ones, on first use
        if attr not in Api.LOADED:
            raise AttributeError(attr)
        self.load()
        return self.__dict__[attr]


class Registry:
    def __init__(
        self,
        handlers: Iterable[tuple[str, tuple[int, int] | None]],
        persona: Mapping[int, tuple[int, int]] | None = None,
        reports_features: bool = True,
        transaction_version: int = 2,
    ):
        """``handlers``: (handler module, versions it serves or None for all its schema's) per API;
        the modules are imported when their API is first used, not here.
        ``persona``: a Kafka release's advertised ranges (broker.personas): each API is served only
        at the versions both that release and its handler know, and not at all if none.
        ``reports_features``: ApiVersions v3+ lists the feature levels (KIP-584; Redpanda does not).
        ``transaction_version``: the finalized transaction.version (broker.features.transaction_version)."""
        self.apis: dict[int, Api] = {}
        self.reports_features = reports_features
        #: feature name -> (min supported, max supported, finalized level)
        self.features = features.levels(transaction_version)
        #: Responses that depend only on (API, version), encoded once (e.g. ApiVersions).
        self.cache: dict[tuple, bytes] = {}
        by_module = {info.module: info for info in APIS.values()}
        for module_name, declared in handlers:
            info = by_module[module_name.rpartition(".")[2]]
            key = info.key
            lo, hi = declared or (info.min_version, info.max_version)
            if not (info.min_version <= lo <= hi <= info.max_version):
                raise ValueError(f"{module_name}: VERSIONS {lo}-{hi} outside the schema's {info}")
            if persona is not None:
                if key not in persona:
                    continue
                lo, hi = max(lo, persona[key][0]), min(hi, persona[key][1])
                if lo > hi:
                    continue
            self.apis[key] = UnloadedApi(
                key, info.name, lo, hi, info.first_flexible_version, module_name, declared
            )

        self._ranges = [
            (a.key, a.min_version, a.max_version) for a in sorted(self.apis.values(), key=lambda a: a.key)
        ]

    def load_all(self) -> None:
        """Import every handler module now (what a first request of each API would do)."""
        for api in self.apis.values():
            api.load()

    def get(self, api_key: int) -> Api | None:
        return self.apis.get(api_key)

    def ranges(self) -> list[tuple[int, int, int]]:
        """(api key, min version, max version) for every served API, by key."""
        return self._ranges
