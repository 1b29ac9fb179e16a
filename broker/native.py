"""Whether the broker uses its optional compiled paths (the C extensions setup.py builds where the
install has a compiler: broker/log/_native.c, broker/coordinator/_replay.c, broker/dispatch/_*.c).

Each has a pure-Python equivalent that gives the same answers; ``PYKBROKER_NATIVE=0`` in the
environment (read at import) makes the broker use those instead, as on an install without a
compiler. CI runs the equivalence tests once that way (.ci/run).
"""

from __future__ import annotations

import os
from typing import TypeVar

T = TypeVar("T")

#: False with ``PYKBROKER_NATIVE=0``
ENABLED = os.environ.get("PYKBROKER_NATIVE", "1") != "0"


def compiled(extension: T | None) -> T | None:
    """``extension`` (a compiled module or one of its functions), or None when it is not built or
    the compiled paths are turned off."""
    return extension if ENABLED else None
