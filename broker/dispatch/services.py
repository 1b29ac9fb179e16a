"""What request handlers may use of the broker: a narrow, typed set of services, built once by the
broker (``broker.app``) and handed to every handler as ``ctx.services``.

Handlers never see the ``Broker`` itself (an import-linter contract keeps ``broker.app`` out of
this package): not its listeners, connections or lifecycle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from broker.cluster import TopicRegistry
    from broker.config import Config
    from broker.coordinator import GroupCoordinator
    from broker.log.manager import LogManager
    from broker.nodes import Nodes
    from broker.quotas import ClientQuotas
    from broker.security.acl_store import AclStore
    from broker.security.authorizer import Authorizer
    from broker.security.scram_store import ScramCredentials
    from broker.topic_admin import TopicAdmin
    from broker.txn import TransactionCoordinator

    from .fetch_session import FetchSessionCache
    from .registry import Registry


class Services(NamedTuple):  # not a dataclass: see broker.config.Setting
    """What the request handlers reach the broker through (``ctx.services``)."""

    #: this broker's (first) node; handlers answer as ``ctx.node_id``, the node the client reached
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
    #: the group coordinator, loaded on first use (``groups``; broker.app's ``Broker.groups``)
    load_groups: Callable[[], GroupCoordinator]
    #: the served APIs and versions (ApiVersions answers from it)
    registry: Registry
    #: listener name -> the (host, port) clients connected to it are told to use
    advertised_address: Callable[[str], tuple[str, int]]
    #: client quotas (DescribeClientQuotas/AlterClientQuotas) and their enforcement
    quotas: ClientQuotas
    #: the transaction coordinator, loaded on first use (``txns``; broker.app's ``Broker.txns``)
    load_txns: Callable[[], TransactionCoordinator]
    #: SCRAM credentials (DescribeUserScramCredentials/AlterUserScramCredentials, SCRAM authentication)
    scram: ScramCredentials
    #: the cluster's nodes, partition leaders and group coordinators (one node unless cluster.nodes)
    nodes: Nodes
    #: the ACL authorizer (``authorizer.class.name``), None when authorization is off; handlers ask
    #: through ``ctx.allowed`` / ``ctx.authorized_operations`` rather than directly
    authorizer: Authorizer | None = None
    #: the ACLs' durable store (CreateAcls, DescribeAcls, DeleteAcls), None when authorization is off
    acls: AclStore | None = None
    #: the incremental fetch sessions (KIP-227; dispatch/fetch_session.py), None: every fetch is full
    fetch_sessions: FetchSessionCache | None = None

    @property
    def groups(self) -> GroupCoordinator:
        """The group coordinator's facade (groups, offsets, group configs): built on the first
        request that needs it when start-up did not load it (``load_groups`` returns the same one
        every time after)."""
        return self.load_groups()

    @property
    def txns(self) -> TransactionCoordinator:
        """The transaction coordinator's facade (transactional ids, transactions, markers), as
        ``groups``."""
        return self.load_txns()
