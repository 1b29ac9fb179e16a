"""Our schemas, their generated codecs, and sample objects with a non-default value in every field.

``sample(spec, version, nulls=...)`` builds a generated object for one message version: every field
present at that version gets a value different from its default (strings non-empty and sometimes
non-ASCII or longer than 127 bytes, ints non-zero and varied, negative where signed, uuids random
non-zero, bytes and records non-empty, arrays of two elements, nested structs filled recursively).
Nullable fields are None when ``nulls`` is true and set otherwise. Fields absent at the version keep
their defaults. Values are deterministic per (message, version, nulls, seed).
"""

from __future__ import annotations

import importlib
import random
import uuid
from functools import cache
from types import ModuleType
from typing import Any

from codegen.emit import ModuleEmitter, module_name
from codegen.spec import FieldSpec, MessageSpec, StructSpec, load_dir

from .reference import SCHEMA_DIR

GENERATED = "broker.protocol.generated"

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}


@cache
def all_specs() -> tuple[MessageSpec, ...]:
    return tuple(load_dir(SCHEMA_DIR))


def spec(name: str) -> MessageSpec:
    for m in all_specs():
        if m.name == name:
            return m
    raise KeyError(name)


def module_for(m: MessageSpec) -> ModuleType:
    return importlib.import_module(f"{GENERATED}.{module_name(m.name)}")


@cache
def _class_names(module: str) -> dict[tuple[str, str], str]:
    msgs = [m for m in all_specs() if module_name(m.name) == module]
    return ModuleEmitter(msgs, []).class_names


def class_for(m: MessageSpec, struct: StructSpec) -> type:
    """The generated class for ``struct`` (the root or a nested struct) of message ``m``."""
    return getattr(module_for(m), _class_names(module_name(m.name))[(m.name, struct.name)])


def codec(m: MessageSpec, version: int) -> tuple[Any, Any]:
    """(encode, decode) functions of message ``m`` at ``version``."""
    mod = module_for(m)
    prefix = {"request": "REQUEST_", "response": "RESPONSE_"}.get(m.type, "")
    enc = getattr(mod, prefix + "ENCODERS")[version]
    dec = getattr(mod, prefix + "DECODERS")[version]
    assert enc is not None and dec is not None, f"{m.name} v{version} has no codec"
    return enc, dec


def cases(kinds: tuple[str, ...] = ("request", "response", "header")) -> list[tuple[MessageSpec, int]]:
    """(spec, version) for every version of every message of the given kinds."""
    return [(m, v) for m in all_specs() if m.type in kinds for v in m.versions]


class Sampler:
    def __init__(self, m: MessageSpec, version: int, nulls: bool, seed: int = 0, big: bool = False):
        self.m = m
        self.v = version
        self.nulls = nulls
        self.big = big
        self.depth = 0
        self.rng = random.Random(f"{m.name}/{version}/{nulls}/{seed}/{big}")
        self.classes: dict[str, type] = {}  # struct name -> generated class (class_for is not cheap)

    def message(self) -> Any:
        return self.struct(self.m.root)

    def struct(self, s: StructSpec) -> Any:
        self.depth += 1
        try:
            kwargs = {f.attr: self.value(f) for f in s.fields if f.present(self.v)}
        finally:
            self.depth -= 1
        cls = self.classes.get(s.name)
        if cls is None:
            cls = self.classes[s.name] = class_for(self.m, s)
        return cls(**kwargs)

    def value(self, f: FieldSpec) -> Any:
        if self.nulls and self.v in f.nullable:
            return None
        t = f.type
        if t.kind == "struct":
            return self.struct(f.struct)
        if t.kind == "array":
            if t.element.kind == "struct":
                n = 130 if self.big and self.depth == 1 else 2
                return [self.struct(f.struct) for _ in range(n)]
            return [self.scalar(t.name, None) for _ in range(130 if self.big else 2)]
        return self.scalar(t.name, f.default)

    def scalar(self, type_name: str, default: object) -> Any:
        rng = self.rng
        if type_name == "bool":
            return not default
        if type_name in INT_RANGES:
            lo, width, bits, fixed = _int_pool(type_name, default)
            # the boundary values, then four uniform draws in [lo, hi]; one of them, never 0 or the
            # default (the draws as random.randint and the pick as random.choice make them, inlined:
            # big samples draw hundreds of thousands)
            pool = list(fixed)
            for _ in range(4):
                r = rng.getrandbits(bits)
                while r >= width:
                    r = rng.getrandbits(bits)
                if lo + r != 0 and lo + r != default:
                    pool.append(lo + r)
            n = len(pool)
            r = rng.getrandbits(n.bit_length())
            while r >= n:
                r = rng.getrandbits(n.bit_length())
            return pool[r]
        if type_name == "float64":
            return rng.choice([1.5, -2.25, 1e300, -1e-300, rng.uniform(-1e9, 1e9)])
        if type_name == "uuid":
            return uuid.UUID(int=rng.getrandbits(128) | (1 << 64))
        if type_name in ("bytes", "records"):
            return rng.randbytes(rng.choice([1, 5, 17, 200]))
        if type_name == "string":
            s = f"s{rng.randrange(10**6)}"
            r = rng.random()
            if r < 0.25:
                s += "-é☃"
            elif r < 0.4:
                s += "x" * 130  # compact length needs a two-byte varint
            assert s != default
            return s
        raise AssertionError(f"no sample for type {type_name}")


@cache
def _int_pool(type_name: str, default: object) -> tuple[int, int, int, tuple[int, ...]]:
    """(lo, hi - lo + 1, its bit length, the boundary values in range but not 0 or ``default``)."""
    lo, hi = INT_RANGES[type_name]
    fixed = [lo, hi, -1, 1, 2, 127, 128, -129, 255, 300, 16383, 16384, -70000, 2**31 - 1, -(2**31)]
    width = hi - lo + 1
    return lo, width, width.bit_length(), tuple(x for x in fixed if lo <= x <= hi and x != 0 and x != default)


def sample(m: MessageSpec, version: int, nulls: bool, seed: int = 0, big: bool = False) -> Any:
    """A generated object of message ``m`` with non-default values in every field at ``version``.

    ``big`` makes arrays of primitives 130 long, and top-level arrays of structs too, so that counts
    need two-byte varints and fixed-width arrays pass the precompiled-Struct cut-off.
    """
    return Sampler(m, version, nulls, seed, big).message()
