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

What a request frame means (decode, handler, encode) is decided without I/O by the broker's
:class:`~broker.server.pipeline.RequestPipeline`; this class moves bytes, keeps the order of the
responses and waits for the awaitables handlers return.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from asyncio import Future
from collections import deque
from typing import TYPE_CHECKING

from broker.dispatch.registry import ClientInfo
from broker.protocol.framing import FrameError, FrameReader, frame_size
from broker.security.tls import principal_from_cert

from .pipeline import Close, Pending, RequestPipeline

if TYPE_CHECKING:
    from broker.security.sasl import Authenticator
    from broker.security.tls import PrincipalRules

    from .listener import Listener

log = logging.getLogger(__name__)

#: Pause reading when this many requests, or this many bytes of them, wait behind the one in flight.
MAX_QUEUED = 64
MAX_QUEUED_BYTES = 4 << 20
#: Responses gathered from one read before the rest of its requests wait for the next loop turn.
MAX_OUT_BATCH = 256 << 10
#: Most responses a connection may hold for ordering once one is deferred (e.g. produces waiting for
#: their group commit), and most bytes of the deferred requests' frames (a deferred request keeps its
#: frame until answered). Every request held this way shares the next group commit: a client with
#: many requests in flight (librdkafka sends one Produce per partition) gets them all appended and
#: made durable by a few fsyncs, instead of one group commit per 64 of them.
MAX_DEFERRED = 4096
MAX_DEFERRED_BYTES = 32 << 20

#: Largest frame accepted before SASL authentication (Kafka's sasl.server.max.receive.size default).
SASL_MAX_RECEIVE = 524288

#: connection ids, unique in the process
_connection_ids = itertools.count(1)


class KafkaConnection(asyncio.Protocol):
    def __init__(
        self,
        pipeline: RequestPipeline,
        listener: Listener,
        listener_name: str = "PLAINTEXT",
        sasl: Authenticator | None = None,
        security_protocol: str = "PLAINTEXT",
        principal_rules: PrincipalRules | None = None,
    ):
        """``listener``: the accepting side (it counts the connections and is told when one ends);
        ``listener_name``: the Kafka listener the client connected to; ``sasl``: its authenticator
        on a SASL listener (requests go through the pre-authentication gate until authenticated)."""
        self.pipeline = pipeline
        self.listener = listener
        self.reader = FrameReader(listener.max_request_bytes)
        self.transport: asyncio.Transport | None = None
        self.client = ClientInfo(
            peer="?",
            listener=listener_name,
            connection_id=next(_connection_ids),
            security_protocol=security_protocol,
            node_id=listener.node_id,
        )
        #: ssl.principal.mapping.rules on a TLS listener
        self.principal_rules = principal_rules
        if sasl is not None:  # until authenticated; the class's _handle (no gate) afterwards
            self.client.sasl = sasl.session()
            self._handle = self._handle_gated  # type: ignore[method-assign]
            # Kafka's sasl.server.max.receive.size: the largest frame before authentication
            self.reader.max_size = min(self.reader.max_size, SASL_MAX_RECEIVE)
        self.opened = time.time()
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
        #: the parked request (``busy``) whose ``_task`` is awaited
        self._parked: Pending | None = None
        #: answers in request order once something was deferred: a response frame, or the
        #: :class:`Pending` of a deferred request (its ``awaitable`` a future) not answered yet. The
        #: first entry is always a Pending, and only its future has a callback (``_head_done``): a
        #: group commit finishes every request it covers in one loop turn, so one callback per
        #: group commit settles all of them, in order, not one callback per request.
        self._ordered: deque = deque()
        #: bytes of the frames of the deferred requests not answered yet
        self._deferred_bytes = 0

    # ------------------------------------------------------------------ asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.client.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        if transport.get_extra_info("sslcontext") is not None:
            self.client.principal = principal_from_cert(
                transport.get_extra_info("peercert"), self.principal_rules
            )
        self.listener.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.listener.connection_closed(self)
        self.queue.clear()
        if self._task is not None and not self._task.done():
            self._task.cancel()  # e.g. a long-polling Fetch nobody will read
        for entry in self._ordered:
            if type(entry) is Pending:
                entry.awaitable.cancel()
        self.listener.connections.discard(self)

    def waiting(self) -> list[asyncio.Future]:
        """The futures this connection waits on and that are not done: its parked request's, its
        deferred requests' (the listener cancels them at shutdown)."""
        out = [e.awaitable for e in self._ordered if type(e) is Pending and not e.awaitable.done()]
        if self._task is not None and not self._task.done():
            out.append(self._task)
        return out

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
        if self.busy or self.queue or self.writing_paused or self._backlogged():
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
                    or self._out_bytes >= MAX_OUT_BATCH
                    or (self._ordered and self._backlogged())
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
            self._send(out)
        if self.queue and not self._continue_scheduled and self._can_progress():
            # the rest of a read's requests (held back by MAX_OUT_BATCH) go on at the next loop turn,
            # after other connections had theirs
            self._continue_scheduled = True
            asyncio.get_running_loop().call_soon(self._continue)

    def _can_progress(self) -> bool:
        return not self.busy and not self.writing_paused and not self.closed and not self._backlogged()

    def _backlogged(self) -> bool:
        """Too many responses held for ordering, or too many bytes of deferred requests: no further
        request is handled until some are answered."""
        return len(self._ordered) >= MAX_DEFERRED or self._deferred_bytes >= MAX_DEFERRED_BYTES

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
        """Handle one frame: send its response, or park until it is ready."""
        out = self.pipeline.handle(frame, self.client)
        if type(out) is bytes:
            gathered = self._out
            if gathered is not None and not self._ordered and not self.closed:  # _write, inlined
                gathered.append(out)
                self._out_bytes += len(out)
            else:
                self._write(out)
        elif type(out) is tuple:  # a large frame in parts
            self._write(out)
        else:
            self._take(out, len(frame))

    def _handle_gated(self, frame: bytes) -> None:
        """``_handle`` before SASL authentication: the pipeline's gate decides, a failed
        authentication is answered after ``connection.failed.authentication.delay.ms`` and closes
        the connection, a successful one lifts the gate."""
        session = self.client.sasl
        reauthenticating = session.reauthenticating
        out = self.pipeline.handle_unauthenticated(frame, self.client)
        if session.failed:
            self._fail_authentication(out)
            return
        if session.state == "done":
            self.client.principal = session.principal
            if session.expires_at_ms is None:
                del self._handle  # the class's _handle from now on: no gate on the hot path
            else:  # KIP-368: the session expires; each request checks it first
                self._handle = self._handle_expiring  # type: ignore[method-assign]
            self.reader.max_size = self.listener.max_request_bytes
            log.info(
                "%s %s as %s (%s%s)",
                self.client.peer,
                "re-authenticated" if reauthenticating else "authenticated",
                session.principal,
                session.mechanism,
                f", session lifetime {session.session_lifetime_ms} ms"
                if session.expires_at_ms is not None
                else "",
            )
        if type(out) is bytes or type(out) is tuple:  # a frame, or a large one in parts
            self._write(out)
        else:
            self._take(out, len(frame))

    def _handle_expiring(self, frame: bytes) -> None:
        """``_handle`` of an authenticated connection whose session expires (KIP-368), as Kafka's
        SocketServer: a SaslHandshake starts a re-authentication (through the gate again); any other
        request after the expiry closes the connection."""
        session = self.client.sasl
        api_key = int.from_bytes(frame[:2], "big", signed=True) if len(frame) >= 2 else -1
        if api_key == 17 and session.begin_reauthentication():
            self._handle = self._handle_gated  # type: ignore[method-assign]
            self.reader.max_size = min(self.reader.max_size, SASL_MAX_RECEIVE)
            self._handle_gated(frame)
            return
        if session.expired():
            self.close(
                f"SASL session of {session.principal} expired without re-authentication "
                "(connections.max.reauth.ms or the credential's lifetime)"
            )
            return
        KafkaConnection._handle(self, frame)

    def _fail_authentication(self, out: object) -> None:
        session = self.client.sasl
        log.warning(
            "authentication failed for %s from %s with %s", session.user, self.client.peer, session.mechanism
        )
        # nothing more is handled on this connection; reading goes on (what arrives is queued, within
        # the usual bounds, and dropped) so that closing sends FIN, not a RST that could discard the
        # answer before the client reads it
        self.busy = True
        self.queue.clear()
        loop = asyncio.get_running_loop()
        loop.call_later(session.failure_delay_ms / 1000, self._answer_and_close, out)

    def _answer_and_close(self, out: object) -> None:
        if self.closed:
            return
        self._flush_out()
        if type(out) is bytes:
            self.transport.write(out)
        self.closed = True
        self.transport.close()  # gracefully: the answer goes out first

    def _take(self, out: object, size: int = 0) -> None:
        """The non-bytes outcomes of ``_handle`` (``size``: the request frame's bytes)."""
        if type(out) is Pending:
            task = out.awaitable
            if type(task) is not Future:  # a coroutine, or another kind of future: a Task, or as is
                task = out.awaitable = asyncio.ensure_future(task)
            if out.deferred:  # answered later, in order; the next request goes on meanwhile
                out.size = size
                self._deferred_bytes += size
                ordered = self._ordered
                if not ordered:  # the first in line: the one whose end is waited for
                    task.add_done_callback(self._head_done)
                ordered.append(out)
            else:
                self.busy = True
                self._task = task
                self._parked = out
                task.add_done_callback(self._finish)
        elif out is not None:
            self.close(out.reason)
        if self.client.mute_ms and not self.busy:
            self._mute()

    def _mute(self) -> None:
        """A quota was exceeded: handle no further request for the throttle time (KIP-219); the
        frames that arrive meanwhile wait (and reading pauses once they back up)."""
        ms, self.client.mute_ms = self.client.mute_ms, 0
        self.busy = True
        asyncio.get_running_loop().call_later(ms / 1000, self._unmute)

    def _unmute(self) -> None:
        self.busy = False
        if not self.closed:
            self._continue()

    @staticmethod
    def _result(task: asyncio.Future) -> tuple[object, BaseException | None]:
        exc = task.exception()
        return (None, exc) if exc is not None else (task.result(), None)

    def _finish(self, task: asyncio.Future) -> None:
        pending, self._parked = self._parked, None
        self.busy = False
        if self.closed:
            return
        if task.cancelled():
            self.close("request cancelled")
            return
        out = self.pipeline.complete(pending, *self._result(task))
        if type(out) is Close:
            self.close(out.reason)
            return
        self._out = []
        try:
            if out is not None:
                self._write(out)
            if self.client.mute_ms:
                self._mute()
            self._drain()
        finally:
            self._flush_out()

    def _head_done(self, task: asyncio.Future) -> None:
        """The first deferred request in line is done (and with it, usually, every other request of
        its group commit): write every leading answer that is ready (in order), then go on with the
        requests that waited for room."""
        if self.closed:
            return
        close = self._settle()
        if close is not None:
            self.close(close)
            return
        if not self.busy and self.queue and not self._backlogged():
            self._out = []
            try:
                self._drain()
            finally:
                self._flush_out()

    def _settle(self) -> str | None:
        """Write the leading answers of ``_ordered`` that are ready: frames, and the deferred
        requests whose future is done (completed here, in request order); then wait for the first
        one still pending. The reason to close the connection when a deferred request's outcome
        says so (the answers before it are written first)."""
        ordered = self._ordered
        ready = []
        close = None
        complete = self.pipeline.complete
        while ordered:
            entry = ordered[0]
            if type(entry) is Pending:
                task = entry.awaitable
                if not task.done():
                    task.add_done_callback(self._head_done)
                    break
                if task.cancelled():  # its client is gone (connection_lost cancels them all)
                    break
                ordered.popleft()
                self._deferred_bytes -= entry.size
                exc = task.exception()
                out = complete(entry, None, exc) if exc is not None else complete(entry, task.result())
                if type(out) is not bytes and type(out) is not tuple:
                    close = out.reason if type(out) is Close else f"{entry.api.name} v{entry.version} failed"
                    for later in ordered:  # never answered: the connection closes
                        if type(later) is Pending:
                            later.awaitable.cancel()
                    ordered.clear()
                    self._deferred_bytes = 0
                    break
                ready.append(out)
            else:
                ready.append(ordered.popleft())
        if ready:
            self._send(ready)
        return close

    def _drain(self) -> None:
        """Handle queued frames until one parks or writing backs up."""
        while (
            self.queue
            and not self.busy
            and not self.writing_paused
            and not self.closed
            and not self._backlogged()
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

    def _write(self, data: bytes | tuple) -> None:
        """Write a response frame, or a large one as a tuple of its parts (pipeline.py)."""
        if self.closed:
            return
        if self._ordered:  # behind a deferred response: keep the order
            self._ordered.append(data)
            return
        if self._out is not None:
            self._out.append(data)
            self._out_bytes += frame_size(data)
        elif type(data) is bytes:
            self.transport.write(data)
        else:
            self.transport.writelines(data)

    def _send(self, frames: list) -> None:
        """Write ``frames`` in order: frames joined into one write; when a large frame (a tuple of
        parts) is among them, all of them as one writelines, so that its body is never copied
        (uvloop writes the buffers with writev)."""
        if len(frames) == 1:
            frame = frames[0]
            if type(frame) is bytes:
                self.transport.write(frame)
            else:
                self.transport.writelines(frame)
            return
        try:
            data = b"".join(frames)
        except TypeError:  # a large frame (a tuple of parts) among them
            self.transport.writelines([p for f in frames for p in ((f,) if type(f) is bytes else f)])
        else:
            self.transport.write(data)

    def close(self, reason: str) -> None:
        """Close this connection (never any other) with a log line naming the client."""
        if self.closed:
            return
        log.warning("closing connection from %s: %s", self.client.describe(), reason)
        self.queue.clear()  # first: the flush below must not schedule more work for it
        self._flush_out()  # answers to the requests before the bad one still go out
        if self._ordered and self.transport is not None:
            self._settle()  # then the deferred ones answered and not written yet (they came later)
        self.closed = True
        if self.transport is not None:
            self.transport.abort()
