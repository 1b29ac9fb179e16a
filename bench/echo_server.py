"""A bare uvloop framed-echo server: the baseline for bench/transport_bench.py.

    python bench/echo_server.py --port P [--reply-bytes N] [--coalesce]

It does exactly the transport work our broker does for a request, and nothing else: an
``asyncio.Protocol`` on uvloop splits each read into Kafka-style frames (big-endian int32 size +
payload) and, for each frame, writes one response frame with ``transport.write`` (the broker also
writes once per response).

By default the response is the request frame echoed back with the same size prefix. With
``--reply-bytes N`` it instead answers like a Kafka response header v0: a frame of N payload bytes
that starts with the request's correlation id (so N = the broker's ApiVersions response size gives
the same bytes on the wire). ``--coalesce`` joins all responses to one read into a single write
(an experiment: what batching writes would buy the broker).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from struct import Struct

import uvloop

_SIZE = Struct(">i")
_SIZE_CORR = Struct(">ii")


class EchoProtocol(asyncio.Protocol):
    __slots__ = ("transport", "buf", "reply_tail", "coalesce")

    def __init__(self, reply_tail: bytes | None, coalesce: bool):
        self.transport: asyncio.Transport | None = None
        self.buf = b""
        self.reply_tail = reply_tail
        self.coalesce = coalesce

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        buf = self.buf + data if self.buf else data
        pos = 0
        end = len(buf)
        out = [] if self.coalesce else None
        write = out.append if out is not None else self.transport.write
        tail = self.reply_tail
        while end - pos >= 4:
            size = _SIZE.unpack_from(buf, pos)[0]
            if size < 0:
                self.transport.abort()
                return
            stop = pos + 4 + size
            if stop > end:
                break
            if tail is None:
                write(buf[pos:stop])
            else:
                # Request header: api_key int16, api_version int16, correlation_id int32.
                corr = _SIZE.unpack_from(buf, pos + 8)[0]
                write(_SIZE_CORR.pack(len(tail) + 4, corr) + tail)
            pos = stop
        self.buf = buf[pos:] if pos < end else b""
        if out:
            self.transport.write(b"".join(out))


async def serve(host: str, port: int, reply_bytes: int | None, coalesce: bool) -> None:
    tail = None if reply_bytes is None else bytes(max(reply_bytes - 4, 0))
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: EchoProtocol(tail, coalesce), host, port, reuse_address=True, backlog=1024
    )
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"echo server listening on {host}:{server.sockets[0].getsockname()[1]}", flush=True)
    await stop.wait()
    server.close()
    await server.wait_closed()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument(
        "--reply-bytes",
        type=int,
        default=None,
        help="answer with a response-header-v0 frame of this many payload bytes instead of echoing",
    )
    ap.add_argument("--coalesce", action="store_true", help="one write per read instead of per frame")
    args = ap.parse_args()
    uvloop.run(serve(args.host, args.port, args.reply_bytes, args.coalesce))


if __name__ == "__main__":
    main()
