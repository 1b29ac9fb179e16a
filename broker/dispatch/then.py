"""``then(result, fn)``: change a handler's response once it exists, whether the coordinator
answered at once or with an awaitable (a response waiting for its records' flush)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any


def then(result: Any, fn: Callable[[Any], None]) -> Any:
    """``fn(response)`` now, or when the awaitable ``result`` completes; returns what to answer."""
    if inspect.isawaitable(result):
        return _later(result, fn)
    fn(result)
    return result


async def _later(result: Any, fn: Callable[[Any], None]) -> Any:
    response = await result
    fn(response)
    return response
