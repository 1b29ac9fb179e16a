"""broker/log/codec_libs.py: each compression library is imported by the first batch of its codec."""

from __future__ import annotations

import subprocess
import sys

import pytest

from broker.log import codec_libs
from broker.log.records import InvalidRecords, compress, decompress

_CHECK = """
import sys
from broker.log import records, streaming, validator
from broker.log.batch import COMPRESSION_NAMES
LIBS = ["gzip", "cramjam", "lz4.frame", "zstandard"]
loaded = lambda: [m for m in LIBS if m in sys.modules]
print(loaded())
data = b"pykbroker" * 100
for codec in map(int, sys.argv[1:]):
    assert records.decompress(codec, validator.compress(codec, data)) == data
    assert b"".join(streaming.decompressed_chunks(codec, records.compress(codec, data), 10**6)) == data
    print(COMPRESSION_NAMES[codec], loaded())
"""


def _run(*codecs: int) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", _CHECK, *map(str, codecs)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_no_library_is_imported_with_the_log_modules_and_each_codec_imports_its_own():
    assert _run(1, 2, 3, 4) == [
        "[]",
        "gzip ['gzip']",
        "snappy ['gzip', 'cramjam']",
        "lz4 ['gzip', 'cramjam', 'lz4.frame']",
        "zstd ['gzip', 'cramjam', 'lz4.frame', 'zstandard']",
    ]


def test_a_malformed_stream_of_a_codec_whose_library_is_not_loaded_yet_is_invalid_records():
    # the error path names cramjam's error class, which that imports: still the same error
    with pytest.raises(InvalidRecords, match="cannot decompress the gzip records"):
        decompress(1, b"\x1f\x8b not gzip")


def test_the_libraries_are_bound_once_and_an_unknown_name_or_codec_is_refused_as_before():
    assert codec_libs.cramjam is sys.modules["cramjam"] and codec_libs.lz4_frame is sys.modules["lz4.frame"]
    zstd = codec_libs.zstandard
    assert vars(codec_libs)["zstandard"] is zstd is sys.modules["zstandard"]  # bound by the first access
    with pytest.raises(AttributeError):
        _ = codec_libs.snappy
    with pytest.raises(ValueError, match="unknown compression codec 7"):
        compress(7, b"x")
    with pytest.raises(InvalidRecords, match="unknown compression codec 7"):
        decompress(7, b"x")
