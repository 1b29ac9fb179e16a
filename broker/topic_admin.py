"""Topic administration: create, delete, grow and reconfigure topics, keeping the topic registry and
the open logs in step.

Each method raises KafkaError when refused; with ``validate_only`` it checks everything and changes
nothing. Handlers reach it as ``ctx.services.admin``; the group coordinator uses it to create its
internal topic. Whoever must forget a deleted topic's state (the group coordinator's committed
offsets) subscribes to :attr:`TopicAdmin.on_deleted`.
"""

from __future__ import annotations

from collections.abc import Callable

from broker.cluster import Topic, TopicRegistry
from broker.config import Config
from broker.log.config import canonical, validate_topic_configs
from broker.log.manager import LogManager
from broker.nodes import Nodes
from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.primitives import ZERO_UUID


class TopicAdmin:
    def __init__(self, config: Config, topics: TopicRegistry, logs: LogManager, nodes: Nodes | None = None):
        """``nodes``: the cluster's nodes, which place the replicas of new partitions (None: one node)."""
        self.config = config
        self.topics = topics
        self.logs = logs
        self.nodes = nodes
        #: called with a topic's name once it is deleted
        self.on_deleted: list[Callable[[str], None]] = []

    def create_topic(
        self,
        name: str,
        partitions: int,
        configs: dict[str, str] | None = None,
        internal: bool = False,
        validate_only: bool = False,
        replication_factor: int | None = None,
        replicas: list[list[int]] | None = None,
    ) -> Topic:
        """Validate, register and open the logs of a new topic. Config values are stored in their
        canonical form. With ``validate_only`` the returned topic is not registered (zero id).
        ``replicas``: each partition's replica list; else the nodes place ``replication_factor``
        (default ``default.replication.factor``) replicas of each (INVALID_REPLICATION_FACTOR when
        the cluster has fewer nodes)."""
        self.topics.check_new(name)
        configs = {key: canonical(key, value) for key, value in (configs or {}).items()}
        validate_topic_configs(self.config.log_defaults(), configs)
        if replicas is None and self.nodes is not None and self.nodes.multi:
            rf = replication_factor or self.config["default.replication.factor"]
            self.nodes.check_replication_factor(rf)
            if not validate_only and partitions >= 1:
                replicas = self.nodes.assign(partitions, rf)
        if validate_only:
            if partitions < 1:
                raise KafkaError(ErrorCode.INVALID_PARTITIONS, "number of partitions must be at least 1")
            return Topic(name, ZERO_UUID, partitions, configs, internal)
        topic = self.topics.create(name, partitions, configs, internal, replicas)
        self.logs.open_topic(name, partitions, configs)
        return topic

    def delete_topic(self, name: str) -> Topic:
        """Remove a topic: its logs first (a crash in between leaves the topic registered and empty,
        never a registry without the data gone), then its registry entry, then what others keep about
        it (committed offsets go too, as in Kafka)."""
        topic = self._existing(name)
        if topic.internal:  # the group coordinator keeps its log open in it
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"{name} is an internal topic and cannot be deleted")
        self.logs.delete_topic(name)  # also drops the partitions' recovery points on disk
        self.topics.delete(name)
        for callback in self.on_deleted:
            callback(name)
        return topic

    def create_partitions(
        self, name: str, count: int, validate_only: bool = False, replicas: list[list[int]] | None = None
    ) -> Topic:
        """Grow a topic to ``count`` partitions (INVALID_PARTITIONS unless it is an increase);
        ``replicas``: the new partitions' replica lists, else placed by the nodes with the topic's
        replication factor."""
        topic = self._existing(name)
        if count == topic.partitions:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {count} partition(s).")
        if count < topic.partitions:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS,
                f"The topic {name} currently has {topic.partitions} partition(s); "
                f"{count} would not be an increase.",
            )
        if validate_only:
            return topic
        if self.nodes is not None and self.nodes.multi:
            self.nodes.materialize(topic)
            assert topic.replicas is not None
            if replicas is None:
                replicas = self.nodes.assign(count - topic.partitions, len(topic.replicas[0]))
        elif self.nodes is not None and topic.replicas is not None:
            # a topic of a multi-node cluster grown by a single node: the new partitions are its own
            replicas = [[self.nodes.first] for _ in range(count - topic.partitions)]
        else:
            replicas = None
        self.logs.open_topic(name, count, topic.configs, first=topic.partitions)
        return self.topics.set_partitions(name, count, replicas)

    def alter_topic_configs(self, name: str, configs: dict[str, str], validate_only: bool = False) -> Topic:
        """Replace a topic's config overrides (validated, stored canonically) and apply them to its
        open logs at once."""
        topic = self._existing(name)
        configs = {key: canonical(key, value) for key, value in configs.items()}
        validate_topic_configs(self.config.log_defaults(), configs)
        if validate_only:
            return topic
        self.topics.set_configs(name, configs)
        self.logs.reconfigure(name, configs)
        return topic

    def _existing(self, name: str) -> Topic:
        topic = self.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        return topic
