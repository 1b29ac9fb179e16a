"""One module per API: decoded request in, response object out. ``build_registry`` wires them."""

from __future__ import annotations

from .registry import Api, ClientInfo, Registry, RequestContext


def build_registry() -> Registry:
    from . import api_versions, describe_cluster, find_coordinator, metadata

    return Registry([api_versions, metadata, find_coordinator, describe_cluster])


__all__ = ["Api", "ClientInfo", "Registry", "RequestContext", "build_registry"]
