"""The compression libraries of Kafka's codecs (1 gzip, 2 snappy, 3 lz4, 4 zstd), each imported on
its first use rather than at every broker start (together ~4.5 ms of start-up).

``codec_libs.gzip``, ``codec_libs.cramjam``, ``codec_libs.lz4_frame`` (``lz4.frame``) and
``codec_libs.zstandard`` are this module's attributes: the first access of one imports it (the
module ``__getattr__``, PEP 562) and binds it as a global, so that every later access is an ordinary
module attribute. The first batch of a codec to be compressed or decompressed pays its import, once.
They are required dependencies (pyproject.toml); a codec id Kafka does not define is refused before
any library is looked up, with the same error as before.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import gzip

    import cramjam
    import lz4.frame as lz4_frame
    import zstandard

__all__ = ["cramjam", "gzip", "lz4_frame", "zstandard"]

#: attribute -> the module it is
_MODULES = {"gzip": "gzip", "cramjam": "cramjam", "lz4_frame": "lz4.frame", "zstandard": "zstandard"}


def __getattr__(name: str) -> ModuleType:
    module_name = _MODULES.get(name)
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(module_name)
    globals()[name] = module
    return module
