"""The ONE list of allowed differences between pykbroker and Apache Kafka in the differential suite.

Every entry names the API (or "*"), a regular expression over the difference's path (see
engine.Difference; ``<outcome>`` is the whole answer: a response versus ``<closed>``), optionally the
versions and a regular expression over the case name, and the reason. A step whose differences are
all matched counts as "allowed" in the summary; any other difference fails its test.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Allowed:
    api: str
    path: str
    reason: str
    case: str = ".*"
    versions: tuple[int, int] = (0, 1 << 15)
    #: optional regular expression over "<ours> -> <Kafka's>" (reprs of the two values)
    values: str = ".*"

    def matches(self, api: str, version: int, case: str, path: str, ours: object, theirs: object) -> bool:
        return (
            (self.api == "*" or self.api == api)
            and self.versions[0] <= version <= self.versions[1]
            and re.search(self.case, case) is not None
            and re.fullmatch(self.path, path) is not None
            and re.fullmatch(self.values, f"{ours!r} -> {theirs!r}", re.S) is not None
        )


_AUTO_CREATE = (
    "auto-creation is synchronous in pykbroker (the answer carries the new topic); Kafka forwards it "
    "to its controller and answers UNKNOWN_TOPIC_OR_PARTITION until the topic exists (clients retry "
    "Metadata either way)"
)

ABSENT = r"'<absent>' -> .*"
_KIP848_EPOCH = (
    "KIP-848 epochs: a new consumer group starts at group epoch 1 in Kafka 4.3 (ModernGroup's "
    "constructor), at 0 in pykbroker (as Kafka 3.7-4.2), so the first member's first heartbeat answers "
    "epoch 2 there and 1 here, and every later group, assignment and member epoch is one higher. Error "
    "codes, states and assignments are still compared. Kept: Kafka 3.7-4.2 and KIP-848's case studies "
    "(tests/coordinator/test_kip848_case_studies.py) start at 0; clients never depend on the absolute "
    "value (a Kafka-version persona may follow 4.3)"
)

ALLOWED: list[Allowed] = [
    # ---------------------------------------------------------------------------- everywhere
    Allowed(
        "*",
        r"(.*\.)?error_message",
        "error messages: each broker words (or leaves out) its own; the error codes are compared",
    ),
    # ---------------------------------------------------------------------------- ApiVersions
    Allowed(
        "ApiVersions",
        r"api_keys\[\d+\]",
        "APIs pykbroker does not implement (KRaft, share and "
        "streams groups, delegation tokens, ...): not advertised",
        values=ABSENT,
    ),
    Allowed(
        "ApiVersions",
        r"api_keys\[\d+\]\.min_version",
        "pykbroker keeps serving the old versions Kafka 4 removed (KIP-896), for older clients",
        values=r"0 -> [12]",
    ),
    Allowed(
        "ApiVersions",
        r"api_keys\[0\]\.min_version",
        "Produce v0-2 (message formats v0/v1) are not served; Kafka 4 keeps them only for old librdkafka",
        values=r"3 -> 0",
    ),
    Allowed(
        "ApiVersions",
        r"(supported_features|finalized_features)\[[^\]]+\](\.\w+)?|finalized_features_epoch",
        "feature levels say what pykbroker serves: kraft.version 0 "
        "(a static single voter), no share groups, streams groups or ELR; metadata.version and "
        "group.version are Kafka 4.3's. The epoch is pykbroker's own (no metadata log)",
    ),
    Allowed(
        "Metadata",
        r"topics\[[^\]]+\]\.(error_code|topic_id|partitions\[\d+\])",
        _AUTO_CREATE,
        case="auto-create",
    ),
    Allowed(
        "Metadata",
        r"topics\[[^\]]+\]\.(error_code|topic_id|partitions\[\d+\])",
        _AUTO_CREATE + " (v0-3 always ask for it)",
        case="unknown topic, no auto-create",
        versions=(0, 3),
    ),
    # ---------------------------------------------------------------------------- configs
    Allowed(
        "CreateTopics",
        r"topics\[[^\]]+\]\.configs\[[^\]]+\]",
        "topic configs pykbroker does not "
        "implement (remote storage, throttles, compression levels, ...) are not reported",
        values=ABSENT,
    ),
    Allowed(
        "CreateTopics",
        r"topics\[[^\]]+\]\.configs\[min\.insync\.replicas\]\.config_source",
        "kafka-storage format stores min.insync.replicas as a cluster-level dynamic default "
        "(DYNAMIC_DEFAULT_BROKER_CONFIG) for ELR; pykbroker's is a default",
        values=r"5 -> 3",
    ),
    Allowed(
        "CreateTopics",
        r"topics\[[^\]]+\]\.topic_id",
        "validate_only: Kafka makes up a topic id for the "
        "topic it did not create; pykbroker answers the zero id",
        case="validate only",
    ),
    Allowed(
        "CreatePartitions",
        r"results\[[^\]]+\]\.error_code",
        "2,000,000,000 partitions: Kafka fails "
        "internally (UNKNOWN_SERVER_ERROR); pykbroker refuses with POLICY_VIOLATION (its partition cap)",
        case="absurd count",
        values=r"44 -> -1",
    ),
    Allowed(
        "IncrementalAlterConfigs",
        r"responses\[[^\]]+\]\.error_code",
        "config operation 9: Kafka "
        "fails internally (UNKNOWN_SERVER_ERROR); pykbroker answers INVALID_REQUEST",
        case="bad operation",
        values=r"42 -> -1",
    ),
    # ---------------------------------------------------------------------------- groups
    Allowed("ConsumerGroupHeartbeat", r"member_epoch", _KIP848_EPOCH, values=r"(\d+) -> (?!\1)\d+"),
    Allowed(
        "ConsumerGroupHeartbeat",
        r"assignment\.topic_partitions\[\d+\](\.partitions)?",
        "a new regex subscription: Kafka resolves it off the heartbeat (its first answer assigns nothing; "
        "a later heartbeat brings the partitions), pykbroker resolves it in the heartbeat that brings it and "
        "assigns at once. The error codes (invalid regex, names and regex together) are compared",
        case="regex subscriptions",
    ),
    Allowed(
        "ConsumerGroupDescribe",
        r"groups\[[^\]]+\]\.(group_epoch|assignment_epoch|members\[[^\]]+\]\.member_epoch)",
        _KIP848_EPOCH,
    ),
    # ---------------------------------------------------------------------------- fetch
    # ---------------------------------------------------------------------------- DescribeQuorum
    Allowed(
        "DescribeQuorum",
        r"topics\[0\]\.partitions\[0\]\.(high_watermark|leader_epoch|current_voters\[0\]\.log_end_offset)",
        "pykbroker has no metadata log (topics live in its topic registry) and holds no elections: its "
        "quorum's high watermark and log end offset are 0 and its leader epoch 1; Kafka's count its metadata "
        "records and elections (one per restart)",
    ),
    Allowed(
        "DescribeQuorum",
        r"topics\[0\]\.partitions\[0\]\.current_voters\[0\]\.replica_directory_id",
        "Kafka 4.3 formats its single voter with a directory id (kraft.version 1); pykbroker reports a static "
        "voter (zero directory id, kraft.version 0)",
    ),
    Allowed(
        "DescribeQuorum",
        r"nodes\[0\]\.listeners\[0\]\.name",
        "pykbroker opens no controller listener: the voter's endpoint is the listener the client used",
    ),
    # ---------------------------------------------------------------------------- AlterConfigs
    Allowed(
        "AlterConfigs",
        r"responses\[[^\]]+\]\.error_code",
        "a BROKER resource: Kafka changes dynamic broker "
        "configs; pykbroker's settings are static (INVALID_REQUEST, as its IncrementalAlterConfigs)",
        case="broker and group resources",
        values=r"42 -> 0",
    ),
]


def allowed_by(api: str, version: int, case: str, path: str, ours: object, theirs: object) -> Allowed | None:
    for rule in ALLOWED:
        if rule.matches(api, version, case, path, ours, theirs):
            return rule
    return None
