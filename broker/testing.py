"""Run a broker inside the current process, for tests (ours, or a client library's).

The broker gets its own event loop on a background thread, so blocking clients (kafka-python,
confluent-kafka, a Java subprocess) and asyncio clients (aiokafka, on the test's own loop) can both
talk to it over real TCP::

    with running_broker(tmp_path) as b:
        KafkaAdminClient(bootstrap_servers=b.bootstrap)

It binds port 0 (a free port) on 127.0.0.1 and starts in milliseconds.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from broker.app import Broker
from broker.config import Config
from broker.control import Control
from broker.control.invariants import InvariantChecker, checker
from broker.log.segment import SYSTEM_OPS, FileOps
from broker.server import new_event_loop

#: set (to anything but "0" or "") to run every test broker with the invariant checker on
INVARIANTS_ENV = "PYKBROKER_INVARIANTS"


class InvariantViolation(AssertionError):
    """The broker's invariant checker recorded violations (raised by ``BrokerThread.stop``)."""


class BrokerThread:
    def __init__(
        self,
        data_dir: Path | str,
        config: Mapping[str, Any] | None = None,
        file_ops: FileOps = SYSTEM_OPS,
        invariants: bool | None = None,
    ):
        """``invariants``: run the invariant checker (broker/control/invariants.py) and make
        :meth:`stop` raise :class:`InvariantViolation` if it recorded any; None: on when the
        environment variable ``PYKBROKER_INVARIANTS`` is set."""
        self.file_ops = file_ops  # the logs' system calls: tests pass a subclass to inject disk faults
        if invariants is None:
            invariants = os.environ.get(INVARIANTS_ENV, "") not in ("", "0")
        self.invariants = invariants
        values = {"host": "127.0.0.1", "port": 0, "log.dirs": str(data_dir)}
        values.update(config or {})
        self.config = Config(values)
        self.loop = new_event_loop()
        self.broker: Broker | None = None
        self._thread = threading.Thread(target=self._run, name="broker", daemon=True)
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._stop: asyncio.Event | None = None

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._main())
        except BaseException as e:  # surfaced to the starting thread
            self._error = e
            self._ready.set()
        finally:
            self.loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        self.broker = Broker(self.config, file_ops=self.file_ops)
        try:
            await self.broker.start()
        except BaseException:
            self.broker.close()
            raise
        if self.invariants:
            checker(self.broker).enable()
        self._ready.set()
        await self._stop.wait()
        await self.broker.stop()

    def start(self, timeout: float = 10.0) -> BrokerThread:
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError("broker did not start")
        if self._error is not None:
            raise RuntimeError("broker failed to start") from self._error
        return self

    def stop(self, timeout: float = 10.0) -> None:
        if self._thread.is_alive() and self._stop is not None:
            if self.invariants and self.broker is not None:
                self.call(self.checker.check_logs, "stop")  # every high watermark, a last time
            self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout)
        if self.invariants and self.broker is not None:
            found = self.checker.violations()
            if found:
                self.invariants = False  # reported once
                lines = "\n".join(f"  {v}" for v in found)
                raise InvariantViolation(f"{len(found)} invariant violation(s):\n{lines}")

    @property
    def checker(self) -> InvariantChecker:
        """The broker's invariant checker (enabled when ``invariants`` is)."""
        assert self.broker is not None
        return checker(self.broker)

    def call(self, fn: Any, *args: Any) -> Any:
        """Run ``fn(*args)`` on the broker's loop and return its result (thread-safe)."""

        async def run() -> Any:
            return fn(*args)

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(10)

    @property
    def control(self) -> _ThreadControl:
        """The broker's control operations (broker.control.Control), called on its loop:
        ``b.control.add_rule(api="Produce", error="NOT_LEADER_OR_FOLLOWER", times=3)``."""
        assert self.broker is not None
        return _ThreadControl(self, self.broker.control)

    @property
    def control_url(self) -> str | None:
        """The control API's URL when ``control.port`` was configured."""
        assert self.broker is not None
        port = self.broker.control_port
        return None if port is None else f"http://127.0.0.1:{port}"

    @property
    def port(self) -> int:
        assert self.broker is not None
        return self.broker.port

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"


class _ThreadControl:
    """Forwards each call of a Control method to the broker's loop (thread-safe)."""

    def __init__(self, thread: BrokerThread, control: Control):
        self._thread = thread
        self._control = control

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self._control, name)
        if not callable(fn):
            return fn
        return lambda *args, **kwargs: self._thread.call(lambda: fn(*args, **kwargs))


@contextmanager
def running_broker(
    data_dir: Path | str, config: Mapping[str, Any] | None = None, invariants: bool | None = None
) -> Iterator[BrokerThread]:
    """A started broker; with ``invariants`` (or ``PYKBROKER_INVARIANTS`` set) leaving the block
    raises InvariantViolation if the invariant checker recorded any."""
    bt = BrokerThread(data_dir, config, invariants=invariants).start()
    try:
        yield bt
    finally:
        bt.stop()
