"""RE2 regular expressions, Kafka's regex syntax for the optional features that take one: topic regex
subscriptions (broker/coordinator/consumer/regex.py) and ListTransactions' transactional id pattern
(broker/txn/admin.py).

The re2 module takes ~3 ms to import, which a broker start does not pay: it is imported when the
first pattern is compiled (``_re2``), so the first request with a pattern pays it once.
"""

from __future__ import annotations

import importlib
from functools import lru_cache
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import re2


class PatternError(ValueError):
    """RE2 refused a pattern; the message is RE2's reason."""


@lru_cache(maxsize=1)
def _re2() -> tuple[ModuleType, Any]:
    """The re2 module, imported on first use, and the options every pattern is compiled with."""
    module = importlib.import_module("re2")
    options = module.Options()
    options.log_errors = False
    return module, options


def compile_re2(pattern: str) -> re2._Regexp:
    """``pattern`` compiled by RE2; PatternError with RE2's reason if it is not a valid expression."""
    module, options = _re2()
    try:
        return module.compile(pattern, options=options)
    except module.error as e:
        reason = e.args[0].decode() if e.args and isinstance(e.args[0], bytes) else str(e)
        raise PatternError(reason) from None
