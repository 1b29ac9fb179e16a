"""The checks every compiled extension's tests share (broker/log/_native.c, broker/coordinator/_replay.c,
broker/dispatch/_offset_commit.c, broker/dispatch/_produce.c): that the install built it, and that
PYKBROKER_NATIVE=0 turns it off."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from types import ModuleType

import pytest


def require_built(extension: ModuleType | None, source: str) -> None:
    """Skip without a C compiler, or in a checkout that was never installed (e.g. another git worktree
    on a shared venv); CI (``.ci/run``: a fresh clone, scripts/setup.sh's ``pip install -e .``) sets
    PYKBROKER_REQUIRE_NATIVE=1, and there a missing build fails."""
    if not shutil.which((sysconfig.get_config_var("CC") or "cc").split()[0]):
        pytest.skip("no C compiler: the install leaves the extension out")
    if extension is None and os.environ.get("PYKBROKER_REQUIRE_NATIVE") != "1":
        pytest.skip(f"{source} is not built in this checkout (`pip install -e .` builds it)")
    assert extension is not None, f"{source} is not built: run `pip install -e .` (scripts/setup.sh)"


def native_enabled() -> bool:
    """Whether this process runs the compiled paths (PYKBROKER_NATIVE is not 0)."""
    return os.environ.get("PYKBROKER_NATIVE", "1") != "0"


def unset_with_native_0(module: str, attr: str) -> bool:
    """Whether ``module.attr`` (the compiled entry point the module binds) is None in a fresh
    interpreter with PYKBROKER_NATIVE=0."""
    code = f"import {module} as m; print(m.{attr} is None)"
    env = {**os.environ, "PYKBROKER_NATIVE": "0"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip() == "True"
