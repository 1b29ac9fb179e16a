"""The request pipeline without I/O: a request frame in, what to do about it out.

:meth:`RequestPipeline.handle` decodes the header and body, finds the handler, builds the
:class:`RequestContext` and encodes the response. It never touches a socket or the event loop, so
it can be driven by tests frame by frame; the asyncio connection (connection.py) only moves bytes,
keeps responses in order and waits for awaitables. The outcome of a frame is one of:

* ``bytes``: the complete response frame, to be written;
* ``tuple`` (header, body parts...): a large response frame (a body of at least
  ``framing.LARGE_BODY`` bytes), to be written part after part, never joined (that would copy the
  body once more): (header, body), or for a Fetch the header and its encoder's parts, so that the
  record batches read from the segments are written as they were read;
* ``None``: nothing to answer (Produce with acks=0);
* :class:`Close`: close this connection (a bad frame, an unknown API key or version, an
  undecodable request, a handler that says so), with the reason to log;
* :class:`Pending`: the handler returned an awaitable. ``deferred`` awaitables (Produce waiting
  for its fsync) let the connection go on with the next request, the others park it (a long-polling
  Fetch, a JoinGroup); once it is done, :meth:`RequestPipeline.complete` gives the outcome.

Bytes first: the common outcome is checked with one ``type(...) is bytes``.
"""

from __future__ import annotations

import logging
import struct
from struct import error as StructError
from typing import Any

from broker.dispatch.api_versions import unsupported_version_response
from broker.dispatch.registry import Api, ClientInfo, CloseConnection, Deferred, Registry, RequestContext
from broker.dispatch.services import Services
from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.framing import (
    LARGE_BODY,
    REQUEST_PREFIX,
    peek_client_id,
    response_frame,
    response_header,
    response_parts,
)
from broker.protocol.primitives import DecodeError
from broker.security.errors import SaslFailure

log = logging.getLogger(__name__)
#: one DEBUG line per request (``--log-level debug``); checked once per request through
#: :attr:`RequestPipeline.log_requests`, fixed when the pipeline is built
requests_log = logging.getLogger("broker.requests")

API_VERSIONS = 18
DECODE_ERRORS = (DecodeError, StructError, IndexError, UnicodeDecodeError, ValueError, OverflowError)


class Close:
    """Close the connection; ``reason`` is logged with the client's description."""

    __slots__ = ("reason",)

    def __init__(self, reason: str):
        self.reason = reason

    def __repr__(self) -> str:
        return f"Close({self.reason!r})"


class Pending:
    """A response that comes from an awaitable; hand the finished awaitable to ``complete``."""

    __slots__ = ("awaitable", "deferred", "api", "version", "request", "correlation_id", "client", "size")

    def __init__(
        self,
        awaitable: Any,
        deferred: bool,
        api: Api,
        version: int,
        request: Any,
        correlation_id: int,
        client: ClientInfo,
    ):
        self.awaitable = awaitable
        self.deferred = deferred
        self.api = api
        self.version = version
        self.request = request
        self.correlation_id = correlation_id
        self.client = client
        #: the request frame's bytes, while a connection holds it deferred
        self.size = 0


Outcome = bytes | tuple[bytes, bytes] | Close | Pending | None


class RequestPipeline:
    """decode -> handler -> encode for every connection of a broker (it keeps no per-connection
    state: the connection passes its :class:`ClientInfo`)."""

    __slots__ = ("registry", "apis", "services", "tracer", "faults", "log_requests")

    def __init__(self, registry: Registry, services: Services):
        self.registry = registry
        #: the registry's APIs by key (its dict, looked up directly on the hot path)
        self.apis = registry.apis
        self.services = services
        #: the trace journal while tracing is on, else None (see set_tracer)
        self.tracer: Any = None
        #: the fault injector while fault rules are set, else None (broker.control sets it)
        self.faults: Any = None
        self.log_requests = requests_log.isEnabledFor(logging.DEBUG)

    def handle(self, frame: bytes, client: ClientInfo) -> Outcome:
        """The outcome of one request frame (see the module docstring)."""
        try:
            api_key, version, correlation_id = REQUEST_PREFIX.unpack_from(frame, 0)
        except StructError:
            return Close(f"frame of {len(frame)} bytes is too short for a request header")
        api = self.apis.get(api_key)
        if api is None:
            return _close_undecoded(frame, client, f"unknown API key {api_key}")
        plan = api.plans.get(version)
        if plan is None:
            if api_key == API_VERSIONS:  # answered in the v0 format with the versions to retry (KIP-511)
                # (as Kafka: ApiVersions' range only; the Redpanda persona, without features, all)
                body = unsupported_version_response(self.registry.ranges(), self.registry.reports_features)
                return response_frame(correlation_id, False, body)
            return _close_undecoded(
                frame,
                client,
                f"unsupported {api.name} version {version} (we serve {api.min_version}-{api.max_version})",
            )
        decode_header, decode_body, encode_body, flexible_response_header = plan
        try:
            client_id, pos = decode_header(frame)
            request, _end = decode_body(frame, pos)
        except DECODE_ERRORS as e:
            return _close_undecoded(frame, client, f"cannot decode {api.name} v{version}: {e}")
        client.client_id = client_id
        if self.faults is not None:  # fault rules are set (broker.control.faults)
            return self.faults.intercept(self, api, version, request, correlation_id, client)
        # call() and outcome() below, inlined: this is the hot path
        ctx = RequestContext(self.services, client, api_key, version, correlation_id, client_id)
        try:
            response = api.handler(ctx, request)
        except CloseConnection as e:
            return Close(str(e))
        except Exception as e:
            response = _error_response(api, version, request, e, client)
            if response is None:
                return Close(f"{api.name} v{version} failed: {e}")
        if self.log_requests:
            _log_request(api, version, correlation_id, client, response)
        if type(response) is bytes:  # already encoded by the handler
            return response_frame(correlation_id, flexible_response_header, response)
        if type(response) is Deferred:
            return Pending(response.awaitable, True, api, version, request, correlation_id, client)
        if response is not None and hasattr(response, "__await__"):
            return Pending(response, False, api, version, request, correlation_id, client)
        return encode(api, version, correlation_id, response)

    def handle_unauthenticated(self, frame: bytes, client: ClientInfo) -> Outcome:
        """:meth:`handle` for a connection of a SASL listener that has not authenticated yet
        (``client.sasl`` is its session). As Kafka: only ApiVersions and SaslHandshake, then
        SaslAuthenticate, are served; any other request closes the connection without reaching a
        handler. After a SaslHandshake v0 a frame is a bare SASL token, answered by a bare
        length-prefixed token (a failure closes the connection)."""
        session = client.sasl
        if session.raw:
            try:
                token = session.step(bytes(frame))  # (a frame whose first two bytes are 0 is a bytearray)
            except SaslFailure as e:
                return Close(f"SASL authentication failed (user {session.user!r}): {e}")
            return struct.pack(">i", len(token)) + token
        try:
            api_key, version, _corr = REQUEST_PREFIX.unpack_from(frame, 0)
        except StructError:
            return Close(f"frame of {len(frame)} bytes is too short for a request header")
        refused = session.allows(api_key)
        if refused is not None:
            return _close_undecoded(frame, client, refused + " (not authenticated)")
        if api_key == API_VERSIONS:
            api = self.registry.get(API_VERSIONS)
            session.versions_answered = api is not None and version in api.plans
        return self.handle(frame, client)

    def call(self, api: Api, version: int, request: Any, correlation_id: int, client: ClientInfo) -> Any:
        """The handler's answer to a decoded request (a failure becomes its error response), or
        :class:`Close` (for the fault injector; :meth:`handle` has this inline)."""
        ctx = RequestContext(self.services, client, api.key, version, correlation_id, client.client_id)
        try:
            response = api.handler(ctx, request)
        except CloseConnection as e:
            return Close(str(e))
        except Exception as e:
            response = _error_response(api, version, request, e, client)
            if response is None:
                return Close(f"{api.name} v{version} failed: {e}")
        if self.log_requests:
            _log_request(api, version, correlation_id, client, response)
        return response

    def outcome(
        self, api: Api, version: int, request: Any, correlation_id: int, client: ClientInfo, response: Any
    ) -> Outcome:
        """What to do with a handler's answer (see the module docstring; :meth:`handle` has this
        inline)."""
        if type(response) is bytes:  # already encoded by the handler
            return response_frame(correlation_id, api.plans[version][3], response)
        if type(response) is Deferred:
            return Pending(response.awaitable, True, api, version, request, correlation_id, client)
        if type(response) is Close:
            return response
        if response is not None and hasattr(response, "__await__"):
            return Pending(response, False, api, version, request, correlation_id, client)
        return encode(api, version, correlation_id, response)

    def complete(self, pending: Pending, result: Any = None, exc: BaseException | None = None) -> Outcome:
        """The outcome of a finished :class:`Pending`: its result, or the exception it raised
        (a handler's KafkaError becomes that error code; a deferred response may not be empty)."""
        if type(result) is bytes and exc is None:  # already encoded by the handler (a Produce's answer)
            return response_frame(pending.correlation_id, pending.api.plans[pending.version][3], result)
        api, version = pending.api, pending.version
        if isinstance(exc, CloseConnection):
            return Close(str(exc))
        if exc is not None:
            result = _error_response(api, version, pending.request, exc, pending.client)
            if result is None:
                return Close(f"{api.name} v{version} failed: {exc}")
        elif result is None and pending.deferred:
            return Close(f"{api.name} v{version} failed")
        return encode(api, version, pending.correlation_id, result)

    def set_tracer(self, tracer: Any) -> None:
        """Record every request in ``tracer`` (broker.control.trace), or stop (None). The pipeline
        becomes a :class:`TracedPipeline` meanwhile, so an untraced one pays nothing for it."""
        self.tracer = tracer
        self.__class__ = RequestPipeline if tracer is None else TracedPipeline


class TracedPipeline(RequestPipeline):
    """A pipeline while its ``tracer`` is set (:meth:`RequestPipeline.set_tracer`): the tracer
    runs the untraced :meth:`RequestPipeline.handle` / :meth:`RequestPipeline.complete` and records
    the request and its outcome."""

    __slots__ = ()

    def handle(self, frame: bytes, client: ClientInfo) -> Outcome:
        if type(frame) is bytearray:  # a large Produce frame, which the append would stamp in place:
            frame = bytes(frame)  # the tracer decodes the request as the client sent it
        return self.tracer.handle(self, frame, client)

    def complete(self, pending: Pending, result: Any = None, exc: BaseException | None = None) -> Outcome:
        return self.tracer.complete(self, pending, result, exc)


def _log_request(api: Api, version: int, correlation_id: int, client: ClientInfo, response: Any) -> None:
    error = getattr(response, "error_code", 0)
    try:
        error_name = ErrorCode(error).name
    except ValueError:
        error_name = str(error)
    requests_log.debug(
        "%s v%d correlation %d from %s%s%s",
        api.name,
        version,
        correlation_id,
        client.describe(),
        f": error {error_name}" if error else "",
        " (pending)" if type(response) is Deferred or hasattr(response, "__await__") else "",
    )


#: a large answer in parts is written unjoined when its parts average at least this many bytes
MIN_AVERAGE_PART = 1024


def encode(api: Api, version: int, correlation_id: int, response: Any) -> bytes | tuple | Close | None:
    """The response frame for a handler's answer (``None``: no response)."""
    if response is None:  # e.g. Produce with acks=0
        return None
    _dh, _db, encode_body, flexible_response_header = api.plans[version]
    if type(response) is bytes:  # already encoded by the handler
        return response_frame(correlation_id, flexible_response_header, response)
    try:
        body = encode_body(response)
    except Exception:
        log.exception("%s v%d: cannot encode response %r", api.name, version, response)
        return Close("internal error encoding a response")
    if type(body) is list:  # a response with record batches, in parts (registry.Api.load)
        size = sum(map(len, body))
        # written part by part when large and its parts are too (the batches read from the
        # segments): a writev of many tiny parts -- thousands of partitions of a few records each --
        # costs the loop more than joining them (~50 ns a part against ~0.15 ns a byte)
        if size >= LARGE_BODY and size >= len(body) * MIN_AVERAGE_PART:
            return (response_header(correlation_id, flexible_response_header, size), *body)
        body = b"".join(body)
    elif len(body) >= LARGE_BODY:
        return response_parts(correlation_id, flexible_response_header, body)
    return response_frame(correlation_id, flexible_response_header, body)


def _error_response(api: Api, version: int, request: Any, exc: BaseException, client: ClientInfo) -> Any:
    """What a failed handler answers: its KafkaError's code, else UNKNOWN_SERVER_ERROR (logged);
    None when the API has no error response (the caller closes the connection)."""
    if isinstance(exc, KafkaError):  # e.g. a commit whose flush failed: its own error code
        return api.error_response(version, request, exc.code)
    log.error("%s v%d from %s: handler failed", api.name, version, client.describe(), exc_info=exc)
    return api.error_response(version, request, ErrorCode.UNKNOWN_SERVER_ERROR)


def _close_undecoded(frame: bytes, client: ClientInfo, reason: str) -> Close:
    """Close for a request we cannot decode, naming the client id its header carries."""
    client_id = peek_client_id(frame)
    if client_id is not None:
        client.client_id = client_id
    return Close(reason)
