"""Topic regex subscriptions (KIP-848), evaluated on the broker with RE2 syntax, like Kafka's.

A pattern must match a whole topic name; internal topics never match. Compiled patterns are cached.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from broker.patterns import PatternError, compile_re2

if TYPE_CHECKING:
    import re2


class InvalidRegex(ValueError):
    pass


@lru_cache(maxsize=1024)
def compile_pattern(pattern: str) -> re2._Regexp:
    try:
        return compile_re2(pattern)
    except PatternError as e:
        raise InvalidRegex(
            f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: {e}."
        ) from None


def matching(pattern: str, topic_names: list[str]) -> list[str]:
    r = compile_pattern(pattern)
    return [n for n in topic_names if not n.startswith("__") and r.fullmatch(n)]
