"""The TCP listener: binds the port, accepts connections, closes idle ones, shuts down cleanly.

uvloop is installed here (``new_event_loop``) and nowhere else.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from .connection import KafkaConnection

if TYPE_CHECKING:
    from broker.app import Broker

log = logging.getLogger(__name__)


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A uvloop loop when uvloop is installed, else the default asyncio loop."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a hard dependency on Linux/macOS
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class Listener:
    def __init__(self, broker: Broker, host: str, port: int):
        self.broker = broker
        self.host = host
        self.port = port
        self.server: asyncio.base_events.Server | None = None
        self._sweeper: asyncio.Task | None = None

    async def start(self) -> int:
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(
            lambda: KafkaConnection(self.broker), self.host, self.port, reuse_address=True, backlog=1024
        )
        self.port = self.server.sockets[0].getsockname()[1]
        self._sweeper = asyncio.create_task(self._sweep_idle())
        return self.port

    async def _sweep_idle(self) -> None:
        idle_ms = self.broker.config["connections.max.idle.ms"]
        interval = min(max(idle_ms / 1000 / 4, 0.05), 30.0)
        while True:
            await asyncio.sleep(interval)
            cutoff = time.monotonic() - idle_ms / 1000
            for conn in list(self.broker.connections):
                if conn.last_active < cutoff and not conn.busy:
                    conn.close(f"idle for more than {idle_ms} ms (connections.max.idle.ms)")

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
        if self.server is not None:
            self.server.close()
        pending = []
        for conn in list(self.broker.connections):
            pending += [t for t in (conn._task, *conn._deferred_tasks) if t is not None and not t.done()]
            if conn.transport is not None:
                conn.transport.close()
        for task in pending:
            task.cancel()
        if pending:  # let parked requests (long polls, joins) finish cancelling
            await asyncio.gather(*pending, return_exceptions=True)
        if self.server is not None:
            await self.server.wait_closed()
