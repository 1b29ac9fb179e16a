"""One module per API: decoded request in, response object out. ``build_registry`` wires them."""

from __future__ import annotations

from .registry import Api, ClientInfo, CloseConnection, Registry, RequestContext


def build_registry() -> Registry:
    from . import (
        api_versions,
        describe_cluster,
        fetch,
        find_coordinator,
        init_producer_id,
        metadata,
        produce,
    )

    return Registry(
        [produce, fetch, metadata, find_coordinator, api_versions, init_producer_id, describe_cluster]
    )


__all__ = ["Api", "ClientInfo", "CloseConnection", "Registry", "RequestContext", "build_registry"]
