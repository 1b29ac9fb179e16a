"""Per-group configs (the GROUP config resource, KIP-848): ``consumer.session.timeout.ms`` and
``consumer.heartbeat.interval.ms``, within the broker's ``group.consumer.min/max.*`` bounds.

Kept in ``group-configs.json`` in the data directory, rewritten atomically on change; like Kafka's,
they outlive the group itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from broker.datadir import write_durably
from broker.protocol.errors import ErrorCode, KafkaError


@dataclass(frozen=True)
class GroupSetting:
    """A group-level setting (IncrementalAlterConfigs on a group) and the broker properties bounding it."""

    name: str
    broker_key: str  # the broker property that supplies the default
    min_key: str
    max_key: str
    doc: str


GROUP_SETTINGS: dict[str, GroupSetting] = {
    s.name: s
    for s in [
        GroupSetting(
            "consumer.session.timeout.ms",
            "group.consumer.session.timeout.ms",
            "group.consumer.min.session.timeout.ms",
            "group.consumer.max.session.timeout.ms",
            "Session timeout of the group's consumer-protocol members.",
        ),
        GroupSetting(
            "consumer.heartbeat.interval.ms",
            "group.consumer.heartbeat.interval.ms",
            "group.consumer.min.heartbeat.interval.ms",
            "group.consumer.max.heartbeat.interval.ms",
            "Heartbeat interval given to the group's consumer-protocol members.",
        ),
    ]
}


class GroupConfigStore:
    def __init__(self, data_dir: Path, broker_config: Any):
        self.path = data_dir / "group-configs.json"
        self.broker_config = broker_config
        self.overrides: dict[str, dict[str, str]] = {}
        if self.path.exists():
            self.overrides = orjson.loads(self.path.read_bytes())

    def validate(self, name: str, value: str | None) -> int:
        setting = GROUP_SETTINGS.get(name)
        if setting is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown group config name: {name}")
        try:
            v = int(str(value).strip())
        except ValueError:
            raise KafkaError(
                ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {name}: not an integer"
            ) from None
        lo, hi = self.broker_config[setting.min_key], self.broker_config[setting.max_key]
        if v < lo:
            raise KafkaError(
                ErrorCode.INVALID_CONFIG, f"{name} must be greater than or equal to {setting.min_key} {lo}"
            )
        if v > hi:
            raise KafkaError(
                ErrorCode.INVALID_CONFIG, f"{name} must be less than or equal to {setting.max_key} {hi}"
            )
        return v

    def value(self, group_id: str, name: str) -> int:
        raw = self.overrides.get(group_id, {}).get(name)
        return int(raw) if raw is not None else self.broker_config[GROUP_SETTINGS[name].broker_key]

    def replace(self, group_id: str, configs: dict[str, str]) -> None:
        for k, v in configs.items():
            self.validate(k, v)
        if configs:
            self.overrides[group_id] = {k: str(int(v)) for k, v in configs.items()}
        else:
            self.overrides.pop(group_id, None)
        write_durably(self.path, orjson.dumps(self.overrides, option=orjson.OPT_INDENT_2))
