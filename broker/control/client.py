"""A Python client of the control API (standard library only, blocking)::

    ctl = ControlClient("http://127.0.0.1:9644", token=None)
    rule = ctl.add_rule(api="Produce", error="NOT_LEADER_OR_FOLLOWER", times=3)
    ctl.rules(); ctl.remove_rule(rule["id"]); ctl.clear_rules()
    ctl.groups(); ctl.group("g"); ctl.offsets("g"); ctl.topics(); ctl.connections()

The method names and arguments are those of the in-process :class:`broker.control.Control`.
A 4xx answer raises :class:`ControlError` carrying the status and the JSON error (with ``valid``
choices for a 400).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote


class ControlError(Exception):
    def __init__(self, status: int, body: Any):
        self.status = status
        self.body = body
        msg = body.get("error") if isinstance(body, dict) else body
        valid = body.get("valid") if isinstance(body, dict) else None
        super().__init__(f"{status}: {msg}" + (f" (valid: {', '.join(map(str, valid))})" if valid else ""))


class ControlClient:
    def __init__(self, url: str, token: str | None = None, timeout: float = 30.0):
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def request(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                payload = json.loads(raw)
            except ValueError:
                payload = raw.decode(errors="replace")
            raise ControlError(e.code, payload) from None

    # ------------------------------------------------------------------ fault rules

    def add_rule(self, spec: Mapping[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
        merged = dict(spec or {})
        merged.update(fields)
        return self.request("POST", "/faults", merged)

    def add_rules(self, specs: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
        return self.request("POST", "/faults", list(specs))["rules"]

    def rules(self) -> list[dict[str, Any]]:
        return self.request("GET", "/faults")["rules"]

    def remove_rule(self, rule_id: int) -> dict[str, Any]:
        return self.request("DELETE", f"/faults/{int(rule_id)}")

    def clear_rules(self) -> int:
        return self.request("DELETE", "/faults")["removed"]

    # ------------------------------------------------------------------ live state

    def groups(self) -> list[dict[str, Any]]:
        return self.request("GET", "/groups")["groups"]

    def group(self, group_id: str) -> dict[str, Any]:
        return self.request("GET", f"/groups/{quote(group_id, safe='')}")

    def offsets(self, group_id: str) -> dict[str, Any]:
        return self.request("GET", f"/groups/{quote(group_id, safe='')}/offsets")["offsets"]

    def topics(self) -> list[dict[str, Any]]:
        return self.request("GET", "/topics")["topics"]

    def connections(self) -> list[dict[str, Any]]:
        return self.request("GET", "/connections")["connections"]

    # the virtual clock, the trace journal, the invariant checker, the rebalance report

    def clock(self) -> dict[str, Any]:
        return self.request("GET", "/clock")

    def set_clock_mode(self, mode: str) -> dict[str, Any]:
        return self.request("PUT", "/clock", {"mode": mode})

    def advance(self, ms: int | str) -> dict[str, Any]:
        """``ms`` milliseconds, or a duration such as ``"46s"``."""
        return self.request("POST", "/clock/advance", {"ms": ms} if isinstance(ms, int) else {"duration": ms})

    def start_trace(self, path: str, **options: Any) -> dict[str, Any]:
        return self.request("PUT", "/trace", {"file": path, **options})

    def stop_trace(self) -> dict[str, Any]:
        return self.request("DELETE", "/trace")

    def check_invariants(self, enabled: bool = True) -> dict[str, Any]:
        return self.request("PUT", "/invariants", {"enabled": enabled})

    def violations(self) -> list[dict[str, Any]]:
        return self.request("GET", "/invariants")["violations"]

    def report_rebalances(self, enabled: bool = True) -> dict[str, Any]:
        return self.request("PUT", "/rebalances", {"enabled": enabled})

    def rebalances(self, group_id: str | None = None) -> dict[str, Any]:
        return self.request("GET", "/rebalances" + (f"?group={quote(group_id)}" if group_id else ""))

    # ------------------------------------------------------------------ the cluster

    def cluster(self) -> dict[str, Any]:
        return self.request("GET", "/cluster")

    def move_leader(self, topic: str, partition: int, to: int | str = "next") -> dict[str, Any]:
        return self.request("POST", "/cluster/leaders", {"topic": topic, "partition": partition, "to": to})

    def shuffle_leaders(self) -> dict[str, Any]:
        return self.request("POST", "/cluster/shuffle")

    def move_coordinator(
        self, group_id: str | None = None, to: int | str = "next", *, transactional_id: str | None = None
    ) -> dict[str, Any]:
        """Move a group's coordinator, or (``transactional_id``) a transactional id's."""
        if (group_id is None) == (transactional_id is None):
            raise ValueError("give a group id or a transactional id")
        if transactional_id is not None:
            return self.request(
                "POST", "/cluster/coordinators", {"transactional_id": transactional_id, "to": to}
            )
        return self.request("POST", "/cluster/coordinators", {"group": group_id, "to": to})

    def node_down(self, node: int) -> dict[str, Any]:
        return self.request("POST", f"/cluster/nodes/{int(node)}/down")

    def node_up(self, node: int) -> dict[str, Any]:
        return self.request("POST", f"/cluster/nodes/{int(node)}/up")

    def rolling_restart(self, pause_ms: int = 1000) -> list[int]:
        """Every node down and up in turn; returns once all are back."""
        return self.request("POST", "/cluster/rolling-restart", {"pause_ms": pause_ms})["restarted"]
