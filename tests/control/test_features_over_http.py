"""The clock, trace, invariant and rebalance-report routes through the real control listener
(``control.port``) and its Python client: the feature modules plug into the control API."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.control.client import ControlClient, ControlError


@pytest.mark.server
def test_feature_routes_over_the_control_port(broker_factory, tmp_path: Path):
    bt = broker_factory({"control.port": 0, "clock": "manual"})
    c = ControlClient(bt.control_url)
    start = c.request("GET", "/clock")["now_ms"]
    assert c.request("POST", "/clock/advance", {"duration": "46s"})["now_ms"] == start + 46000
    with pytest.raises(ControlError) as e:
        c.request("PUT", "/clock", {"mode": "later"})
    assert e.value.status == 400 and "system, manual" in e.value.body["error"]
    trace = c.request("PUT", "/trace", {"file": str(tmp_path / "t.jsonl"), "apis": ["ApiVersions"]})
    assert trace["api_keys"] == [18]
    assert c.request("GET", "/trace")["lines"] == 0
    assert c.request("DELETE", "/trace")["enabled"] is False
    assert c.request("PUT", "/invariants", {"enabled": True})["enabled"] is True
    assert c.request("GET", "/invariants")["violations"] == []
    assert c.request("PUT", "/rebalances", {"enabled": True}) == {"enabled": True, "groups": {}}
