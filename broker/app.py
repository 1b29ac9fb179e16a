"""The composition root: a ``Broker`` wires config, cluster metadata, the API registry and the listener.

Usage::

    broker = Broker(Config({"port": 0, "log.dirs": "/tmp/x"}))
    await broker.start()  # broker.port is the bound port
    await broker.stop()

Start-up order: data directory identity, topic registry, API registry, then the listener.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import socket

from broker.cluster import ClusterMeta, Topic, TopicRegistry
from broker.config import Config
from broker.dispatch import build_registry
from broker.log.config import parse_topic_config
from broker.log.manager import LogManager
from broker.server import Listener

log = logging.getLogger(__name__)


class Broker:
    def __init__(self, config: Config):
        self.config = config
        self.node_id: int = config["node.id"]
        data_dir = config.data_dir
        self.cluster = ClusterMeta(data_dir, self.node_id)
        self.cluster_id = self.cluster.cluster_id
        self.topics = TopicRegistry(data_dir)
        for leftover in data_dir.glob("*-delete"):
            shutil.rmtree(leftover, ignore_errors=True)  # a topic deletion interrupted by a crash
        self.logs = LogManager(data_dir, config)
        for topic in self.topics.all():
            self.logs.open_topic(topic.name, topic.partitions, topic.configs)
        self.registry = build_registry()
        self.rack: str | None = config["broker.rack"] or None
        self.connections: set = set()
        self.listener = Listener(self, config["host"], config["port"])
        self.port: int = config["port"]
        self.advertised_host: str = ""
        self.advertised_port: int = 0
        self._stopped = asyncio.Event()

    def create_topic(
        self, name: str, partitions: int, configs: dict[str, str] | None = None, internal: bool = False
    ) -> Topic:
        """Validate, register and open the logs of a new topic (KafkaError when refused)."""
        configs = dict(configs or {})
        for key, value in configs.items():
            parse_topic_config(key, value)
        topic = self.topics.create(name, partitions, configs, internal)
        self.logs.open_topic(name, partitions, configs)
        return topic

    async def start(self) -> None:
        self.logs.start()
        self.port = await self.listener.start()
        host = self.config["advertised.host"] or self.config["host"]
        if host in ("0.0.0.0", "::", ""):
            host = socket.getfqdn()
        self.advertised_host = host
        self.advertised_port = self.config["advertised.port"] or self.port
        log.info(
            "broker %d of cluster %s listening on %s:%d (advertised as %s:%d), data in %s",
            self.node_id,
            self.cluster_id,
            self.config["host"],
            self.port,
            self.advertised_host,
            self.advertised_port,
            self.config.data_dir,
        )

    async def stop(self) -> None:
        await self.listener.stop()
        await self.logs.close()
        self._stopped.set()
        log.info("broker stopped")

    async def wait_stopped(self) -> None:
        await self._stopped.wait()
