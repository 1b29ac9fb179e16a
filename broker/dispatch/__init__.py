"""One module per API: decoded request in, response object out. ``build_registry`` wires them."""

from __future__ import annotations

from broker.personas import PERSONAS
from broker.personas_redpanda import REDPANDA

from .registry import Api, ClientInfo, CloseConnection, Registry, RequestContext

#: Every served API's handler module (one per line, by API key), imported on the API's first request.
HANDLERS = [
    "produce",  # 0
    "fetch",  # 1
    "list_offsets",  # 2
    "metadata",  # 3
    "offset_commit",  # 8
    "offset_fetch",  # 9
    "find_coordinator",  # 10
    "join_group",  # 11
    "heartbeat",  # 12
    "leave_group",  # 13
    "sync_group",  # 14
    "describe_groups",  # 15
    "list_groups",  # 16
    "sasl_handshake",  # 17
    "api_versions",  # 18
    "create_topics",  # 19
    "delete_topics",  # 20
    "delete_records",  # 21
    "init_producer_id",  # 22
    "offset_for_leader_epoch",  # 23
    "add_partitions_to_txn",  # 24
    "add_offsets_to_txn",  # 25
    "end_txn",  # 26
    "txn_offset_commit",  # 28
    "describe_acls",  # 29
    "create_acls",  # 30
    "delete_acls",  # 31
    "describe_configs",  # 32
    "alter_configs",  # 33
    "alter_replica_log_dirs",  # 34
    "describe_log_dirs",  # 35
    "sasl_authenticate",  # 36
    "create_partitions",  # 37
    "delete_groups",  # 42
    "elect_leaders",  # 43
    "incremental_alter_configs",  # 44
    "alter_partition_reassignments",  # 45
    "list_partition_reassignments",  # 46
    "offset_delete",  # 47
    "describe_client_quotas",  # 48
    "alter_client_quotas",  # 49
    "describe_user_scram_credentials",  # 50
    "alter_user_scram_credentials",  # 51
    "describe_quorum",  # 55
    "update_features",  # 57
    "describe_cluster",  # 60
    "describe_producers",  # 61
    "describe_transactions",  # 65
    "list_transactions",  # 66
    "consumer_group_heartbeat",  # 68
    "consumer_group_describe",  # 69
    "list_config_resources",  # 74
    "describe_topic_partitions",  # 75
]


#: The handler modules that serve fewer versions than their schema covers: the ``VERSIONS`` each
#: declares (so that ApiVersions can answer before the module is imported; checked when it loads).
VERSIONS: dict[str, tuple[int, int]] = {
    "produce": (3, 13),
    "fetch": (4, 18),
    "init_producer_id": (0, 5),
    "end_txn": (0, 5),
}


def build_registry(
    kafka_version: str | None = None, persona: str | None = None, transaction_version: int = 2
) -> Registry:
    """Every handler; with ``kafka_version`` (a key of broker.personas.PERSONAS) only the APIs and
    versions that Kafka release's broker advertises; with ``persona`` "redpanda" those Redpanda's
    broker advertises (broker.personas_redpanda), and no feature levels (Redpanda sends none).
    ``transaction_version``: the finalized level ApiVersions reports (broker.features).
    No handler module is imported here: each is on its API's first request."""
    handlers = [(f"{__name__}.{name}", VERSIONS.get(name)) for name in HANDLERS]
    if persona == "redpanda":
        return Registry(handlers, REDPANDA, reports_features=False)
    if persona:
        raise ValueError(f"unknown persona {persona!r}")
    return Registry(
        handlers, PERSONAS[kafka_version] if kafka_version else None, transaction_version=transaction_version
    )


__all__ = [
    "Api",
    "ClientInfo",
    "CloseConnection",
    "Registry",
    "RequestContext",
    "build_registry",
    "HANDLERS",
    "VERSIONS",
]
