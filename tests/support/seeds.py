"""Telling a randomized test's seed where a crash cannot take it away.

pytest captures a test's output and reports it with the test's result. An xdist worker that dies
after a test failed (a client library aborting as its objects are destroyed, say) takes that output
with it, and the seed that would reproduce the failure is lost. ``tell`` prints the line as usual
and also writes it to the worker's own stderr at once, past the capture: the controller's terminal,
and so the CI log.
"""

from __future__ import annotations

import sys

import pytest

_config: pytest.Config | None = None


def bind(config: pytest.Config) -> None:
    """The session's config (tests/conftest.py ``pytest_configure``), for its capture manager."""
    global _config
    _config = config


def tell(text: str) -> None:
    """Print ``text`` (captured, reported with the test) and write it to stderr past the capture now."""
    print(text)
    capman = _config.pluginmanager.getplugin("capturemanager") if _config is not None else None
    if capman is None:
        return
    with capman.global_and_fixture_disabled():
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
