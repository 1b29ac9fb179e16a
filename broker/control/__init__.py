"""The test control plane: fault rules and live state, for client tests in any language.

:class:`Control` (operations.py) holds the in-process operations (one per broker, ``broker.control``,
created on first use); the HTTP/JSON API (http.py, ``--control-port``), the Python client (client.py,
:class:`ControlClient`) and the CLI (cli.py, ``pykbroker ctl``) expose the same operations. Every
method runs on the broker's event loop (``running_broker(...).control`` forwards calls there from
the test's thread).

A broker that nobody controls never loads this package's parts: importing ``broker.control`` costs
nothing, and its names (``Control``, ``ControlClient``, ``BadRule``, ``NotFound``, ``Refused``) and
submodules load when first used (PEP 562 module ``__getattr__``, the one lazy import of the
package). The operations bring in the fault injector with the codecs it matches on, the invariant
checker, the rebalance report, the trace journal and an HTTP client: a sixth of what the broker
imports, for a feature most runs never use. tests/test_startup.py checks that ``serve`` does not
load them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .client import ControlClient
    from .faults import BadRule
    from .operations import Control, NotFound, Refused

#: the package's names, and the submodule each is defined in
_NAMES = {
    "Control": "operations",
    "NotFound": "operations",
    "Refused": "operations",
    "BadRule": "faults",
    "ControlClient": "client",
}
_SUBMODULES = frozenset(
    {
        "cli",
        "client",
        "clock",
        "faults",
        "http",
        "http_features",
        "invariants",
        "operations",
        "report",
        "state",
        "trace",
    }
)

__all__ = ["BadRule", "Control", "ControlClient", "NotFound", "Refused"]


def __getattr__(name: str) -> Any:
    """Load a name of the package (or a submodule) on first use."""
    if name in _NAMES:
        value = getattr(importlib.import_module(f"{__name__}.{_NAMES[name]}"), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_NAMES, *_SUBMODULES})
