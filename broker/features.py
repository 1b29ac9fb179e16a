"""The feature levels this broker reports (KIP-584): ApiVersions v3+ supported and finalized
features, UpdateFeatures, and the Admin clients' describeFeatures.

They say what the broker really serves, in Kafka 4's terms: the KRaft metadata version of the
Kafka release whose API versions it serves (Kafka 4.3's range and level); ``group.version`` 1 (KIP-848
consumer groups, ConsumerGroupHeartbeat); ``transaction.version`` 0-2, finalized at the level of the
broker setting ``transaction.version`` (default 2, as a Kafka 4.x cluster is formatted: KIP-890 part
2, the epoch bumped at every EndTxn v5 and partitions added by Produce v12; clients use it only when
it is finalized); ``kraft.version`` only level 0 (a static single-voter quorum). A feature at level 0
is not finalized (Kafka leaves it out of the finalized list). The levels are fixed while the broker
runs: there is no controller to change them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from broker.personas import PERSONAS

#: name -> (min supported, max supported, finalized level)
FEATURES: dict[str, tuple[int, int, int]] = {
    "metadata.version": (7, 30, 30),
    "group.version": (0, 1, 1),
    "transaction.version": (0, 2, 2),
    "kraft.version": (0, 0, 0),
}
#: The epoch of the finalized levels (Kafka: the metadata offset of the last feature change).
FINALIZED_EPOCH = 1


#: what transaction.version 2 needs served (KIP-890 part 2): Produce v12, EndTxn v5, TxnOffsetCommit v5
TV2_APIS = {0: 12, 26: 5, 28: 5}


def transaction_version(config: Any) -> int:
    """The finalized transaction.version of a broker with ``config``: its ``transaction.version``,
    or 0 when it acts as a release that does not serve level 2's API versions (``kafka.version``
    3.9) or as Redpanda (``persona``; no feature levels at all)."""
    level = config["transaction.version"]
    if config["persona"]:
        return 0
    ranges = PERSONAS.get(config["kafka.version"]) if config["kafka.version"] else None
    if ranges is not None and any(ranges.get(k, (0, -1))[1] < v for k, v in TV2_APIS.items()):
        return 0
    return level


def levels(transaction_version: int = 2) -> dict[str, tuple[int, int, int]]:
    """name -> (min supported, max supported, finalized level) with ``transaction_version``."""
    lo, hi, _ = FEATURES["transaction.version"]
    return {**FEATURES, "transaction.version": (lo, hi, transaction_version)}


def finalized(features: Mapping[str, tuple[int, int, int]] = FEATURES) -> dict[str, int]:
    """The finalized features (level > 0) and their levels."""
    return {name: level for name, (_lo, _hi, level) in features.items() if level > 0}
