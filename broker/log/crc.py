"""CRC-32C (Castagnoli), the checksum of every record batch: the ``crc32c`` package's compiled function.

The one place the broker takes it from. The package's ``__init__`` also reads its own version string
through ``importlib.metadata`` and imports its command line (argparse): about a tenth of the broker's
start-up (importlib.metadata brings zipfile, email, csv), for nothing the broker uses. So the package's
compiled module (``crc32c/_crc32c*.so``, the function ``crc32c/__init__`` re-exports) is loaded here by
itself, through importlib's machinery, without running the package's ``__init__``. Should the
package's layout ever differ (no such module, or it will not load), the package is imported the
ordinary way instead: the same function, only slower to import. tests/log/test_crc.py checks the
function on the RFC 3720 test vectors, on memoryviews of bytearrays (what the log hands it), and that
start-up does not import importlib.metadata.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
from collections.abc import Callable
from types import ModuleType


def _compiled() -> ModuleType | None:
    """``crc32c._crc32c``, loaded without the package's ``__init__`` (None: not found or not loadable)."""
    package = importlib.util.find_spec("crc32c")  # locates the package; runs none of its code
    if package is None or not package.submodule_search_locations:
        return None
    spec = importlib.machinery.PathFinder.find_spec("_crc32c", list(package.submodule_search_locations))
    if spec is None or not isinstance(spec.loader, importlib.machinery.ExtensionFileLoader):
        return None
    # the extension's init function is PyInit__crc32c: its name must end in _crc32c
    spec = importlib.util.spec_from_file_location("crc32c._crc32c", spec.origin)
    if spec is None or spec.loader is None:
        return None
    try:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except ImportError:
        return None
    return module


_compiled_module = _compiled()
if _compiled_module is not None and callable(getattr(_compiled_module, "crc32c", None)):
    #: ``crc32c(data) -> int``: CRC-32C of a bytes-like object (bytes, bytearray, memoryview)
    crc32c: Callable[[bytes | bytearray | memoryview], int] = _compiled_module.crc32c
else:  # the package's layout changed: the ordinary import, same function
    from crc32c import crc32c

__all__ = ["crc32c"]
