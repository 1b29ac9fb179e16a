"""One client connection: frames in, requests dispatched one at a time, responses out in order.

This is an ``asyncio.Protocol`` (callbacks, not Streams: measured 2.6-4x faster per request here).
Each read is split into as many frames as it holds. Like Kafka, a connection has one request in
flight: a handler that returns an awaitable parks the connection, and the frames that arrive
meanwhile wait in order.

Memory per connection is bounded (backpressure): reading pauses while more than ``MAX_QUEUED``
requests or ``MAX_QUEUED_BYTES`` wait, and requests are only handled while the socket's write buffer
is below its high-water mark (asyncio's ``pause_writing``) and one read's answers stay under
``MAX_OUT_BATCH`` bytes. A client that sends without reading its responses therefore stops being
read, and resumes once it drains them. ``memory()`` reports what a connection holds.

A connection is idle (``connections.max.idle.ms``) when no complete request arrived for that long
and none is parked or awaiting its fsync: a client dribbling the bytes of one request counts as
idle, and so does one whose requests wait because it stopped reading the responses.

Anything wrong with the stream itself closes this connection and only this one: a bad length
prefix, an unknown API key, an unsupported version (except ApiVersions, which gets an
UNSUPPORTED_VERSION answer in the v0 format), or a frame that does not decode.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from struct import error as StructError
from typing import TYPE_CHECKING, Any

from broker.dispatch.api_versions import unsupported_version_response
from broker.dispatch.registry import ClientInfo, CloseConnection, Deferred, RequestContext
from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.framing import REQUEST_PREFIX, FrameError, FrameReader, peek_client_id, response_frame
from broker.protocol.primitives import DecodeError

if TYPE_CHECKING:
    from broker.app import Broker

log = logging.getLogger(__name__)

API_VERSIONS = 18
#: Pause reading when this many requests, or this many bytes of them, wait behind the one in flight.
MAX_QUEUED = 64
MAX_QUEUED_BYTES = 4 << 20
#: Responses gathered from one read before the rest of its requests wait for the next loop turn.
MAX_OUT_BATCH = 256 << 10
#: Most deferred responses (e.g. produces waiting for fsync) a connection may have outstanding.
MAX_DEFERRED = 64
_DECODE_ERRORS = (DecodeError, StructError, IndexError, UnicodeDecodeError, ValueError, OverflowError)


class KafkaConnection(asyncio.Protocol):
    def __init__(self, broker: Broker, listener: str = "PLAINTEXT"):
        self.broker = broker
        self.registry = broker.registry
        self.reader = FrameReader(broker.config["socket.request.max.bytes"])
        self.transport: asyncio.Transport | None = None
        self.client = ClientInfo(peer="?", listener=listener)
        self.queue: deque[bytes] = deque()
        self.busy = False
        self.closed = False
        self.reading_paused = False
        self.writing_paused = False
        #: set at shutdown: no more requests are read, the ones in flight finish
        self.draining = False
        #: the peer's IP address, counted against max.connections.per.ip (set by the listener)
        self.ip: str | None = None
        self.last_active = time.monotonic()
        #: Response frames gathered while one read is processed, written together at its end.
        self._out: list[bytes] | None = None
        self._out_bytes = 0
        self._continue_scheduled = False
        self._task: asyncio.Future | None = None
        #: responses in request order once something was deferred: [frame or None while pending]
        self._ordered: deque[list] = deque()
        self._deferred_tasks: set[asyncio.Future] = set()

    # ------------------------------------------------------------------ asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.client.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.broker.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.broker.listener.connection_closed(self)
        self.queue.clear()
        if self._task is not None and not self._task.done():
            self._task.cancel()  # e.g. a long-polling Fetch nobody will read
        for task in self._deferred_tasks:
            task.cancel()
        self.broker.connections.discard(self)

    def pause_writing(self) -> None:
        self.writing_paused = True

    def resume_writing(self) -> None:
        self.writing_paused = False
        self._drain()

    def data_received(self, data: bytes) -> None:
        try:
            frames = self.reader.feed(data)
        except FrameError as e:
            self.close(f"bad frame: {e} (socket.request.max.bytes)")
            return
        if not frames:
            return
        self.last_active = time.monotonic()
        if self.busy or self.queue or self.writing_paused or len(self._ordered) >= MAX_DEFERRED:
            self.queue.extend(frames)
            self._maybe_pause_reading()
            return
        self._out = []
        try:
            for i, frame in enumerate(frames):
                if self.closed:
                    return
                try:
                    self._handle(frame)
                except Exception:  # a bug must cost this connection only, never the server
                    log.exception("unexpected error handling a request from %s", self.client.describe())
                    self.close("internal error")
                    return
                if (
                    self.busy
                    or self.writing_paused
                    or len(self._ordered) >= MAX_DEFERRED
                    or self._out_bytes >= MAX_OUT_BATCH
                ):
                    self.queue.extend(frames[i + 1 :])
                    self._maybe_pause_reading()
                    return
        finally:
            self._flush_out()

    def _flush_out(self) -> None:
        out, self._out = self._out, None
        self._out_bytes = 0
        if out and not self.closed:
            self.transport.write(out[0] if len(out) == 1 else b"".join(out))
        if self.queue and not self._continue_scheduled and self._can_progress():
            # the rest of a read's requests (held back by MAX_OUT_BATCH) go on at the next loop turn,
            # after other connections had theirs
            self._continue_scheduled = True
            asyncio.get_running_loop().call_soon(self._continue)

    def _can_progress(self) -> bool:
        return (
            not self.busy
            and not self.writing_paused
            and not self.closed
            and len(self._ordered) < MAX_DEFERRED
        )

    def _continue(self) -> None:
        self._continue_scheduled = False
        if self.closed:
            return
        self._out = []
        try:
            self._drain()
        finally:
            self._flush_out()

    def memory(self) -> dict[str, int]:
        """What this connection holds, for tests and diagnostics: bytes of an incomplete request
        (``read``), requests waiting and their bytes, bytes not yet taken by the socket (``write``),
        responses held for ordering behind a deferred one."""
        return {
            "read": self.reader.buffered,
            "queued": len(self.queue),
            "queued_bytes": sum(map(len, self.queue)),
            "write": self.transport.get_write_buffer_size() if self.transport is not None else 0,
            "ordered": len(self._ordered),
            "reading_paused": int(self.reading_paused),
            "writing_paused": int(self.writing_paused),
        }

    def stop_reading(self) -> None:
        """At shutdown: read no more requests (those already received are still answered)."""
        self.draining = True
        if not self.reading_paused and not self.closed and self.transport is not None:
            self.reading_paused = True
            self.transport.pause_reading()

    # ------------------------------------------------------------------ request path

    def _handle(self, frame: bytes) -> None:
        """Decode one frame, run its handler, and send the response (or park until it is ready)."""
        try:
            api_key, version, correlation_id = REQUEST_PREFIX.unpack_from(frame, 0)
        except StructError:
            self.close(f"frame of {len(frame)} bytes is too short for a request header")
            return
        api = self.registry.get(api_key)
        if api is None:
            self._close_undecoded(frame, f"unknown API key {api_key}")
            return
        plan = api.plans.get(version)
        if plan is None:
            if api_key == API_VERSIONS:
                body = unsupported_version_response(self.registry.ranges())
                self._write(response_frame(correlation_id, False, body))
                return
            self._close_undecoded(
                frame,
                f"unsupported {api.name} version {version} (we serve {api.min_version}-{api.max_version})",
            )
            return
        decode_header, decode_body, encode_body, flexible_response_header = plan
        try:
            header, pos = decode_header(frame)
            request, _end = decode_body(frame, pos)
        except _DECODE_ERRORS as e:
            self._close_undecoded(frame, f"cannot decode {api.name} v{version}: {e}")
            return
        client = self.client
        client.client_id = header.client_id
        ctx = RequestContext(self.broker, client, api_key, version, correlation_id, header.client_id)
        try:
            response = api.handler(ctx, request)
        except CloseConnection as e:
            self.close(str(e))
            return
        except Exception as e:
            response = self._error_response(api, version, request, e)
            if response is None:
                self.close(f"{api.name} v{version} failed: {e}")
                return
        if type(response) is bytes:  # already encoded by the handler
            self._write(response_frame(correlation_id, flexible_response_header, response))
            return
        if type(response) is Deferred:
            slot: list = [None]
            self._ordered.append(slot)
            task = asyncio.ensure_future(response.awaitable)
            self._deferred_tasks.add(task)
            task.add_done_callback(
                lambda t: self._deferred_done(t, slot, api, version, request, correlation_id)
            )
            return
        if response is not None and hasattr(response, "__await__"):
            self.busy = True
            task = self._task = asyncio.ensure_future(response)
            task.add_done_callback(lambda t: self._finish(t, api, version, request, correlation_id))
            return
        self._send(api, version, correlation_id, response)

    def _finish(
        self, task: asyncio.Future, api: Any, version: int, request: Any, correlation_id: int
    ) -> None:
        self.busy = False
        if self.closed:
            return
        if task.cancelled():
            self.close("request cancelled")
            return
        exc = task.exception()
        if isinstance(exc, CloseConnection):
            self.close(str(exc))
            return
        response = task.result() if exc is None else self._error_response(api, version, request, exc)
        if response is None and exc is not None:
            self.close(f"{api.name} v{version} failed: {exc}")
            return
        self._out = []
        try:
            self._send(api, version, correlation_id, response)
            self._drain()
        finally:
            self._flush_out()

    def _error_response(self, api: Any, version: int, request: Any, exc: BaseException) -> Any:
        """What a failed handler answers: its KafkaError's code, else UNKNOWN_SERVER_ERROR (logged);
        None when the API has no error response (the caller closes the connection)."""
        if isinstance(exc, KafkaError):  # e.g. a commit whose flush failed: its own error code
            return api.error_response(version, request, exc.code)
        log.error("%s v%d from %s: handler failed", api.name, version, self.client.describe(), exc_info=exc)
        return api.error_response(version, request, ErrorCode.UNKNOWN_SERVER_ERROR)

    def _deferred_done(
        self, task: asyncio.Future, slot: list, api: Any, version: int, request: Any, correlation_id: int
    ) -> None:
        self._deferred_tasks.discard(task)
        if self.closed or task.cancelled():
            return
        exc = task.exception()
        if isinstance(exc, CloseConnection):
            self.close(str(exc))
            return
        response = task.result() if exc is None else self._error_response(api, version, request, exc)
        if response is None:
            self.close(f"{api.name} v{version} failed")
            return
        _dh, _db, encode_body, flexible_response_header = api.plans[version]
        slot[0] = response_frame(correlation_id, flexible_response_header, encode_body(response))
        # release every leading response that is ready, in request order
        ready = []
        while self._ordered and self._ordered[0][0] is not None:
            ready.append(self._ordered.popleft()[0])
        if ready:
            self.transport.write(b"".join(ready))
        if not self.busy and self.queue and len(self._ordered) < MAX_DEFERRED:
            self._out = []
            try:
                self._drain()
            finally:
                self._flush_out()

    def _send(self, api: Any, version: int, correlation_id: int, response: Any) -> None:
        if response is None:  # e.g. Produce with acks=0
            return
        _dh, _db, encode_body, flexible_response_header = api.plans[version]
        if type(response) is bytes:  # already encoded by the handler
            body = response
        else:
            try:
                body = encode_body(response)
            except Exception:
                log.exception("%s v%d: cannot encode response %r", api.name, version, response)
                self.close("internal error encoding a response")
                return
        self._write(response_frame(correlation_id, flexible_response_header, body))

    def _drain(self) -> None:
        """Handle queued frames until one parks or writing backs up."""
        while (
            self.queue
            and not self.busy
            and not self.writing_paused
            and not self.closed
            and len(self._ordered) < MAX_DEFERRED
            and self._out_bytes < MAX_OUT_BATCH
        ):
            self._handle(self.queue.popleft())
        if (
            self.reading_paused
            and not self.closed
            and not self.draining
            and len(self.queue) < MAX_QUEUED // 2
            and sum(map(len, self.queue)) < MAX_QUEUED_BYTES // 2
        ):
            self.reading_paused = False
            self.transport.resume_reading()

    def _maybe_pause_reading(self) -> None:
        if self.reading_paused:
            return
        if len(self.queue) >= MAX_QUEUED or sum(map(len, self.queue)) >= MAX_QUEUED_BYTES:
            self.reading_paused = True
            self.transport.pause_reading()

    def _write(self, data: bytes) -> None:
        if self.closed:
            return
        if self._ordered:  # behind a deferred response: keep the order
            self._ordered.append([data])
            return
        if self._out is not None:
            self._out.append(data)
            self._out_bytes += len(data)
        else:
            self.transport.write(data)

    def _close_undecoded(self, frame: bytes, reason: str) -> None:
        """Close for a request we cannot decode, naming the client id its header carries."""
        client_id = peek_client_id(frame)
        if client_id is not None:
            self.client.client_id = client_id
        self.close(reason)

    def close(self, reason: str) -> None:
        """Close this connection (never any other) with a log line naming the client."""
        if self.closed:
            return
        log.warning("closing connection from %s: %s", self.client.describe(), reason)
        self.queue.clear()  # first: the flush below must not schedule more work for it
        self._flush_out()  # answers to the requests before the bad one still go out
        self.closed = True
        if self.transport is not None:
            self.transport.abort()
