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
from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.primitives import ZERO_UUID


class TopicAdmin:
    def __init__(self, config: Config, topics: TopicRegistry, logs: LogManager):
        self.config = config
        self.topics = topics
        self.logs = logs
        #: called with a topic's name once it is deleted
        self.on_deleted: list[Callable[[str], None]] = []

    def create_topic(
        self,
        name: str,
        partitions: int,
        configs: dict[str, str] | None = None,
        internal: bool = False,
        validate_only: bool = False,
    ) -> Topic:
        """Validate, register and open the logs of a new topic. Config values are stored in their
        canonical form. With ``validate_only`` the returned topic is not registered (zero id)."""
        self.topics.check_new(name)
        configs = {key: canonical(key, value) for key, value in (configs or {}).items()}
        validate_topic_configs(self.config.log_defaults(), configs)
        if validate_only:
            if partitions < 1:
                raise KafkaError(ErrorCode.INVALID_PARTITIONS, "number of partitions must be at least 1")
            return Topic(name, ZERO_UUID, partitions, configs, internal)
        topic = self.topics.create(name, partitions, configs, internal)
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

    def create_partitions(self, name: str, count: int, validate_only: bool = False) -> Topic:
        """Grow a topic to ``count`` partitions (INVALID_PARTITIONS unless it is an increase)."""
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
        self.logs.open_topic(name, count, topic.configs, first=topic.partitions)
        return self.topics.set_partitions(name, count)

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
