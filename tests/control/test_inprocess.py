"""The in-process form of the control plane: ``running_broker(...).control`` gives the clock, the
trace journal, the invariant checker and the rebalance report as methods, run on the broker's loop."""

from __future__ import annotations

import orjson
import pytest

from broker.protocol.generated.api_versions import ApiVersionsRequest
from broker.testing import running_broker
from tests.support.wire import WireClient

pytestmark = pytest.mark.server


def test_clock_trace_invariants_and_rebalances_in_process(tmp_path):
    with running_broker(tmp_path / "data") as b:
        control = b.control
        assert control.set_clock_mode("manual")["mode"] == "manual"
        before = control.clock()["now_ms"]
        after = control.advance(1500)
        assert after["now_ms"] == before + 1500 and control.advance("2s")["now_ms"] == before + 3500

        journal = tmp_path / "trace.jsonl"
        assert control.start_trace(str(journal))["file"] == str(journal)
        with WireClient(b.port) as c:
            assert c.call(18, 3, ApiVersionsRequest("inproc", "1")).error_code == 0
        assert control.stop_trace() is not None
        lines = [orjson.loads(line) for line in journal.read_bytes().splitlines()]
        assert any(e.get("api") == "ApiVersions" for e in lines), lines

        state = control.check_invariants()
        assert state["enabled"] and control.violations() == []
        assert control.report_rebalances() == control.rebalances()
