"""The API registry loads each handler module on its API's first request: what ApiVersions
advertises is known without importing any of them (broker.dispatch.VERSIONS), and agrees with what
the modules declare once loaded."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from broker.dispatch import HANDLERS, VERSIONS, build_registry
from broker.dispatch.registry import Api, Registry, UnloadedApi
from broker.protocol.generated import APIS

MODULES = [f"broker.dispatch.{name}" for name in HANDLERS]


def test_building_the_registry_imports_no_handler_module():
    code = (
        "import sys\n"
        "from broker.dispatch import HANDLERS, build_registry\n"
        "r = build_registry()\n"
        "assert r.ranges() and len(r.apis) == len(HANDLERS)\n"
        "print([n for n in HANDLERS if f'broker.dispatch.{n}' in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]", out.stderr


def test_the_versions_table_is_what_the_modules_declare():
    """Every handler module's API_KEY is its schema's and its VERSIONS (if any) is in the table; so
    the ranges advertised before loading are those the loaded modules serve."""
    by_module = {info.module: info for info in APIS.values()}
    for name, module in zip(HANDLERS, MODULES, strict=True):
        mod = importlib.import_module(module)
        info = by_module[name]
        assert mod.API_KEY == info.key, name
        assert getattr(mod, "VERSIONS", None) == VERSIONS.get(name), name
    assert set(VERSIONS) <= set(HANDLERS)


def test_an_api_loads_on_first_use_and_then_is_plain_attributes():
    registry = build_registry()
    assert {type(api) for api in registry.apis.values()} == {UnloadedApi}
    assert registry.apis[0].plans  # a first use loads it, and it becomes a plain Api (no hook)
    assert type(registry.apis[0]) is Api and not hasattr(Api, "__getattr__")
    registry.load_all()
    assert {type(api) for api in registry.apis.values()} == {Api}
    for key, api in registry.apis.items():
        mod = importlib.import_module(api.module_name)
        assert api.module is mod and api.handler is mod.handle
        assert sorted(api.plans) == list(range(api.min_version, api.max_version + 1))
        assert "handler" in vars(api) and "plans" in vars(api), key  # no __getattr__ on the hot path
    with pytest.raises(AttributeError):
        registry.apis[0].no_such_attribute  # noqa: B018


def test_a_module_whose_versions_disagree_with_the_table_fails_to_load():
    registry = Registry([("broker.dispatch.init_producer_id", (0, 4))])
    api = registry.get(22)
    assert (api.min_version, api.max_version) == (0, 4)  # what the table said
    with pytest.raises(ValueError, match="VERSIONS"):
        api.load()
    with pytest.raises(ValueError, match="outside the schema"):
        Registry([("broker.dispatch.init_producer_id", (0, 99))])
