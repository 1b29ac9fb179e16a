"""The consumer embedded protocol: what classic consumers put inside JoinGroup and SyncGroup.

A subscription (JoinGroup protocol metadata) and an assignment (SyncGroup bytes) are an int16
version followed by ConsumerProtocolSubscription / ConsumerProtocolAssignment
(schemas/records/ConsumerProtocol*.json). The coordinator reads subscriptions and writes
assignments itself when classic members live in a KIP-848 group (online migration).

As Kafka's clients do, a version newer than ours is read with our newest layout: later versions
only append fields.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping

from broker.coordinator.generated import consumer_protocol_assignment as _asg
from broker.coordinator.generated import consumer_protocol_subscription as _sub
from broker.protocol.primitives import DecodeError

_I16 = struct.Struct(">h")
SUBSCRIPTION_MAX_VERSION = len(_sub.DECODERS) - 1
ASSIGNMENT_MAX_VERSION = len(_asg.DECODERS) - 1

Subscription = _sub.ConsumerProtocolSubscription


class EmbeddedProtocolError(ValueError):
    """Bytes that are not the consumer embedded protocol."""


def version_of(data: bytes) -> int:
    if len(data) < 2:
        raise EmbeddedProtocolError("consumer protocol bytes shorter than their version")
    version = _I16.unpack_from(data, 0)[0]
    if version < 0:
        raise EmbeddedProtocolError(f"consumer protocol version {version} is negative")
    return version


def decode_subscription(data: bytes) -> Subscription:
    version = min(version_of(data), SUBSCRIPTION_MAX_VERSION)
    try:
        sub, _end = _sub.DECODERS[version](bytes(data), 2)
    except (DecodeError, struct.error, UnicodeDecodeError, IndexError, ValueError) as e:
        raise EmbeddedProtocolError(f"malformed consumer protocol subscription: {e}") from None
    if version < 1:
        sub.owned_partitions = []
    return sub


def encode_subscription(
    topics: Iterable[str],
    owned: Mapping[str, Iterable[int]] | None = None,
    version: int = SUBSCRIPTION_MAX_VERSION,
    user_data: bytes | None = None,
    generation: int = -1,
    rack: str | None = None,
) -> bytes:
    sub = Subscription(
        topics=list(topics),
        user_data=user_data,
        owned_partitions=[_sub.TopicPartition(t, sorted(ps)) for t, ps in sorted((owned or {}).items())],
        generation_id=generation,
        rack_id=rack,
    )
    return _I16.pack(version) + _sub.ENCODERS[version](sub)


def decode_assignment(data: bytes) -> dict[str, list[int]]:
    """Topic -> partitions of an assignment; empty bytes (no assignment yet) are an empty one."""
    if not data:
        return {}
    version = min(version_of(data), ASSIGNMENT_MAX_VERSION)
    try:
        asg, _end = _asg.DECODERS[version](bytes(data), 2)
    except (DecodeError, struct.error, UnicodeDecodeError, IndexError, ValueError) as e:
        raise EmbeddedProtocolError(f"malformed consumer protocol assignment: {e}") from None
    out: dict[str, list[int]] = {}
    for tp in asg.assigned_partitions:
        out.setdefault(tp.topic, []).extend(tp.partitions)
    return out


def encode_assignment(partitions: Mapping[str, Iterable[int]], version: int = 0) -> bytes:
    """An assignment at ``version`` (capped at ours), topics and partitions in sorted order."""
    version = max(0, min(version, ASSIGNMENT_MAX_VERSION))
    asg = _asg.ConsumerProtocolAssignment(
        assigned_partitions=[
            _asg.TopicPartition(t, sorted(ps)) for t, ps in sorted(partitions.items()) if ps
        ],
        user_data=None,
    )
    return _I16.pack(version) + _asg.ENCODERS[version](asg)
