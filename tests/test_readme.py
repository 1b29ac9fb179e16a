"""README promises that tests keep true: the API table matches the registry; the two commands exist."""

from __future__ import annotations

import os
import re
from pathlib import Path

from broker.dispatch import build_registry
from broker.protocol.generated import APIS

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _table() -> list[tuple[str, int, str]]:
    block = README.split("<!-- api-table:start -->")[1].split("<!-- api-table:end -->")[0]
    rows = []
    for line in block.strip().splitlines()[2:]:
        name, key, versions = (c.strip() for c in line.strip("|").split("|"))
        rows.append((name, int(key), versions))
    return rows


def test_api_table_matches_registry():
    registry = build_registry()
    expected = [
        (APIS[key].name, key, f"{lo}-{hi}" if lo != hi else str(lo)) for key, lo, hi in registry.ranges()
    ]
    assert _table() == expected


def test_readme_names_the_two_commands_and_they_exist():
    commands = re.findall(r"^    (\./scripts/\S+\.sh)$", README, flags=re.M)
    assert commands == ["./scripts/serve.sh", "./scripts/test.sh"]
    for c in commands:
        assert os.access(ROOT / c, os.X_OK), c


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "./scripts/test.sh" in ci
