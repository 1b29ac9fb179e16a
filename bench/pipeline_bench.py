"""Request pipeline benchmark: CPU time per ApiVersions v3 request through ``RequestPipeline.handle``.

    python bench/pipeline_bench.py [--requests 200000] [--rounds 5] [--rule]

No sockets and no event-loop turns: decode, handler, encode, as the connection calls it, measured in
process CPU time (``time.process_time``), so other processes on a shared machine disturb it far less
than the socket benchmark (bench/transport_bench.py). The best round counts. ``--rule`` adds a
fault rule that never matches these requests (``api=Produce``): the cost of having rules set.

To compare two checkouts, run it from each alternately with ``PYTHONPATH`` set to that checkout.
"""

from __future__ import annotations

import argparse
import tempfile
import time

from broker.app import Broker
from broker.config import Config
from broker.dispatch.registry import ClientInfo
from broker.protocol.generated import api_versions, request_header
from broker.protocol.generated.request_header import RequestHeader
from broker.server import new_event_loop
from broker.server.pipeline import RequestPipeline


async def run(args: argparse.Namespace) -> float:
    with tempfile.TemporaryDirectory(prefix="pipeline-bench-") as d:
        broker = Broker(Config({"port": 0, "log.dirs": d}))
        await broker.start()
        try:
            # a checkout before the control plane has no broker.pipeline: build one the same way
            pipeline = getattr(broker, "pipeline", None) or RequestPipeline(broker.registry, broker.services)
            if args.rule:
                broker.control.add_rule(api="Produce", delay_ms=1)
            header = RequestHeader(
                request_api_key=18, request_api_version=3, correlation_id=7, client_id="bench"
            )
            body = api_versions.ApiVersionsRequest(client_software_name="bench", client_software_version="1")
            frame = request_header.encode_v2(header) + api_versions.REQUEST_ENCODERS[3](body)
            client = ClientInfo(peer="bench")
            assert type(pipeline.handle(frame, client)) is bytes
            best = float("inf")
            for _ in range(args.rounds):
                start = time.process_time()
                for _ in range(args.requests):
                    pipeline.handle(frame, client)
                best = min(best, (time.process_time() - start) / args.requests)
            return best
        finally:
            await broker.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--rule", action="store_true", help="with a fault rule set that never matches")
    args = ap.parse_args()
    loop = new_event_loop()
    try:
        best = loop.run_until_complete(run(args))
    finally:
        loop.close()
    print(f"{best * 1e9:.0f} ns CPU per ApiVersions v3 request (best of {args.rounds} x {args.requests:,})")


if __name__ == "__main__":
    main()
