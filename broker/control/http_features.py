"""The HTTP routes of the control plane's features (virtual clock, trace journal, invariant checker,
rebalance report): the features themselves (clock.py, trace.py, invariants.py, report.py) know
nothing of HTTP, so that a broker without a control port never imports aiohttp."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from .clock import BadRequest, advance, clock_of, set_mode
from .invariants import InvariantChecker, checker
from .report import reporter
from .trace import Target, start, stop


def rebalance_routes(control: Any) -> list[web.RouteDef]:
    """``GET /rebalances`` (every group; ``?group=g`` for one), ``PUT /rebalances``
    ``{"enabled": true|false}``."""

    async def read(request: web.Request) -> web.Response:
        return web.json_response(reporter(control).report(request.query.get("group")))

    async def switch(request: web.Request) -> web.Response:
        enabled = await _enabled(request)
        if isinstance(enabled, web.Response):
            return enabled
        r = reporter(control)
        r.enable() if enabled else r.disable()
        return web.json_response(r.report())

    return [web.get("/rebalances", read), web.put("/rebalances", switch)]


def invariant_routes(control: Any) -> list[web.RouteDef]:
    """``GET /invariants`` (state and violations; checks every log first), ``PUT /invariants``
    ``{"enabled": true|false}``, ``DELETE /invariants/violations`` (forget them)."""

    def get() -> InvariantChecker:
        return checker(control)

    async def read(request: web.Request) -> web.Response:
        c = get()
        if c.enabled:
            c.check_logs()
        return web.json_response(c.describe())

    async def switch(request: web.Request) -> web.Response:
        enabled = await _enabled(request)
        if isinstance(enabled, web.Response):
            return enabled
        c = get()
        c.enable() if enabled else c.disable()
        return web.json_response(c.describe())

    async def clear(request: web.Request) -> web.Response:
        c = get()
        c.clear()
        return web.json_response(c.describe())

    return [
        web.get("/invariants", read),
        web.put("/invariants", switch),
        web.delete("/invariants/violations", clear),
    ]


def trace_routes(control: Any) -> list[web.RouteDef]:
    """``GET /trace`` (the journal's settings and line count, or ``{"enabled": false}``);
    ``PUT /trace`` ``{"file", "max_bytes", "backups", "groups": [...], "apis": [...], "clients"}``
    starts it (or restarts it with these settings); ``DELETE /trace`` stops it."""

    async def read(request: web.Request) -> web.Response:
        journal = getattr(Target.of(control).pipeline, "tracer", None)
        return web.json_response(journal.describe() if journal is not None else {"enabled": False})

    async def put(request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except ValueError as e:
            return web.json_response({"error": f"the body is not JSON: {e}"}, status=400)
        allowed = {"file", "max_bytes", "backups", "groups", "apis", "clients"}
        if not isinstance(body, dict) or not isinstance(body.get("file"), str) or not body["file"]:
            return web.json_response(
                {"error": f'give {{"file": PATH, ...}}; fields: {sorted(allowed)}'}, status=400
            )
        unknown = set(body) - allowed
        if unknown:
            return web.json_response(
                {"error": f"unknown field(s) {sorted(unknown)}; valid: {sorted(allowed)}"}, status=400
            )
        options = {k: body[k] for k in ("max_bytes", "backups", "groups", "apis", "clients") if k in body}
        for k in ("max_bytes", "backups"):
            if k in options and (not isinstance(options[k], int) or options[k] < 0):
                return web.json_response({"error": f"{k} must be a non-negative integer"}, status=400)
        try:
            journal = start(control, body["file"], **options)
        except (ValueError, OSError, TypeError) as e:
            return web.json_response({"error": str(e)}, status=400)
        return web.json_response(journal.describe())

    async def delete(request: web.Request) -> web.Response:
        was = stop(control)
        return web.json_response({"enabled": False, "was": was})

    return [web.get("/trace", read), web.put("/trace", put), web.delete("/trace", delete)]


async def _json_body(request: web.Request) -> Any:
    try:
        return await request.json()
    except ValueError as e:
        raise BadRequest(f"the body is not JSON: {e}") from None


def _bad(e: BadRequest) -> web.Response:
    return web.json_response({"error": str(e)}, status=400)


def clock_routes(control: Any) -> list[web.RouteDef]:
    """The clock's HTTP endpoints (see the module docstring)."""

    async def get_clock(request: web.Request) -> web.Response:
        return web.json_response(clock_of(control).describe())

    async def put_clock(request: web.Request) -> web.Response:
        try:
            return web.json_response(set_mode(clock_of(control), await _json_body(request)))
        except BadRequest as e:
            return _bad(e)

    async def post_advance(request: web.Request) -> web.Response:
        try:
            return web.json_response(advance(clock_of(control), await _json_body(request)))
        except BadRequest as e:
            return _bad(e)

    return [
        web.get("/clock", get_clock),
        web.put("/clock", put_clock),
        web.post("/clock/advance", post_advance),
    ]


async def _enabled(request: web.Request) -> bool | web.Response:
    """The ``{"enabled": true|false}`` body of a switch, or the 400 answer to a bad one."""
    try:
        body = await request.json()
    except ValueError as e:
        return web.json_response({"error": f"the body is not JSON: {e}"}, status=400)
    enabled = body.get("enabled") if isinstance(body, dict) else None
    if not isinstance(enabled, bool):
        return web.json_response({"error": 'give {"enabled": true} or {"enabled": false}'}, status=400)
    return enabled


def cluster_routes(control: Any) -> list[web.RouteDef]:
    """The simulated cluster (broker/nodes.py): ``GET /cluster``; ``POST /cluster/leaders``
    ``{"topic", "partition", "to": node id | "next"}``; ``POST /cluster/shuffle``;
    ``POST /cluster/coordinators`` ``{"group", "to": node id | "next"}``;
    ``POST /cluster/nodes/{id}/down`` and ``/up``; ``POST /cluster/rolling-restart``
    ``{"pause_ms": N}`` (answered once every node is back). A refused operation is 409."""

    async def body(request: web.Request) -> dict:
        try:
            data = await request.json() if request.can_read_body else {}
        except ValueError as e:
            raise BadRequest(f"the body is not JSON: {e}") from None
        if not isinstance(data, dict):
            raise BadRequest("give a JSON object")
        return data

    async def read(request: web.Request) -> web.Response:
        return web.json_response(control.cluster())

    async def leaders(request: web.Request) -> web.Response:
        try:
            b = await body(request)
            if not isinstance(b.get("topic"), str) or not isinstance(b.get("partition"), int):
                raise BadRequest('give {"topic": NAME, "partition": N, "to": NODE or "next"}')
        except BadRequest as e:
            return _bad(e)
        return web.json_response(control.move_leader(b["topic"], b["partition"], b.get("to", "next")))

    async def shuffle(request: web.Request) -> web.Response:
        return web.json_response(control.shuffle_leaders())

    async def coordinators(request: web.Request) -> web.Response:
        try:
            b = await body(request)
            if isinstance(b.get("group"), str) == isinstance(b.get("transactional_id"), str):
                raise BadRequest(
                    'give {"group": GROUP_ID, "to": NODE or "next"} or {"transactional_id": ID, "to": ...}'
                )
        except BadRequest as e:
            return _bad(e)
        if isinstance(b.get("transactional_id"), str):
            return web.json_response(control.move_txn_coordinator(b["transactional_id"], b.get("to", "next")))
        return web.json_response(control.move_coordinator(b["group"], b.get("to", "next")))

    def node_id(request: web.Request) -> int:
        try:
            return int(request.match_info["id"])
        except ValueError:
            raise web.HTTPBadRequest(reason="a node id is an integer") from None

    async def down(request: web.Request) -> web.Response:
        return web.json_response(control.node_down(node_id(request)))

    async def up(request: web.Request) -> web.Response:
        return web.json_response(control.node_up(node_id(request)))

    async def rolling(request: web.Request) -> web.Response:
        try:
            b = await body(request)
            pause = b.get("pause_ms", 1000)
            if not isinstance(pause, int):
                raise BadRequest('give {"pause_ms": N}')
        except BadRequest as e:
            return _bad(e)
        return web.json_response({"restarted": await control.rolling_restart(pause)})

    return [
        web.get("/cluster", read),
        web.post("/cluster/leaders", leaders),
        web.post("/cluster/shuffle", shuffle),
        web.post("/cluster/coordinators", coordinators),
        web.post("/cluster/nodes/{id}/down", down),
        web.post("/cluster/nodes/{id}/up", up),
        web.post("/cluster/rolling-restart", rolling),
    ]
