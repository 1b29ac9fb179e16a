"""Handler tests without sockets: ``node`` is a broker whose requests go through its own request
pipeline in-process (tests/support/inprocess.py), so everything here is a ``unit`` test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.inprocess import InProcessBroker


@pytest.fixture
def node_factory(tmp_path: Path) -> Iterator[Callable[..., InProcessBroker]]:
    """Open in-process brokers with config overrides, as ``broker_factory`` starts socket ones."""
    opened: list[InProcessBroker] = []

    def open_(config: dict | None = None, data_dir: Path | None = None) -> InProcessBroker:
        node = InProcessBroker(data_dir or tmp_path / f"data{len(opened)}", config)
        opened.append(node)
        return node

    yield open_
    for node in opened:
        node.stop()


@pytest.fixture
def node(node_factory: Callable[..., InProcessBroker]) -> InProcessBroker:
    return node_factory()
