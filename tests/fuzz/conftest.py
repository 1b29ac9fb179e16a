"""Prints the fuzz cases run per API (tests/fuzz/tally.py) at the end of the session."""

from __future__ import annotations

from typing import Any

from tests.fuzz import tally


def pytest_terminal_summary(terminalreporter: Any) -> None:
    lines = tally.summary()
    if lines:
        terminalreporter.section("fuzz cases per API")
        for line in lines:
            terminalreporter.write_line(line)
