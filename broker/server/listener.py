"""The TCP listener: binds the port, accepts connections within the limits, closes idle ones, and
shuts down gracefully.

Connection limits use Kafka's names and behaviour:

* ``max.connections.per.ip`` (with ``max.connections.per.ip.overrides``, ``host:count,...``): a
  connection over its address's limit is closed as soon as it is accepted.
* ``max.connections``: at the limit the listener stops accepting; new clients wait in the kernel's
  backlog until a connection closes (as Kafka's acceptor blocks).
* ``connections.max.idle.ms``: see :mod:`broker.server.connection` for what counts as idle.

uvloop is installed here (``new_event_loop``) and nowhere else.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable
from typing import NamedTuple

from broker.config import Config, Endpoint, parse_ip_overrides
from broker.security.listeners import ListenerSecurity, configured_scram, listener_security

from .connection import KafkaConnection
from .pipeline import RequestPipeline

log = logging.getLogger(__name__)


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A uvloop loop when uvloop is installed, else the default asyncio loop."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a hard dependency on Linux/macOS
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def resolve_ip_overrides(text: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides`` keyed by address: host names are resolved (an entry
    whose name does not resolve is logged and kept as written)."""
    out: dict[str, int] = {}
    for host, count in parse_ip_overrides(text).items():
        out[host] = count
        try:
            infos = socket.getaddrinfo(host, None)
        except OSError as e:
            log.warning("max.connections.per.ip.overrides: cannot resolve %r: %s", host, e)
            continue
        for info in infos:
            out[str(info[4][0])] = count
    return out


def _host_arg(host: str) -> bytes | str | None:
    """``host`` for ``getaddrinfo``: None for every interface; an ASCII name or address as bytes,
    which getaddrinfo passes on as they are (a str goes through the IDNA codec, whose import,
    encodings.idna with stringprep and unicodedata, would be a start-up cost of every broker);
    a non-ASCII (internationalized) name as it is, for that codec."""
    if not host:
        return None
    return host.encode("ascii") if host.isascii() else host


class ListenError(OSError):
    """A listener cannot be opened; the message names the address."""


class Bound(NamedTuple):  # not a dataclass: see broker.config.Setting
    """An open listener: its endpoint, sockets and the port it got."""

    endpoint: Endpoint
    socks: list[socket.socket]
    port: int


class Listener:
    def __init__(
        self,
        config: Config,
        endpoints: list[Endpoint],
        node_id: int = -1,
        connections: set[KafkaConnection] | None = None,
    ):
        """``node_id``: the node of a multi-node cluster whose listeners these are (its
        connections' ``ClientInfo.node_id``; -1: the broker's one node); ``connections``: the set
        to keep open connections in (the nodes of one process share one)."""
        self.endpoints = endpoints
        self.node_id = node_id
        #: listener name -> TLS context / SASL authenticator (raises ConfigError when unusable)
        #: the broker's SCRAM credentials (sasl.users; the data directory's are added by the broker)
        self.scram = configured_scram(config)
        self.security: dict[str, ListenerSecurity] = listener_security(config, endpoints, self.scram)
        #: TLS handshakes in progress (each in its own task: a slow client never stalls accepting)
        self._handshakes: set[asyncio.Task] = set()
        self.max_request_bytes: int = config["socket.request.max.bytes"]
        self.idle_ms: int = config["connections.max.idle.ms"]
        #: every open connection, on every listener
        self.connections: set[KafkaConnection] = set() if connections is None else connections
        self._pipeline: RequestPipeline | None = None
        self.max_connections: int = config["max.connections"]
        self.max_per_ip: int = config["max.connections.per.ip"]
        self.ip_overrides = resolve_ip_overrides(config["max.connections.per.ip.overrides"])
        #: open connections per peer address (including ones being set up)
        self.per_ip: dict[str, int] = {}
        self.count = 0
        #: connections refused for max.connections.per.ip, since start
        self.refused = 0
        self.bound: list[Bound] = []
        self._acceptors: list[asyncio.Task] = []
        self._sweeper: asyncio.Task | None = None
        self._slot_freed: asyncio.Event | None = None

    @property
    def _socks(self) -> list[socket.socket]:
        return [sock for b in self.bound for sock in b.socks]

    def addresses(self) -> list[tuple[str, int]]:
        """(host, port) each listener is bound to, in listener order (``[::1]`` style for IPv6)."""
        out = []
        for b in self.bound:
            host = b.socks[0].getsockname()[0] if b.socks else b.endpoint.host
            out.append((f"[{host}]" if ":" in host else host, b.port))
        return out

    @property
    def port(self) -> int:
        """The bound port of the first listener."""
        return self.bound[0].port if self.bound else self.endpoints[0].port

    def bind(self) -> None:
        """Bind every listener (not listening yet): each binds every address its host resolves
        to (all interfaces for "" or 0.0.0.0/::, as asyncio's ``create_server`` does). Raises
        :class:`ListenError` ("cannot listen on HOST:PORT: reason") and leaves nothing open."""
        if self.bound:
            return
        try:
            for ep in self.endpoints:
                self.bound.append(self._bind_one(ep))
        except OSError:
            self.close()
            raise

    def _bind_one(self, ep: Endpoint) -> Bound:
        where = f"{ep.host or '0.0.0.0'}:{ep.port}"
        if ep.host and ":" in ep.host:
            where = f"[{ep.host}]:{ep.port}"
        socks: list[socket.socket] = []
        port = ep.port
        try:
            infos = socket.getaddrinfo(
                _host_arg(ep.host), ep.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )
            for family, type_, proto, _name, addr in dict.fromkeys(infos):
                sock = socket.socket(family, type_, proto)
                socks.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                if port:  # port 0: every address gets the port the first one was given
                    addr = (addr[0], port, *addr[2:])
                sock.bind(addr)  # listen() only in start(): until then connecting is refused
                sock.setblocking(False)
                port = sock.getsockname()[1]
        except OSError as e:
            for sock in socks:
                sock.close()
            reason = e.strerror or str(e)
            err = ListenError(f"cannot listen on {where}: {reason} (listener {ep.name})")
            err.errno = e.errno
            raise err from e
        return Bound(ep, socks, port)

    def close(self) -> None:
        """Close the listening sockets of a listener that never started (or has stopped)."""
        for sock in self._socks:
            sock.close()
        self.bound = []

    async def start(self, pipeline: RequestPipeline) -> int:
        """Bind (if not yet) and start accepting on every listener, each connection's requests going
        through ``pipeline``; returns the first listener's port."""
        return self.start_now(pipeline)

    def start_now(self, pipeline: RequestPipeline) -> int:
        """:meth:`start`, from synchronous code running on the event loop."""
        self._pipeline = pipeline
        self.bind()
        for sock in self._socks:
            sock.listen(1024)
        self._slot_freed = asyncio.Event()
        self._acceptors = [
            asyncio.create_task(self._accept_loop(sock, b.endpoint)) for b in self.bound for sock in b.socks
        ]
        self._sweeper = asyncio.create_task(self._sweep_idle())
        return self.port

    @property
    def accepting(self) -> bool:
        return bool(self._socks)

    def _limit_for(self, ip: str) -> int:
        return self.ip_overrides.get(ip, self.max_per_ip)

    async def _accept_loop(self, sock: socket.socket, endpoint: Endpoint) -> None:
        loop = asyncio.get_running_loop()
        assert self._slot_freed is not None and self._pipeline is not None
        pipeline = self._pipeline
        listener_name = endpoint.name
        security = self.security.get(listener_name) or ListenerSecurity()
        sasl = security.sasl
        protocol = endpoint.security_protocol
        rules = security.principal_rules
        factory: Callable[[], KafkaConnection] = lambda: KafkaConnection(  # noqa: E731
            pipeline, self, listener_name, sasl, protocol, rules
        )
        while True:
            while self.count >= self.max_connections:  # as Kafka's acceptor: wait for a free slot
                self._slot_freed.clear()
                await self._slot_freed.wait()
            try:
                client, addr = await loop.sock_accept(sock)
            except OSError as e:  # e.g. EMFILE: out of file descriptors; retry shortly
                log.warning("accept failed: %s", e)
                await asyncio.sleep(0.1)
                continue
            ip = addr[0] if isinstance(addr, tuple) else str(addr)
            if self.per_ip.get(ip, 0) >= self._limit_for(ip):
                self.refused += 1
                log.info(
                    "refusing connection from %s: %d connections from it already (max.connections.per.ip)",
                    ip,
                    self.per_ip[ip],
                )
                client.close()
                continue
            while self.count >= self.max_connections:  # another address's loop took the slot
                self._slot_freed.clear()
                await self._slot_freed.wait()
            self.per_ip[ip] = self.per_ip.get(ip, 0) + 1
            self.count += 1
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if security.tls is not None:
                task = asyncio.create_task(self._tls_setup(factory, client, ip, security.tls))
                self._handshakes.add(task)
                task.add_done_callback(self._handshakes.discard)
                continue
            try:
                _transport, conn = await loop.connect_accepted_socket(factory, client)
            except OSError as e:
                log.warning("cannot set up the connection from %s: %s", ip, e)
                client.close()
                self._release(ip)
                continue
            conn.ip = ip
            if conn.closed:  # gone before we got here: connection_lost came without an ip
                self._release(ip)

    async def _tls_setup(
        self, factory: Callable[[], KafkaConnection], client: socket.socket, ip: str, ctx: object
    ) -> None:
        """The TLS handshake of one accepted socket, then its connection (a failed handshake, e.g.
        an untrusted or missing client certificate under ssl.client.auth=required, closes it)."""
        loop = asyncio.get_running_loop()
        made: list[KafkaConnection] = []

        def make() -> KafkaConnection:
            made.append(factory())
            return made[-1]

        try:
            await loop.connect_accepted_socket(
                make,
                client,
                ssl=ctx,
                ssl_handshake_timeout=self.idle_ms / 1000,  # type: ignore[arg-type]
            )
        except (TimeoutError, OSError) as e:
            log.warning("TLS handshake with %s failed: %s", ip, e)
            client.close()
            self._release(ip)
            return
        except asyncio.CancelledError:
            client.close()
            self._release(ip)
            raise
        conn = made[0]  # (uvloop returns its TLS protocol, not ours)
        conn.ip = ip
        if conn.closed:
            self._release(ip)

    def connection_closed(self, conn: KafkaConnection) -> None:
        """Called by a connection once its socket is closed: frees its slot."""
        if conn.ip is not None:
            self._release(conn.ip)
            conn.ip = None

    def _release(self, ip: str) -> None:
        n = self.per_ip.get(ip, 0) - 1
        if n > 0:
            self.per_ip[ip] = n
        else:
            self.per_ip.pop(ip, None)
        self.count -= 1
        if self._slot_freed is not None:
            self._slot_freed.set()

    async def _sweep_idle(self) -> None:
        idle_ms = self.idle_ms
        interval = min(max(idle_ms / 1000 / 4, 0.05), 30.0)
        while True:
            await asyncio.sleep(interval)
            cutoff = time.monotonic() - idle_ms / 1000
            for conn in list(self.connections):
                # a parked request (long poll, join) or a response awaiting its fsync keeps a
                # connection alive; requests queued behind responses the client does not read do not
                if conn.last_active < cutoff and not conn.busy and not conn._ordered:
                    conn.close(f"idle for more than {idle_ms} ms (connections.max.idle.ms)")

    def stop_accepting(self) -> None:
        """Close the listening socket: new clients are refused from now on."""
        for task in (*self._acceptors, *self._handshakes):
            task.cancel()
        self._acceptors = []
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        self.close()

    def go_down(self, reason: str) -> None:
        """A node going down: stop accepting (the ports are kept for :meth:`start_now`) and close
        this listener's connections (those of its node)."""
        self.endpoints = [b.endpoint._replace(port=b.port) for b in self.bound] or self.endpoints
        self.stop_accepting()
        for conn in list(self.connections):
            if conn.client.node_id == self.node_id:
                conn.close(reason)

    def stop_reading(self) -> None:
        """At shutdown: read no more requests on any connection."""
        for conn in self.connections:
            conn.stop_reading()

    def unanswered(self) -> int:
        """Connections holding requests that will be answered without waiting for other clients:
        responses waiting for an fsync, and received requests not parked behind a long poll or a
        group join (those are cancelled by ``stop``)."""
        return sum(1 for c in self.connections if not c.closed and (c._ordered or (c.queue and not c.busy)))

    async def stop(self) -> None:
        """Close every connection (answers already written are flushed), cancelling requests still
        parked (long polls, joins)."""
        self.stop_accepting()
        pending = []
        for conn in list(self.connections):
            pending += conn.waiting()
            if conn.transport is not None:
                conn.transport.close()
        for task in pending:
            task.cancel()
        if pending:  # let parked requests (long polls, joins) finish cancelling
            await asyncio.gather(*pending, return_exceptions=True)
