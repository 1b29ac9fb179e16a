"""Connection benchmark: CPU per request through ``KafkaConnection`` (frame split, pipeline, the wait
of a deferred answer, in-order writing) without sockets.

    python bench/connection_bench.py [--api api_versions,produce,commit] [--requests 20000]
                                     [--inflight 5] [--rounds 3] [--baseline-root DIR]
                                     [--records 16] [--read-bytes 0]

A broker in this process (``log.flush=interval``, temp data dir) and one ``KafkaConnection`` on a fake
transport that only collects what is written. Each step hands the connection the same ``--inflight``
request frames in one read (``data_received``, as a pipelining client's requests arrive) and runs the loop
until all of their answers are written; the answers are checked (one per request, correlation ids in
request order, error code 0 in the produce and commit answers of the last step). APIs:

* ``api_versions``: ApiVersions v3 (answered at once);
* ``produce``: Produce v9 of 16 records of 100 bytes into one partition, acks=-1 (deferred: answered
  after its group commit); ``--records N`` puts N records in each (librdkafka's requests at 1
  partition and linger.ms=5 carry ~1,000-2,000: 100-230 KB), and ``--read-bytes 65536`` hands the
  bytes over in reads of that size, as a socket delivers a large request;
* ``commit``: OffsetCommit v9 of one partition, simple committer (deferred: after its group commit).

Segment fsyncs are skipped unless ``--fsync`` (the group commits still run, in their thread: the
kernel's fsync work is not what this measures). Printed: process CPU per request (``time.process_time``, every thread: the fsync thread too), best
of ``--rounds``. ``--baseline-root DIR`` (another checkout) measures it there too in a fresh process,
alternating round by round, and prints the ratio of the bests. For instruction counts run it under
``valgrind --tool=callgrind`` with ``--rounds 1`` at two request counts: the difference divided by the
difference of the counts is the instructions per request (start-up cancels out).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from struct import Struct

ROOT = Path(__file__).resolve().parent.parent

from broker.app import Broker
from broker.config import Config
from broker.log.records import simple_batch
from broker.log.segment import SYSTEM_OPS, FileOps
from broker.protocol.generated import api_versions, offset_commit, produce, request_header
from broker.protocol.generated.request_header import RequestHeader
from broker.server import new_event_loop
from broker.server.connection import KafkaConnection

TOPIC = "bench"
_SIZE = Struct(">i")
_CORR = Struct(">i")


def _frame(key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    header = RequestHeader(
        request_api_key=key, request_api_version=version, correlation_id=correlation_id, client_id="bench"
    )
    data = request_header.encode_v2(header) + body
    return _SIZE.pack(len(data)) + data


def request_frames(api: str, count: int, records: int = 16) -> list[bytes]:
    """``count`` size-prefixed request frames of ``api``, correlation ids 0..count-1."""
    if api == "api_versions":
        body = api_versions.REQUEST_ENCODERS[3](
            api_versions.ApiVersionsRequest(client_software_name="bench", client_software_version="1")
        )
        return [_frame(18, 3, i, body) for i in range(count)]
    if api == "produce":
        req = produce.ProduceRequest(
            transactional_id=None,
            acks=-1,
            timeout_ms=30_000,
            topic_data=[
                produce.TopicProduceData(
                    name=TOPIC,
                    partition_data=[produce.PartitionProduceData(0, simple_batch([b"x" * 100] * records))],
                )
            ],
        )
        body = produce.REQUEST_ENCODERS[9](req)
        return [_frame(0, 9, i, body) for i in range(count)]
    if api == "commit":
        out = []
        for i in range(count):
            req = offset_commit.OffsetCommitRequest(
                group_id="group",
                generation_id_or_member_epoch=-1,
                member_id="",
                group_instance_id=None,
                topics=[
                    offset_commit.OffsetCommitRequestTopic(
                        name=TOPIC,
                        partitions=[
                            offset_commit.OffsetCommitRequestPartition(
                                partition_index=0,
                                committed_offset=i,
                                committed_leader_epoch=-1,
                                committed_metadata="",
                            )
                        ],
                    )
                ],
            )
            out.append(_frame(8, 9, i, offset_commit.REQUEST_ENCODERS[9](req)))
        return out
    raise SystemExit(f"unknown --api {api}")


class NoSync(FileOps):
    """Segment writes as usual, fsyncs skipped (the default: the kernel's fsync work is not what this
    measures; ``--fsync`` keeps them)."""

    def fsync(self, fd: int) -> None:
        pass


class Transport(asyncio.Transport):
    """Collects the written bytes; ``done`` is completed once ``want`` bytes were written (every
    answer of a step has the same size, learnt from the first step)."""

    def __init__(self) -> None:
        super().__init__()
        self.chunks: list[bytes] = []
        self.written = 0
        self.want = 0
        self.done: asyncio.Future | None = None

    def write(self, data: bytes) -> None:
        self.chunks.append(data)
        self.written += len(data)
        if self.written >= self.want and self.done is not None and not self.done.done():
            self.done.set_result(None)

    def writelines(self, parts: object) -> None:
        self.write(b"".join(parts))

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", 1) if name == "peername" else default

    def get_write_buffer_size(self) -> int:
        return 0

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def abort(self) -> None:
        raise SystemExit("the connection was closed")

    def close(self) -> None:
        pass


def _count_frames(buf: bytes) -> int:
    n = pos = 0
    while pos + 4 <= len(buf):
        pos += 4 + _SIZE.unpack_from(buf, pos)[0]
        if pos > len(buf):
            break
        n += 1
    return n


def check(api: str, answers: bytes, first: int, count: int) -> None:
    pos = 0
    for i in range(count):
        size = _SIZE.unpack_from(answers, pos)[0]
        corr = _CORR.unpack_from(answers, pos + 4)[0]
        if corr != first + i:
            raise SystemExit(f"answer {i}: correlation id {corr}, expected {first + i}")
        frame = answers[pos + 4 : pos + 4 + size]
        if api == "produce":
            resp, _ = produce.RESPONSE_DECODERS[9](frame, 5)
            codes = [p.error_code for t in resp.responses for p in t.partition_responses]
        elif api == "commit":
            resp, _ = offset_commit.RESPONSE_DECODERS[9](frame, 5)
            codes = [p.error_code for t in resp.topics for p in t.partitions]
        else:
            codes = [api_versions.RESPONSE_DECODERS[3](frame, 4)[0].error_code]
        if any(codes):
            raise SystemExit(f"answer {i}: error codes {codes}")
        pos += 4 + size
    if pos != len(answers):
        raise SystemExit("more bytes written than answers")


async def run(args: argparse.Namespace, api: str) -> float:
    with tempfile.TemporaryDirectory(prefix="connection-bench-") as d:
        ops = SYSTEM_OPS if args.fsync else NoSync()
        broker = Broker(Config({"port": 0, "log.dirs": d, "log.flush": "interval"}), file_ops=ops)
        await broker.start()
        try:
            broker.admin.create_topic(TOPIC, 1)
            listener = broker.listener
            conn = KafkaConnection(broker.pipeline, listener)
            transport = Transport()
            conn.connection_made(transport)
            # the same ``k`` requests (correlation ids 0..k-1) sent again at each step: the cost of
            # building frames is not in the measurement, nor in a callgrind count's difference
            k = args.inflight
            frames = request_frames(api, k, args.records)
            data = b"".join(frames)
            cut = args.read_bytes or len(data)
            reads = [data[i : i + cut] for i in range(0, len(data), cut)]
            steps = -(-args.requests // k)
            loop = asyncio.get_running_loop()

            async def step(reads: list[bytes], want: int) -> bytes:
                transport.chunks = []
                transport.written = 0
                transport.want = want
                transport.done = loop.create_future()
                for chunk in reads:
                    conn.data_received(chunk)
                await transport.done
                transport.done = None
                return b"".join(transport.chunks)

            # warm-up: the first step's answers, checked and counting until the first answer is complete
            count = k
            first = await step(reads, 1)
            while len(first) < 4 or _count_frames(first) < count:
                transport.done = loop.create_future()
                transport.want = transport.written + 1
                await transport.done
                first = b"".join(transport.chunks)
            check(api, first, 0, count)
            size = len(first) // count  # every answer of this API has the same size here
            gc.collect()
            gc.freeze()  # as ``pykbroker serve`` does after start-up
            best = float("inf")
            for _ in range(args.rounds):
                start = time.process_time()
                for _ in range(steps):
                    answers = await step(reads, size * k)
                best = min(best, (time.process_time() - start) / (steps * k))
            check(api, answers, 0, k)
            return best
        finally:
            gc.unfreeze()
            await broker.stop()


def measure_in(root: Path, args: argparse.Namespace, api: str) -> float:
    cmd = [sys.executable, __file__, "--api", api, "--rounds", "1", "--requests", str(args.requests),
           "--inflight", str(args.inflight), "--records", str(args.records),
           "--read-bytes", str(args.read_bytes)] + (["--fsync"] if args.fsync else [])  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    m = re.search(r"([0-9.]+) us CPU per request", out)
    if m is None:
        raise SystemExit(f"no measurement from {root}: {out}")
    return float(m.group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--api", default="api_versions,produce,commit", help="comma-separated")
    ap.add_argument("--requests", type=int, default=20_000)
    ap.add_argument("--inflight", type=int, default=5, help="requests per read")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--fsync", action="store_true", help="fsync the segments (default: skipped)")
    ap.add_argument("--records", type=int, default=16, help="records of 100 bytes per Produce request")
    ap.add_argument(
        "--read-bytes",
        type=int,
        default=0,
        help="hand each step's bytes over in reads of this size (0: one read)",
    )
    ap.add_argument("--baseline-root", type=Path, help="another checkout, measured alternately")
    args = ap.parse_args()
    for api in args.api.split(","):
        if args.baseline_root is not None:
            ours, base = [], []
            for _ in range(args.rounds):
                ours.append(measure_in(ROOT, args, api))
                base.append(measure_in(args.baseline_root, args, api))
            print(
                f"{api}: {min(ours):.2f} us CPU per request, baseline {min(base):.2f} us, "
                f"ratio {min(ours) / min(base):.3f} (best of {args.rounds} alternating, {args.requests:,} "
                f"requests, {args.inflight} per read)"
            )
            continue
        loop = new_event_loop()
        try:
            best = loop.run_until_complete(run(args, api))
        finally:
            loop.close()
        requests = -(-args.requests // args.inflight) * args.inflight
        print(f"{api}: {best * 1e6:.2f} us CPU per request (best of {args.rounds} x {requests:,})")


if __name__ == "__main__":
    main()
