"""Codec benchmark: our generated codecs vs kafka-python 3.0.12's own codec, measured in one run.

    python bench/codec_bench.py [--seconds 0.3]

For each message it builds the same value in both codecs (checking that both encode it to identical
bytes), then times decode of those bytes and encode of each codec's own object, and prints ops/s and
the ratio ours/theirs. Bars (from the foundation issue): decode >= 1.4x, encode >= 2.3x, and the
request header >= 10x. Exit status 1 if any bar is missed.
"""

from __future__ import annotations

import argparse
import io
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafka.protocol.api_header import RequestHeader as KpRequestHeader  # noqa: E402
from kafka.protocol.consumer import (  # noqa: E402
    FetchResponse as KpFetchResponse,
)
from kafka.protocol.consumer import (  # noqa: E402
    HeartbeatRequest as KpHeartbeatRequest,
)
from kafka.protocol.consumer import (  # noqa: E402
    JoinGroupRequest as KpJoinGroupRequest,
)
from kafka.protocol.consumer import (  # noqa: E402
    OffsetCommitRequest as KpOffsetCommitRequest,
)
from kafka.protocol.consumer import (  # noqa: E402
    OffsetFetchRequest as KpOffsetFetchRequest,
)
from kafka.protocol.consumer import (  # noqa: E402
    OffsetFetchResponse as KpOffsetFetchResponse,
)
from kafka.protocol.consumer import (  # noqa: E402
    SyncGroupRequest as KpSyncGroupRequest,
)
from kafka.protocol.metadata import MetadataResponse as KpMetadataResponse  # noqa: E402

from broker.protocol.generated import (  # noqa: E402
    fetch,
    heartbeat,
    join_group,
    metadata,
    offset_commit,
    offset_fetch,
    request_header,
    sync_group,
)

BARS = {"decode": 1.4, "encode": 2.3, "header": 10.0}


def rate(fn, seconds: float) -> float:
    """Operations per second of ``fn()``: best of 5 timed batches."""
    n = 1
    while True:
        t = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t
        if dt > seconds / 10:
            break
        n *= 2
    best = 0.0
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best = max(best, n / (time.perf_counter() - t))
    return best


def cases():
    """(name, version, kafka-python object, our decoder, our encoder, header?)."""
    kp = KpRequestHeader(
        request_api_key=12, request_api_version=4, correlation_id=7, client_id="bench-client"
    )
    yield (
        "RequestHeader v2",
        kp,
        lambda b: KpRequestHeader.decode(io.BytesIO(b), flexible=True),
        lambda o: o.encode(flexible=True),
        request_header.decode_v2,
        request_header.encode_v2,
    )

    v = 4
    kp = KpHeartbeatRequest(
        version=v,
        group_id="group-1",
        generation_id=42,
        member_id="member-" + "x" * 36,
        group_instance_id="instance-1",
    )
    yield _api("HeartbeatRequest", v, kp, KpHeartbeatRequest, heartbeat, "request")

    v = 9
    kp = KpJoinGroupRequest(
        version=v,
        group_id="group-1",
        session_timeout_ms=45000,
        rebalance_timeout_ms=300000,
        member_id="member-" + "x" * 36,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=[KpJoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=bytes(200))],
        reason="rebalance",
    )
    yield _api("JoinGroupRequest", v, kp, KpJoinGroupRequest, join_group, "request")

    v = 5
    Assign = KpSyncGroupRequest.SyncGroupRequestAssignment
    kp = KpSyncGroupRequest(
        version=v,
        group_id="group-1",
        generation_id=3,
        member_id="member-0",
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=[Assign(member_id=f"member-{i}", assignment=bytes(60)) for i in range(10)],
    )
    yield _api("SyncGroupRequest", v, kp, KpSyncGroupRequest, sync_group, "request")

    v = 9
    T = KpOffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    kp = KpOffsetCommitRequest(
        version=v,
        group_id="group-1",
        generation_id_or_member_epoch=3,
        member_id="member-0",
        group_instance_id=None,
        topics=[
            T(
                name="topic-a",
                partitions=[
                    P(
                        partition_index=i,
                        committed_offset=1000 + i,
                        committed_leader_epoch=1,
                        committed_metadata="",
                    )
                    for i in range(10)
                ],
            )
        ],
    )
    yield _api("OffsetCommitRequest", v, kp, KpOffsetCommitRequest, offset_commit, "request")

    v = 9
    G = KpOffsetFetchRequest.OffsetFetchRequestGroup
    GT = G.OffsetFetchRequestTopics
    kp = KpOffsetFetchRequest(
        version=v,
        require_stable=True,
        groups=[
            G(
                group_id="group-1",
                member_id="member-0",
                member_epoch=3,
                topics=[GT(name="topic-a", partition_indexes=list(range(10)))],
            )
        ],
    )
    yield _api("OffsetFetchRequest", v, kp, KpOffsetFetchRequest, offset_fetch, "request")

    RG = KpOffsetFetchResponse.OffsetFetchResponseGroup
    RT = RG.OffsetFetchResponseTopics
    RP = RT.OffsetFetchResponsePartitions
    kp = KpOffsetFetchResponse(
        version=v,
        throttle_time_ms=0,
        groups=[
            RG(
                group_id="group-1",
                error_code=0,
                topics=[
                    RT(
                        name="topic-a",
                        partitions=[
                            RP(
                                partition_index=i,
                                committed_offset=1000 + i,
                                committed_leader_epoch=1,
                                metadata="",
                                error_code=0,
                            )
                            for i in range(10)
                        ],
                    )
                ],
            )
        ],
    )
    yield _api("OffsetFetchResponse", v, kp, KpOffsetFetchResponse, offset_fetch, "response")

    v = 12
    FT = KpFetchResponse.FetchableTopicResponse
    FP = FT.PartitionData
    kp = KpFetchResponse(
        version=v,
        throttle_time_ms=0,
        error_code=0,
        session_id=0,
        responses=[
            FT(
                topic="topic-a",
                partitions=[
                    FP(
                        partition_index=0,
                        error_code=0,
                        high_watermark=5000,
                        last_stable_offset=5000,
                        log_start_offset=0,
                        aborted_transactions=None,
                        preferred_read_replica=-1,
                        records=bytes(range(256)) * 64,
                    )
                ],
            )
        ],
    )
    yield _api("FetchResponse", v, kp, KpFetchResponse, fetch, "response")

    v = 12
    B = KpMetadataResponse.MetadataResponseBroker
    MT = KpMetadataResponse.MetadataResponseTopic
    MP = MT.MetadataResponsePartition
    kp = KpMetadataResponse(
        version=v,
        throttle_time_ms=0,
        brokers=[B(node_id=1, host="localhost", port=9092, rack=None)],
        cluster_id="cluster-abc",
        controller_id=1,
        topics=[
            MT(
                error_code=0,
                name=f"topic-{t}",
                topic_id=uuid.UUID(int=t + 1),
                is_internal=False,
                partitions=[
                    MP(
                        error_code=0,
                        partition_index=p,
                        leader_id=1,
                        leader_epoch=0,
                        replica_nodes=[1],
                        isr_nodes=[1],
                        offline_replicas=[],
                    )
                    for p in range(10)
                ],
                authorized_operations={31},
            )
            for t in range(10)
        ],
    )
    yield _api("MetadataResponse", v, kp, KpMetadataResponse, metadata, "response")


def _api(name, v, kp, kp_cls, mod, role):
    return (
        f"{name} v{v}",
        kp,
        lambda b: kp_cls.decode(b, version=v),
        lambda o: o.encode(version=v),
        getattr(mod, f"decode_{role}_v{v}"),
        getattr(mod, f"encode_{role}_v{v}"),
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=0.3, help="time per measurement")
    args = ap.parse_args()
    failed = []
    print(f"{'message':28} {'op':7} {'ours ops/s':>12} {'kafka-python':>13} {'ratio':>7}  bar")
    for name, kp_obj, kp_dec, kp_enc, our_dec, our_enc in cases():
        data = bytes(kp_enc(kp_obj))
        ours, end = our_dec(data)
        if end != len(data) or our_enc(ours) != data:
            print(f"{name}: our codec does not reproduce kafka-python's bytes", file=sys.stderr)
            return 2
        header = name.startswith("RequestHeader")
        for op, fo, ft in (
            ("decode", lambda: our_dec(data), lambda: kp_dec(data)),
            ("encode", lambda: our_enc(ours), lambda: kp_enc(kp_obj)),
        ):
            a, b = rate(fo, args.seconds), rate(ft, args.seconds)
            bar = BARS["header"] if header else BARS[op]
            ratio = a / b
            ok = ratio >= bar
            if not ok:
                failed.append(f"{name} {op}")
            print(f"{name:28} {op:7} {a:12,.0f} {b:13,.0f} {ratio:6.2f}x  >={bar}x {'ok' if ok else 'MISS'}")
    if failed:
        print("missed bars: " + ", ".join(failed))
        return 1
    print("all bars met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
