"""Cluster metadata kept in the data directory: identity (cluster id, node id) and the topic registry.

``meta.properties`` holds the cluster id, generated once per data directory, like Kafka's. The
topic registry (``topics.json``) holds every topic's name, id, partition count and configs; it is
rewritten atomically (temp file, fsync, rename, directory fsync) on every change, so a crash leaves
either the old or the new registry, never a torn one.
"""

from __future__ import annotations

import base64
import logging
import re
import uuid
from pathlib import Path

import orjson

from broker.datadir import write_durably
from broker.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

_TOPIC_RE = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME = 249


def kafka_uuid_str(u: uuid.UUID) -> str:
    """Kafka's textual Uuid form: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def validate_topic_name(name: str) -> None:
    if not name:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "topic name is empty")
    if name in (".", ".."):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME:
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name is longer than {MAX_TOPIC_NAME} characters"
        )
    if not _TOPIC_RE.match(name):
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"topic name {name!r} has characters other than ASCII letters, digits, '.', '_' and '-'",
        )


class Topic:
    """A topic: its name, id, partition count, config overrides and replica placement.

    A plain class, not a dataclass: a dataclass compiles its generated methods at import (~3.5M
    instructions each), which every broker start pays (bench/startup_bench.py); the mutable
    records every start-up defines (this one, ClientInfo, the cleaner's CleanResult) are written
    out instead, and the immutable ones are NamedTuples (see broker.config.Setting)."""

    def __init__(
        self,
        name: str,
        topic_id: uuid.UUID,
        partitions: int,
        configs: dict[str, str] | None = None,
        internal: bool = False,
        replicas: list[list[int]] | None = None,
        leaders: list[int] | None = None,
        leader_epochs: list[int] | None = None,
    ) -> None:
        self.name = name
        self.topic_id = topic_id
        self.partitions = partitions
        self.configs: dict[str, str] = {} if configs is None else configs
        self.internal = internal
        #: per partition, its replicas (the first is the preferred leader); None: every partition's
        #: replica list is [the first node] (topics of a single-node broker, see broker/nodes.py)
        self.replicas = replicas
        #: per partition, its leader (-1: none live) and leader epoch; None with ``replicas``
        self.leaders = leaders
        self.leader_epochs = leader_epochs


def _topic_doc(t: Topic) -> dict:
    doc: dict = {
        "name": t.name,
        "id": str(t.topic_id),
        "partitions": t.partitions,
        "configs": t.configs,
        "internal": t.internal,
    }
    if t.replicas is not None:  # only topics of a multi-node cluster: single-node files stay as they were
        doc["replicas"] = t.replicas
        doc["leaders"] = t.leaders
        doc["leader_epochs"] = t.leader_epochs
    return doc


class ClusterMeta:
    """Identity of this one-node cluster, loaded from (or created in) the data directory."""

    def __init__(self, data_dir: Path, node_id: int):
        self.data_dir = data_dir
        self.node_id = node_id
        data_dir.mkdir(parents=True, exist_ok=True)
        path = data_dir / "meta.properties"
        props: dict[str, str] = {}
        if path.exists():
            for line in path.read_text().splitlines():
                if "=" in line and not line.startswith("#"):
                    k, v = line.split("=", 1)
                    props[k.strip()] = v.strip()
        if "cluster.id" not in props:
            props = {"version": "1", "cluster.id": kafka_uuid_str(uuid.uuid4()), "node.id": str(node_id)}
            body = "".join(f"{k}={v}\n" for k, v in props.items())
            write_durably(path, ("#Written by the broker; do not edit\n" + body).encode())
            log.info("new data directory %s: cluster id %s", data_dir, props["cluster.id"])
        self.cluster_id: str = props["cluster.id"]


class TopicRegistry:
    """Every topic of the cluster; persisted on each change."""

    def __init__(self, data_dir: Path):
        self.path = data_dir / "topics.json"
        self._by_name: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}
        if self.path.exists():
            raw = orjson.loads(self.path.read_bytes())
            for t in raw["topics"]:
                topic = Topic(
                    name=t["name"],
                    topic_id=uuid.UUID(t["id"]),
                    partitions=t["partitions"],
                    configs=t.get("configs", {}),
                    internal=t.get("internal", False),
                    replicas=t.get("replicas"),
                    leaders=t.get("leaders"),
                    leader_epochs=t.get("leader_epochs"),
                )
                self._index(topic)

    def _index(self, topic: Topic) -> None:
        self._by_name[topic.name] = topic
        self._by_id[topic.topic_id] = topic

    def _save(self) -> None:
        doc = {"version": 1, "topics": [_topic_doc(t) for t in self._by_name.values()]}
        write_durably(self.path, orjson.dumps(doc, option=orjson.OPT_INDENT_2))

    def save(self) -> None:
        """Persist the registry after a change made to a topic in place (its leaders and epochs)."""
        self._save()

    def get(self, name: str) -> Topic | None:
        return self._by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._by_id.get(topic_id)

    def name_of(self, topic_id: uuid.UUID | None) -> str | None:
        """The name of the topic with ``topic_id`` (None when there is none)."""
        topic = self._by_id.get(topic_id)
        return topic.name if topic is not None else None

    def all(self) -> list[Topic]:
        return list(self._by_name.values())

    def __len__(self) -> int:
        return len(self._by_name)

    def check_new(self, name: str) -> None:
        """Raise the KafkaError that creating a topic named ``name`` would raise (a bad name, an
        existing or colliding topic), without creating anything."""
        validate_topic_name(name)
        if name in self._by_name:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        collide = name.replace(".", "_")
        for other in self._by_name:
            if other.replace(".", "_") == collide:
                raise KafkaError(
                    ErrorCode.INVALID_TOPIC_EXCEPTION,
                    f"topic {name!r} collides with existing topic {other!r} ('.' and '_' are the same)",
                )

    def create(
        self,
        name: str,
        partitions: int,
        configs: dict[str, str] | None = None,
        internal: bool = False,
        replicas: list[list[int]] | None = None,
    ) -> Topic:
        """``replicas``: each partition's replica list (leaders: the first of each, epoch 0)."""
        self.check_new(name)
        if partitions < 1:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, "number of partitions must be at least 1")
        topic_id = uuid.uuid4()
        while topic_id.int == 0 or topic_id in self._by_id:
            topic_id = uuid.uuid4()
        topic = Topic(name, topic_id, partitions, dict(configs or {}), internal)
        if replicas is not None:
            topic.replicas = [list(r) for r in replicas]
            topic.leaders = [r[0] for r in replicas]
            topic.leader_epochs = [0] * partitions
        self._index(topic)
        self._save()
        log.info(
            "created topic %s (%d partition%s, id %s)",
            name,
            partitions,
            "" if partitions == 1 else "s",
            kafka_uuid_str(topic_id),
        )
        return topic

    def _require(self, name: str) -> Topic:
        topic = self._by_name.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        return topic

    def delete(self, name: str) -> Topic:
        """Forget a topic (UNKNOWN_TOPIC_OR_PARTITION if there is none); a topic created later under
        the same name gets a new id."""
        topic = self._require(name)
        del self._by_name[name]
        del self._by_id[topic.topic_id]
        try:
            self._save()
        except BaseException:
            self._index(topic)
            raise
        log.info("deleted topic %s (id %s)", name, kafka_uuid_str(topic.topic_id))
        return topic

    def set_partitions(self, name: str, partitions: int, replicas: list[list[int]] | None = None) -> Topic:
        """Grow a topic to ``partitions`` partitions (never shrinks: INVALID_PARTITIONS);
        ``replicas``: the new partitions' replica lists (a topic with replica lists needs them)."""
        topic = self._require(name)
        if partitions <= topic.partitions:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS,
                f"topic {name!r} has {topic.partitions} partition(s); {partitions} would not be an increase",
            )
        old = topic.partitions
        saved = (topic.replicas, topic.leaders, topic.leader_epochs)
        topic.partitions = partitions
        if replicas is not None:  # (a topic without replica lists gets them first: broker/nodes.py)
            assert (
                topic.replicas is not None and topic.leaders is not None and topic.leader_epochs is not None
            )
            new = [list(r) for r in replicas]
            topic.replicas = [*topic.replicas, *new]
            topic.leaders = [*topic.leaders, *(r[0] for r in new)]
            topic.leader_epochs = [*topic.leader_epochs, *([0] * len(new))]
        try:
            self._save()
        except BaseException:
            topic.partitions = old
            topic.replicas, topic.leaders, topic.leader_epochs = saved
            raise
        log.info("topic %s grew from %d to %d partitions", name, old, partitions)
        return topic

    def set_configs(self, name: str, configs: dict[str, str]) -> Topic:
        """Replace a topic's config overrides."""
        topic = self._require(name)
        old = topic.configs
        topic.configs = dict(configs)
        try:
            self._save()
        except BaseException:
            topic.configs = old
            raise
        log.info("topic %s configs now %s", name, topic.configs)
        return topic
