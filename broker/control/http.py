"""The control API over HTTP/JSON (aiohttp's server), on its own listener and the broker's loop.

Off unless ``control.port`` (``--control-port``) is given; binds ``control.host`` (127.0.0.1 by
default); with ``control.token`` every request must carry ``Authorization: Bearer <token>``.

:func:`build_app` gathers the routes of the feature modules: each exposes
``routes(control) -> list[aiohttp.web.RouteDef]``. Errors are JSON: 400 ``{"error": ..., "valid":
[...]}`` for a bad request (nothing applied), 401 without the token, 404 for an unknown rule, group
or path.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from .faults import BadRule
from .http_features import clock_routes, cluster_routes, invariant_routes, rebalance_routes, trace_routes
from .operations import NotFound, Refused

if TYPE_CHECKING:
    from .operations import Control

log = logging.getLogger(__name__)

ROUTE_DEFS: web.AppKey[list[web.RouteDef]] = web.AppKey("route_defs", list)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _json(data: Any, status: int = 200) -> web.Response:
    return web.json_response(data, status=status, dumps=lambda v: json.dumps(v, indent=None, default=str))


async def _body(request: web.Request) -> Any:
    if not request.can_read_body:
        return {}
    try:
        return json.loads(await request.read() or b"{}")
    except ValueError as e:
        raise BadRule(f"the body is not JSON: {e}", ["a JSON object"]) from e


def routes(control: Control) -> list[web.RouteDef]:
    """Fault rules and live state."""

    async def index(request: web.Request) -> web.Response:
        paths = sorted({(r.method, r.path) for r in request.app[ROUTE_DEFS]}, key=lambda mp: (mp[1], mp[0]))
        return _json({"endpoints": [f"{m} {p}" for m, p in paths]})

    async def list_rules(request: web.Request) -> web.Response:
        return _json({"rules": control.rules()})

    async def add_rule(request: web.Request) -> web.Response:
        body = await _body(request)
        if isinstance(body, list):
            return _json({"rules": control.add_rules(body)}, 201)
        return _json(control.add_rule(body), 201)

    async def remove_rule(request: web.Request) -> web.Response:
        return _json(control.remove_rule(request.match_info["id"]))

    async def clear_rules(request: web.Request) -> web.Response:
        return _json({"removed": control.clear_rules()})

    async def groups(request: web.Request) -> web.Response:
        return _json({"groups": control.groups()})

    async def group(request: web.Request) -> web.Response:
        return _json(control.group(request.match_info["group"]))

    async def offsets(request: web.Request) -> web.Response:
        return _json(
            {"group_id": request.match_info["group"], "offsets": control.offsets(request.match_info["group"])}
        )

    async def topics(request: web.Request) -> web.Response:
        return _json({"topics": control.topics()})

    async def connections(request: web.Request) -> web.Response:
        return _json({"connections": control.connections()})

    return [
        web.get("/", index),
        web.get("/faults", list_rules),
        web.post("/faults", add_rule),
        web.delete("/faults", clear_rules),
        web.delete("/faults/{id}", remove_rule),
        web.get("/groups", groups),
        web.get("/groups/{group}", group),
        web.get("/groups/{group}/offsets", offsets),
        web.get("/topics", topics),
        web.get("/connections", connections),
    ]


def _feature_routes(control: Control) -> list[web.RouteDef]:
    """Our routes, then the clock's, the trace journal's, the invariant checker's and the rebalance
    report's (http_features.py)."""
    return [
        *routes(control),
        *clock_routes(control),
        *trace_routes(control),
        *invariant_routes(control),
        *rebalance_routes(control),
        *cluster_routes(control),
    ]


def build_app(control: Control) -> web.Application:
    """The aiohttp application serving the control API of ``control``."""
    token = control.services.config["control.token"] or None

    @web.middleware
    async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
        if token is not None:
            got = request.headers.get("Authorization", "")
            if not hmac.compare_digest(got.encode(), f"Bearer {token}".encode()):
                return _json({"error": "missing or wrong bearer token (Authorization: Bearer <token>)"}, 401)
        try:
            return await handler(request)
        except BadRule as e:
            return _json(e.to_json(), 400)
        except NotFound as e:
            return _json({"error": e.message}, 404)
        except Refused as e:
            return _json({"error": e.message, "code": e.code}, 409)
        except web.HTTPException as e:
            if e.status >= 400:
                return _json({"error": e.reason}, e.status)
            raise

    app = web.Application(middlewares=[errors])
    defs = _feature_routes(control)
    app[ROUTE_DEFS] = defs
    app.add_routes(defs)
    return app


class ControlServer:
    """The control API's listener (started and stopped with the broker)."""

    def __init__(self, control: Control, host: str, port: int):
        self.control = control
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None

    async def start(self) -> int:
        """Listen; returns the bound port (``port`` 0 picks a free one)."""
        self._runner = web.AppRunner(build_app(self.control), access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        await site.start()
        self.port = self._runner.addresses[0][1]
        log.info("control API listening on http://%s:%d/", self.host, self.port)
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
