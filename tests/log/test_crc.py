"""broker.log.crc: the CRC-32C every record batch carries, loaded without the crc32c package's
``__init__`` (see its docstring)."""

from __future__ import annotations

import subprocess
import sys

import crc32c as package
import pytest

from broker.log.crc import crc32c

# RFC 3720 (iSCSI) B.4 test vectors, and the check value of the CRC catalogue
VECTORS = [
    (b"123456789", 0xE3069283),
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
    (b"", 0),
]


@pytest.mark.parametrize(("data", "expected"), VECTORS)
def test_the_rfc_3720_vectors(data, expected):
    assert crc32c(data) == expected
    assert crc32c(bytearray(data)) == expected
    # what the log hands it: a memoryview into a bytearray, at an offset
    buf = bytearray(b"\x00" * 21 + data + b"tail")
    assert crc32c(memoryview(buf)[21 : 21 + len(data)]) == expected


def test_it_is_the_packages_compiled_function():
    """The same C function the package exports (hardware CRC where the CPU has it), not a copy."""
    assert type(crc32c).__name__ == "builtin_function_or_method"
    assert crc32c.__module__ == package.crc32c.__module__ == "crc32c._crc32c"
    data = bytes(range(256)) * 257
    assert crc32c(data) == package.crc32c(data)


def test_loading_it_runs_none_of_the_packages_init():
    """Neither the package's ``__init__`` (which reads its version with importlib.metadata) nor
    importlib.metadata is imported by the broker's CRC."""
    code = (
        "import sys\n"
        "from broker.log.crc import crc32c\n"
        "assert crc32c(b'123456789') == 0xE3069283\n"
        "print(sorted(m for m in ('crc32c', 'importlib.metadata', 'argparse') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]", out.stderr
