"""A broker with no sockets, for handler tests: requests are encoded to frames, go through the broker's
own ``RequestPipeline`` (decode -> handler -> encode, exactly as a connection runs it) and the
response frames are decoded back. Everything runs on one private event loop in the test's thread,
so these tests are ``unit`` tests (tests/conftest.py): no network socket is opened.

``InProcessBroker`` mirrors what the socket fixtures give (``broker.testing.BrokerThread``): ``.broker``,
``.call(fn)`` (run ``fn`` where the broker runs), ``.stop()``, and ``.client()`` in place of
``WireClient(port)``: an object whose ``call(api_key, version, body)`` answers the decoded response.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from broker.app import Broker
from broker.config import Config
from broker.dispatch.registry import ClientInfo
from broker.protocol.generated import APIS, codec
from broker.server.pipeline import Close, Pending, RequestPipeline
from tests.support.wire import request_bytes


class ConnectionClosed(ConnectionError):
    """The pipeline closed the connection instead of answering (as a socket client would see)."""


class InProcessBroker:
    def __init__(self, data_dir: Path, config: dict | None = None):
        settings = {"port": 0, "host": "127.0.0.1", "log.dirs": str(data_dir), **(config or {})}
        self.loop = asyncio.new_event_loop()
        self.broker: Broker = self.loop.run_until_complete(self._open(Config(settings)))
        self.pipeline = RequestPipeline(self.broker.registry, self.broker.services)
        self.stopped = False

    @staticmethod
    async def _open(config: Config) -> Broker:
        broker = Broker(config, listen=False)  # built on the loop its timers and group commits use
        for ep in broker.listener.endpoints:  # what Metadata advertises: nothing listens there
            broker.advertised[ep.name] = (ep.advertised_host or "127.0.0.1", ep.advertised_port or ep.port)
        for k, listener in enumerate(broker.listeners if broker.nodes.multi else []):  # port 0: 9000 + node
            broker.nodes.addresses[broker.node_id + k] = {
                ep.name: (ep.advertised_host or "127.0.0.1", ep.advertised_port or ep.port or 9000 + k + 1)
                for ep in listener.endpoints
            }
        broker.logs.start()
        return broker

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        return fn(*args)

    def request(
        self, api_key: int, version: int, body: Any, client: ClientInfo, client_id: str = "in-process"
    ) -> Any:
        """One request through the pipeline, run on the private loop until it is answered."""
        return self.answer(self.start(api_key, version, body, client, client_id), api_key, version)

    def start(
        self, api_key: int, version: int, body: Any, client: ClientInfo, client_id: str = "in-process"
    ) -> asyncio.Task:
        """Send a request without waiting for its answer (it is handled while the loop runs, e.g.
        during later requests); :meth:`answer` waits for it and decodes it."""
        frame = request_bytes(api_key, version, body, 7, client_id)[4:]  # without the size
        return self.loop.create_task(self._handle(frame, client))

    def answer(self, task: asyncio.Task, api_key: int, version: int) -> Any:
        correlation_id = 7
        out = self.loop.run_until_complete(task)
        if type(out) is Close:
            raise ConnectionClosed(out.reason)
        if type(out) is tuple:  # a large answer, in parts
            out = b"".join(out)
        assert type(out) is bytes, f"no answer: {out!r}"
        (size, corr) = struct.unpack_from(">ii", out, 0)
        assert size == len(out) - 4 and corr == correlation_id
        pos = 9 if APIS[api_key].is_flexible(version) and api_key != 18 else 8
        resp, end = codec(api_key).RESPONSE_DECODERS[version](out, pos)
        assert end == len(out), f"{len(out) - end} trailing bytes in the response"
        return resp

    async def _handle(self, frame: bytes, client: ClientInfo) -> Any:
        """As a connection does: handle the frame on the loop; a parked answer is awaited."""
        out = self.pipeline.handle(frame, client)
        if type(out) is not Pending:
            return out
        try:
            result = await out.awaitable
        except Exception as e:  # the handler's error becomes its error response (or a close)
            return self.pipeline.complete(out, exc=e)
        return self.pipeline.complete(out, result)

    @contextmanager
    def client(self, node: int = -1) -> Iterator[InProcessClient]:
        """A client; ``node``: the node of a multi-node broker it is connected to (-1: the first)."""
        yield InProcessClient(self, node=node)

    def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        self.broker.groups.close()
        self.broker.txns.close()
        self.loop.run_until_complete(self.broker.logs.close())
        self.broker.close()
        self.loop.close()


class InProcessClient:
    """``WireClient``'s ``call`` over an in-process broker (one client identity per instance)."""

    def __init__(self, broker: InProcessBroker, client_id: str = "in-process", node: int = -1):
        self.broker = broker
        self.client_id = client_id
        self.info = ClientInfo(peer="in-process", node_id=node)

    def call(self, api_key: int, version: int, body: Any) -> Any:
        return self.broker.request(api_key, version, body, self.info, self.client_id)
