"""What request handlers may use of the broker: a narrow, typed set of services, built once by the
broker (``broker.app``) and handed to every handler as ``ctx.services``.

Handlers never see the ``Broker`` itself (an import-linter contract keeps ``broker.app`` out of
this package): not its listeners, connections or lifecycle.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.cluster import TopicRegistry
    from broker.config import Config
    from broker.coordinator import GroupCoordinator
    from broker.log.manager import LogManager
    from broker.quotas import ClientQuotas
    from broker.topic_admin import TopicAdmin
    from broker.txn import TransactionCoordinator

    from .registry import Registry


@dataclass(frozen=True, slots=True)
class Services:
    #: this node
    node_id: int
    cluster_id: str
    rack: str | None
    #: the broker's settings (read-only for handlers)
    config: Config
    #: topic names, ids, partition counts and config overrides
    topics: TopicRegistry
    #: the partitions' logs (append, read, offsets)
    logs: LogManager
    #: create, delete, grow and reconfigure topics
    admin: TopicAdmin
    #: the group coordinator's facade (groups, offsets, group configs)
    groups: GroupCoordinator
    #: the served APIs and versions (ApiVersions answers from it)
    registry: Registry
    #: listener name -> the (host, port) clients connected to it are told to use
    advertised_address: Callable[[str], tuple[str, int]]
    #: client quotas (DescribeClientQuotas/AlterClientQuotas) and their enforcement
    quotas: ClientQuotas
    #: the transaction coordinator's facade (transactional ids, transactions, markers)
    txns: TransactionCoordinator
