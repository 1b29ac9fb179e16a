"""What the in-process CPU benches share (fetch_cpu_bench.py, list_offsets_cpu_bench.py): request
frames, a broker without a listener filled through ``RequestPipeline.handle``, and the run of the same
script against another checkout's ``broker`` package in a subprocess."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from broker.app import Broker
from broker.config import Config
from broker.dispatch.registry import ClientInfo
from broker.log.records import simple_batch
from broker.protocol.generated import produce, request_header
from broker.protocol.generated.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from broker.protocol.generated.request_header import RequestHeader
from broker.server import new_event_loop
from broker.server.pipeline import Pending, RequestPipeline

PRODUCE_VERSION = 9
VALUE = b"x" * 100


def frame(api_key: int, version: int, body: bytes) -> bytes:
    """A request frame's payload (header v2 and ``body``) as ``RequestPipeline.handle`` takes it."""
    header = RequestHeader(
        request_api_key=api_key, request_api_version=version, correlation_id=7, client_id="bench"
    )
    return request_header.encode_v2(header) + body


def produce_frame(topic: str, partitions: int, records: int) -> bytes:
    """A Produce request of ``records`` 100-byte records spread over ``partitions``, one v2 batch per
    partition (as librdkafka batches them: with 1,000 partitions and 2,000 records, 2 a batch)."""
    batch = simple_batch([VALUE] * max(1, records // partitions))
    body = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30_000,
        topic_data=[
            TopicProduceData(
                name=topic, partition_data=[PartitionProduceData(p, batch) for p in range(partitions)]
            )
        ],
    )
    return frame(0, PRODUCE_VERSION, produce.REQUEST_ENCODERS[PRODUCE_VERSION](body))


@asynccontextmanager
async def filled_broker(
    prefix: str, topic: str, partitions: int, messages: int, records: int
) -> AsyncIterator[tuple[Broker, RequestPipeline, ClientInfo]]:
    """A broker on a fresh data directory (no listener, ``log.flush=never``) whose ``topic`` of
    ``partitions`` holds ``messages`` records, produced in requests of ``records``."""
    with tempfile.TemporaryDirectory(prefix=prefix) as d:
        broker = Broker(Config({"port": 0, "log.dirs": d, "log.flush": "never"}), listen=False)
        broker.logs.start()
        try:
            pipeline = RequestPipeline(broker.registry, broker.services)
            client = ClientInfo(peer="bench")
            broker.admin.create_topic(topic, partitions)
            request = produce_frame(topic, partitions, records)
            per_request = max(1, records // partitions) * partitions
            for _ in range(max(1, messages // per_request)):
                out = pipeline.handle(request, client)
                if type(out) is Pending:
                    pipeline.complete(out, await out.awaitable, None)
            yield broker, pipeline, client
        finally:
            await broker.stop()


def run_here(
    measure: Callable[[int, argparse.Namespace], Awaitable[dict[str, float]]], args: argparse.Namespace
) -> dict[int, dict[str, float]]:
    """``measure`` for each of ``args.partitions`` (comma-separated counts), on one event loop."""
    loop = new_event_loop()
    try:
        return {
            n: loop.run_until_complete(measure(n, args)) for n in (int(x) for x in args.partitions.split(","))
        }
    finally:
        loop.close()


def run_at(script: str, root: Path, argv: list[str]) -> dict[int, dict[str, float]]:
    """``script``'s measurement with ``root``'s ``broker`` package: a subprocess run with ``--json``,
    whose last line of output is the result."""
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{Path(script).resolve().parent.parent}"}
    out = subprocess.run(
        [sys.executable, script, *argv, "--json"],
        env=env,
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return {int(k): v for k, v in json.loads(out.strip().splitlines()[-1]).items()}
