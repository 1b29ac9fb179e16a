"""The feature levels this broker reports (KIP-584): ApiVersions v3+ supported and finalized
features, UpdateFeatures, and the Admin clients' describeFeatures.

They say what the broker really serves, in Kafka 4's terms: the KRaft metadata version of the
Kafka release whose API versions it serves (Kafka 4.3's range and level); ``group.version`` 1 (KIP-848
consumer groups, ConsumerGroupHeartbeat); ``transaction.version`` and ``kraft.version`` only level 0
(no transactions; a static single-voter quorum). A feature at level 0 is not finalized (Kafka leaves
it out of the finalized list). The levels are fixed: there is no controller to change them.
"""

from __future__ import annotations

#: name -> (min supported, max supported, finalized level)
FEATURES: dict[str, tuple[int, int, int]] = {
    "metadata.version": (7, 30, 30),
    "group.version": (0, 1, 1),
    "transaction.version": (0, 0, 0),
    "kraft.version": (0, 0, 0),
}
#: The epoch of the finalized levels (Kafka: the metadata offset of the last feature change).
FINALIZED_EPOCH = 1


def finalized() -> dict[str, int]:
    """The finalized features (level > 0) and their levels."""
    return {name: level for name, (_lo, _hi, level) in FEATURES.items() if level > 0}
