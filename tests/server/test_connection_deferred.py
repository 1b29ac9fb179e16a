"""KafkaConnection's deferred answers, without sockets: a fake pipeline hands out Pending requests
whose futures the test resolves in any order; the answers are written in request order, all of
a group commit's in one write, a deferred request whose outcome is Close closes the connection
after the answers before it, and a lost connection cancels every deferred future."""

from __future__ import annotations

import asyncio
import struct

from broker.dispatch.registry import ClientInfo
from broker.server import new_event_loop
from broker.server.connection import KafkaConnection
from broker.server.pipeline import Close, Pending


class Listener:
    max_request_bytes = 1 << 20
    node_id = -1

    def __init__(self) -> None:
        self.connections: set = set()

    def connection_closed(self, conn: KafkaConnection) -> None:
        pass


class Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.aborted = False

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def writelines(self, parts: object) -> None:
        self.writes.append(b"".join(parts))

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", 9) if name == "peername" else default

    def get_write_buffer_size(self) -> int:
        return 0

    def abort(self) -> None:
        self.aborted = True


class Pipeline:
    """Request frame = its int32 number; numbers in ``deferred`` get a Pending, the others bytes."""

    def __init__(self, deferred: set[int]) -> None:
        self.deferred = deferred
        self.futures: dict[int, asyncio.Future] = {}

    def handle(self, frame: bytes, client: ClientInfo) -> object:
        (n,) = struct.unpack(">i", frame)
        if n not in self.deferred:
            return answer(n)
        fut = asyncio.get_running_loop().create_future()
        self.futures[n] = fut
        return Pending(fut, True, None, 0, None, n, client)

    def complete(self, pending: Pending, result: object = None, exc: BaseException | None = None) -> object:
        if result == "close":
            return Close("told to")
        return answer(pending.correlation_id)


def answer(n: int) -> bytes:
    return struct.pack(">ii", 4, n)


def frames(*numbers: int) -> bytes:
    return b"".join(struct.pack(">ii", 4, n) for n in numbers)


def written(transport: Transport) -> list[int]:
    data = b"".join(transport.writes)
    return [struct.unpack_from(">i", data, p + 4)[0] for p in range(0, len(data), 8)]


def run(deferred: set[int], scenario) -> None:
    loop = new_event_loop()
    try:
        pipeline = Pipeline(deferred)
        conn = KafkaConnection(pipeline, Listener())
        transport = Transport()
        conn.connection_made(transport)
        loop.run_until_complete(scenario(conn, pipeline, transport))
    finally:
        loop.close()


async def turns(n: int = 3) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def test_answers_go_out_in_request_order_whatever_order_the_futures_end_in():
    async def scenario(conn, pipeline, transport):
        conn.data_received(frames(1, 2, 3, 4, 5, 6))
        assert written(transport) == [1]  # 2 is deferred: 3..6 wait behind it
        for n in (6, 4):  # later ones first: nothing can go out yet
            pipeline.futures[n].set_result(None)
        await turns()
        assert written(transport) == [1]
        pipeline.futures[2].set_result(None)
        await turns()
        assert written(transport) == [1, 2, 3, 4]  # 5 is still pending
        assert len(conn._ordered) == 2
        pipeline.futures[5].set_result(None)
        await turns()
        assert written(transport) == [1, 2, 3, 4, 5, 6]
        assert not conn._ordered and conn._deferred_bytes == 0

    run({2, 4, 5, 6}, scenario)


def test_the_requests_of_one_group_commit_are_written_together():
    async def scenario(conn, pipeline, transport):
        conn.data_received(frames(1, 2, 3))
        for n in (1, 2, 3):
            pipeline.futures[n].set_result(None)
        await turns()
        assert transport.writes == [frames(1, 2, 3)]

    run({1, 2, 3}, scenario)


def test_a_deferred_close_writes_the_answers_before_it_and_cancels_the_rest():
    async def scenario(conn, pipeline, transport):
        conn.data_received(frames(1, 2, 3, 4))
        pipeline.futures[3].set_result("close")
        pipeline.futures[1].set_result(None)
        await turns()
        assert written(transport) == [1, 2] and transport.aborted and conn.closed
        assert pipeline.futures[4].cancelled()

    run({1, 3, 4}, scenario)


def test_a_lost_connection_cancels_every_deferred_future():
    async def scenario(conn, pipeline, transport):
        conn.data_received(frames(1, 2, 3))
        assert {f for f in conn.waiting()} == set(pipeline.futures.values())
        conn.connection_lost(None)
        assert all(f.cancelled() for f in pipeline.futures.values())
        await turns()
        assert written(transport) == []

    run({1, 2, 3}, scenario)
