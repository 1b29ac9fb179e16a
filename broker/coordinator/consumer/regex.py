"""Topic regex subscriptions (KIP-848), evaluated on the broker with RE2 syntax, like Kafka's.

A pattern must match a whole topic name; internal topics never match. Compiled patterns are cached.
"""

from __future__ import annotations

from functools import lru_cache

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False


class InvalidRegex(ValueError):
    pass


@lru_cache(maxsize=1024)
def compile_pattern(pattern: str) -> re2._Regexp:
    try:
        return re2.compile(pattern, options=_OPTIONS)
    except re2.error as e:
        reason = e.args[0].decode() if e.args and isinstance(e.args[0], bytes) else str(e)
        raise InvalidRegex(
            f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: {reason}."
        ) from None


def matching(pattern: str, topic_names: list[str]) -> list[str]:
    r = compile_pattern(pattern)
    return [n for n in topic_names if not n.startswith("__") and r.fullmatch(n)]
