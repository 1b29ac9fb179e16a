"""One module per API: decoded request in, response object out. ``build_registry`` wires them."""

from __future__ import annotations

import importlib

from .registry import Api, ClientInfo, CloseConnection, Registry, RequestContext

#: Every served API's handler module (one per line, by API key).
HANDLERS = [
    "produce",  # 0
    "fetch",  # 1
    "list_offsets",  # 2
    "metadata",  # 3
    "find_coordinator",  # 10
    "api_versions",  # 18
    "init_producer_id",  # 22
    "offset_for_leader_epoch",  # 23
    "describe_cluster",  # 60
]


def build_registry() -> Registry:
    return Registry(importlib.import_module(f"{__name__}.{name}") for name in HANDLERS)


__all__ = ["Api", "ClientInfo", "CloseConnection", "Registry", "RequestContext", "build_registry", "HANDLERS"]
