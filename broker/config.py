"""Broker configuration, keyed by Kafka's own property names.

Values come from (lowest to highest precedence) the defaults below, a ``.properties`` file, and
``--config key=value`` pairs. Unknown keys are kept and logged, as Kafka does, so a real
``server.properties`` can be reused.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Setting:
    name: str
    type: type
    default: Any
    doc: str
    minimum: int | None = None


_SETTINGS = [
    Setting("node.id", int, 1, "This broker's node id.", 0),
    Setting("host", str, "127.0.0.1", "Address to listen on."),
    Setting("port", int, 9092, "TCP port to listen on (0 picks a free one).", 0),
    Setting("advertised.host", str, "", "Host name given to clients in metadata (default: host)."),
    Setting("advertised.port", int, 0, "Port given to clients in metadata (default: the bound port).", 0),
    Setting("log.dirs", str, "./kafka-data", "Data directory."),
    Setting("auto.create.topics.enable", bool, True, "Create unknown topics named in Metadata requests."),
    Setting("num.partitions", int, 1, "Partitions of an auto-created topic.", 1),
    Setting("default.replication.factor", int, 1, "Replication factor reported for topics.", 1),
    Setting("socket.request.max.bytes", int, 104857600, "Largest request frame accepted.", 1),
    Setting("connections.max.idle.ms", int, 600000, "Close connections idle this long.", 1),
    Setting("broker.rack", str, "", "Rack id reported in metadata (empty: none)."),
]
SETTINGS: dict[str, Setting] = {s.name: s for s in _SETTINGS}


class ConfigError(ValueError):
    """A configuration value is invalid; the message names the key."""


def _coerce(setting: Setting, raw: Any) -> Any:
    if setting.type is bool:
        if isinstance(raw, bool):
            return raw
        s = str(raw).strip().lower()
        if s not in ("true", "false"):
            raise ConfigError(f"{setting.name}: expected true or false, got {raw!r}")
        return s == "true"
    try:
        value = setting.type(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"{setting.name}: expected {setting.type.__name__}, got {raw!r}") from None
    if setting.minimum is not None and value < setting.minimum:
        raise ConfigError(f"{setting.name}: must be at least {setting.minimum}, got {value}")
    return value


class Config:
    """Typed view over the merged properties: ``config["num.partitions"]`` -> int."""

    def __init__(self, values: Mapping[str, Any] | None = None):
        self._values: dict[str, Any] = {s.name: s.default for s in _SETTINGS}
        self.unknown: dict[str, str] = {}
        for key, raw in (values or {}).items():
            self.set(key, raw)

    def set(self, key: str, raw: Any) -> None:
        setting = SETTINGS.get(key)
        if setting is None:
            self.unknown[key] = str(raw)
            log.info("ignoring unknown config %s=%s", key, raw)
            return
        self._values[key] = _coerce(setting, raw)

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def as_dict(self) -> dict[str, Any]:
        return dict(self._values)

    @property
    def data_dir(self) -> Path:
        return Path(self["log.dirs"].split(",")[0])


def parse_properties(text: str) -> dict[str, str]:
    """Java ``.properties`` subset: ``key=value`` or ``key: value`` lines, ``#``/``!`` comments."""
    out: dict[str, str] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s[0] in "#!":
            continue
        for sep in ("=", ":"):
            if sep in s:
                k, v = s.split(sep, 1)
                out[k.strip()] = v.strip()
                break
        else:
            raise ConfigError(f"line {lineno}: expected key=value, got {line!r}")
    return out


def parse_pairs(pairs: Iterable[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for p in pairs:
        if "=" not in p:
            raise ConfigError(f"--config expects key=value, got {p!r}")
        k, v = p.split("=", 1)
        out[k.strip()] = v.strip()
    return out
