"""The schema model: KRPC JSON files from ``schemas/`` loaded into validated, typed specs.

Everything the emitter needs to know about a message is settled here, so that the emitter only asks
"which fields exist at version N, and how is each one laid out on the wire at N". Loading validates
the file and raises :class:`SchemaError` with a message that names the file, the field and the fix.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

MAX_VERSION = 0x7FFF

#: Fixed-width primitives: struct format character and size in bytes.
FIXED_TYPES: dict[str, tuple[str, int]] = {
    "bool": ("?", 1),
    "int8": ("b", 1),
    "int16": ("h", 2),
    "uint16": ("H", 2),
    "int32": ("i", 4),
    "uint32": ("I", 4),
    "int64": ("q", 8),
    "float64": ("d", 8),
    "uuid": ("16s", 16),
}
#: Length-prefixed primitives.
VAR_TYPES = {"string", "bytes", "records"}
PRIMITIVES = set(FIXED_TYPES) | VAR_TYPES

MESSAGE_KEYS = {
    "apiKey",
    "type",
    "name",
    "validVersions",
    "flexibleVersions",
    "notes",
    "fields",
    "commonStructs",
}
FIELD_KEYS = {
    "name",
    "type",
    "versions",
    "nullableVersions",
    "taggedVersions",
    "tag",
    "default",
    "flexibleVersions",
    "about",
    "fields",
}
COMMON_KEYS = {"name", "versions", "fields"}
MESSAGE_TYPES = {"request", "response", "header", "data"}
_NAME_RE = re.compile(r"^[A-Z][A-Za-z0-9]*$")
# Kafka itself has a few lowerCamelCase field names (CreateTopicsRequest.timeoutMs), so fields allow both.
_FIELD_RE = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")


class SchemaError(ValueError):
    """A schema file is malformed; the message says where and how to fix it."""


@dataclass(frozen=True)
class Versions:
    """An inclusive version range; ``Versions.NONE`` is empty."""

    lo: int
    hi: int

    @classmethod
    def parse(cls, text: object, where: str) -> Versions:
        s = str(text).strip()
        if s == "none":
            return NONE
        m = re.fullmatch(r"(\d+)(\+|-(\d+))?", s)
        if not m:
            raise SchemaError(
                f"{where}: version range {text!r} is not understood; write 'N', 'N+', 'N-M' or 'none'"
            )
        lo = int(m.group(1))
        if m.group(2) == "+":
            hi = MAX_VERSION
        elif m.group(3) is not None:
            hi = int(m.group(3))
        else:
            hi = lo
        if hi < lo:
            raise SchemaError(f"{where}: version range {text!r} ends before it starts; swap the bounds")
        return cls(lo, hi)

    def __contains__(self, v: int) -> bool:
        return self.lo <= v <= self.hi

    @property
    def empty(self) -> bool:
        return self.hi < self.lo

    def intersect(self, other: Versions) -> Versions:
        lo, hi = max(self.lo, other.lo), min(self.hi, other.hi)
        return Versions(lo, hi) if lo <= hi else NONE

    def contains_range(self, other: Versions) -> bool:
        return other.empty or (self.lo <= other.lo and other.hi <= self.hi)

    def __str__(self) -> str:
        if self.empty:
            return "none"
        if self.hi == MAX_VERSION:
            return f"{self.lo}+"
        return str(self.lo) if self.lo == self.hi else f"{self.lo}-{self.hi}"


NONE = Versions(1, 0)


def snake(name: str) -> str:
    """``GroupInstanceId`` -> ``group_instance_id``; ``TopicID`` -> ``topic_id``."""
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    return s.lower()


@dataclass
class FieldType:
    """``kind`` is 'fixed', 'var' (string/bytes/records), 'array' or 'struct'."""

    kind: str
    name: str  # primitive name, or struct name for struct / array-of-struct
    element: FieldType | None = None  # for arrays

    @property
    def is_struct_like(self) -> bool:
        return self.kind == "struct" or (self.kind == "array" and self.element.kind == "struct")


@dataclass
class FieldSpec:
    name: str
    type: FieldType
    versions: Versions
    nullable: Versions
    tagged: Versions
    tag: int | None
    default: object
    flexible_override: Versions | None
    about: str
    struct: StructSpec | None  # element struct for struct-typed fields
    attr: str = ""

    def present(self, v: int) -> bool:
        return v in self.versions

    def is_tagged(self, v: int, flexible: bool) -> bool:
        return flexible and v in self.tagged

    def is_flexible(self, v: int, message_flexible: bool) -> bool:
        if self.flexible_override is not None:
            return v in self.flexible_override
        return message_flexible


@dataclass
class StructSpec:
    name: str
    versions: Versions
    fields: list[FieldSpec]
    class_name: str = ""


@dataclass
class MessageSpec:
    name: str
    type: str
    api_key: int | None
    valid: Versions
    flexible: Versions
    notes: list[str]
    root: StructSpec
    structs: dict[str, StructSpec] = field(default_factory=dict)  # every nested struct by name
    path: str = ""

    def is_flexible(self, v: int) -> bool:
        return v in self.flexible

    @property
    def versions(self) -> range:
        return range(self.valid.lo, self.valid.hi + 1)


class _Loader:
    def __init__(self, data: dict, path: str):
        self.data = data
        self.path = path
        self.structs: dict[str, StructSpec] = {}
        self.common_raw: dict[str, dict] = {}

    def fail(self, where: str, msg: str) -> SchemaError:
        return SchemaError(f"{self.path}: {where}: {msg}")

    def load(self) -> MessageSpec:
        d = self.data
        if not isinstance(d, dict):
            raise self.fail("top level", "expected a JSON object with name, type and fields")
        extra = set(d) - MESSAGE_KEYS
        if extra:
            raise self.fail(
                "top level",
                f"unknown key(s) {sorted(extra)}; allowed: {sorted(MESSAGE_KEYS)}",
            )
        for k in ("name", "type", "validVersions", "fields"):
            if k not in d:
                raise self.fail("top level", f"missing {k!r}")
        name = d["name"]
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise self.fail("name", f"{name!r} must be an UpperCamelCase identifier")
        mtype = d["type"]
        if mtype not in MESSAGE_TYPES:
            raise self.fail("type", f"{mtype!r} must be one of {sorted(MESSAGE_TYPES)}")
        api_key = d.get("apiKey")
        if mtype in ("request", "response"):
            if not isinstance(api_key, int) or api_key < 0:
                raise self.fail("apiKey", "requests and responses need a non-negative integer apiKey")
            suffix = "Request" if mtype == "request" else "Response"
            if not name.endswith(suffix):
                raise self.fail("name", f"a {mtype} message's name must end in {suffix!r}")
        expected_file = name + ".json"
        if Path(self.path).name != expected_file:
            raise self.fail("name", f"file should be named {expected_file} after the message it holds")
        valid = Versions.parse(d["validVersions"], f"{self.path}: validVersions")
        if valid.empty or valid.hi == MAX_VERSION:
            raise self.fail("validVersions", "give a closed range such as '0-9'")
        flexible = Versions.parse(d.get("flexibleVersions", "none"), f"{self.path}: flexibleVersions")
        notes = d.get("notes", [])
        if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
            raise self.fail("notes", "must be a list of strings")
        for c in d.get("commonStructs", []):
            extra = set(c) - COMMON_KEYS
            if extra:
                raise self.fail(f"commonStructs {c.get('name')}", f"unknown key(s) {sorted(extra)}")
            if c.get("name") in self.common_raw:
                raise self.fail(f"commonStructs {c['name']}", "defined twice; keep one")
            self.common_raw[c["name"]] = c
        root = self.struct(name, valid, d["fields"], name, flexible)
        for cname in self.common_raw:
            if cname not in self.structs:
                raise self.fail(f"commonStructs {cname}", "is never used; remove it")
        return MessageSpec(
            name=name,
            type=mtype,
            api_key=api_key,
            valid=valid,
            flexible=flexible,
            notes=notes,
            root=root,
            structs=self.structs,
            path=self.path,
        )

    def struct(
        self, name: str, versions: Versions, raw_fields: object, where: str, flexible: Versions
    ) -> StructSpec:
        if not isinstance(raw_fields, list):
            raise self.fail(where, "'fields' must be a list")
        fields: list[FieldSpec] = []
        seen: set[str] = set()
        tags: dict[int, str] = {}
        for raw in raw_fields:
            f = self.field(raw, versions, where, flexible)
            if f.name in seen:
                raise self.fail(f"{where}.{f.name}", "field name used twice in one struct; rename one")
            seen.add(f.name)
            if f.tag is not None:
                if f.tag in tags:
                    raise self.fail(
                        f"{where}.{f.name}", f"tag {f.tag} is already used by {tags[f.tag]}; pick another"
                    )
                tags[f.tag] = f.name
            fields.append(f)
        return StructSpec(name=name, versions=versions, fields=fields)

    def field(self, raw: object, parent: Versions, where: str, flexible: Versions) -> FieldSpec:
        if not isinstance(raw, dict) or "name" not in raw:
            raise self.fail(where, f"every field needs a 'name': {raw!r}")
        fname = raw["name"]
        at = f"{where}.{fname}"
        if not isinstance(fname, str) or not _FIELD_RE.match(fname):
            raise self.fail(at, "field names are CamelCase identifiers")
        extra = set(raw) - FIELD_KEYS
        if extra:
            raise self.fail(at, f"unknown key(s) {sorted(extra)}; allowed: {sorted(FIELD_KEYS)}")
        for k in ("type", "versions"):
            if k not in raw:
                raise self.fail(at, f"missing {k!r}")
        versions = Versions.parse(raw["versions"], f"{self.path}: {at}: versions")
        if not parent.contains_range(versions.intersect(parent)) or versions.intersect(parent).empty:
            raise self.fail(
                at, f"versions {versions} never overlap the enclosing versions {parent}; fix the range"
            )
        versions = versions.intersect(parent)
        nullable = Versions.parse(raw.get("nullableVersions", "none"), f"{self.path}: {at}")
        tagged = Versions.parse(raw.get("taggedVersions", "none"), f"{self.path}: {at}")
        flex_override = None
        if "flexibleVersions" in raw:
            flex_override = Versions.parse(raw["flexibleVersions"], f"{self.path}: {at}")
        ftype, struct = self.type(raw, at, versions, flexible)
        if not nullable.empty:
            if ftype.kind == "fixed":
                raise self.fail(at, f"type {ftype.name} cannot be nullable; drop nullableVersions")
            if nullable.intersect(versions).empty:
                raise self.fail(
                    at, f"nullableVersions {nullable} never overlap versions {versions}; fix the range"
                )
        tag = raw.get("tag")
        if not tagged.empty:
            if tag is None or not isinstance(tag, int) or tag < 0:
                raise self.fail(at, "taggedVersions needs a non-negative integer 'tag'")
            if tagged.lo < flexible.lo or flexible.empty:
                raise self.fail(
                    at,
                    f"taggedVersions {tagged} reach outside flexibleVersions {flexible}; "
                    "tagged fields exist only in flexible versions",
                )
            if tagged.lo < versions.lo:
                raise self.fail(at, f"taggedVersions {tagged} must lie within versions {versions}")
            tagged = tagged.intersect(versions)
        elif tag is not None:
            raise self.fail(at, "'tag' given without taggedVersions; add taggedVersions or drop the tag")
        default = self.default(raw.get("default"), ftype, nullable, at)
        about = raw.get("about", "")
        if not isinstance(about, str):
            raise self.fail(at, "'about' must be a string")
        return FieldSpec(
            name=fname,
            type=ftype,
            versions=versions,
            nullable=nullable,
            tagged=tagged,
            tag=tag,
            default=default,
            flexible_override=flex_override,
            about=about,
            struct=struct,
            attr=snake(fname),
        )

    def type(
        self, raw: dict, at: str, versions: Versions, flexible: Versions
    ) -> tuple[FieldType, StructSpec | None]:
        t = raw["type"]
        if not isinstance(t, str):
            raise self.fail(at, "'type' must be a string")
        is_array = t.startswith("[]")
        base = t[2:] if is_array else t
        if base in PRIMITIVES:
            if "fields" in raw:
                raise self.fail(at, f"a {t} field cannot have nested 'fields'")
            if is_array and base in ("records", "bytes"):
                raise self.fail(at, f"arrays of {base} are not a Kafka type")
            inner = FieldType("fixed" if base in FIXED_TYPES else "var", base)
            return (FieldType("array", base, inner) if is_array else inner), None
        if not _NAME_RE.match(base):
            raise self.fail(
                at,
                f"unknown type {t!r}; use a primitive ({', '.join(sorted(PRIMITIVES))}), "
                "[]<type>, or an UpperCamelCase struct name with 'fields'",
            )
        if base in self.common_raw and "fields" not in raw and base in self.structs:
            struct = self.structs[base]  # a commonStruct used again
        elif base in self.structs:
            raise self.fail(at, f"struct {base} is defined twice in this message; rename one")
        elif "fields" in raw:
            if base in self.common_raw:
                raise self.fail(at, f"{base} is a commonStruct; drop the inline 'fields'")
            struct = self.struct(base, versions, raw["fields"], f"{at}({base})", flexible)
        elif base in self.common_raw:
            c = self.common_raw[base]
            cv = Versions.parse(c.get("versions", "0+"), f"{self.path}: commonStructs {base}")
            struct = self.struct(base, cv, c["fields"], base, flexible)
        else:
            raise self.fail(at, f"struct type {base} has no 'fields' and no commonStructs entry")
        self.structs[base] = struct
        inner = FieldType("struct", base)
        return (FieldType("array", base, inner) if is_array else inner), struct

    def default(self, raw: object, ftype: FieldType, nullable: Versions, at: str) -> object:
        if raw is None:
            if ftype.kind == "array":
                return []
            if ftype.kind == "struct":
                return None
            return {
                "bool": False,
                "string": "",
                "bytes": b"",
                "records": None,
                "uuid": None,
                "float64": 0.0,
            }.get(ftype.name, 0)
        if raw == "null":
            if nullable.empty:
                raise self.fail(at, "default 'null' needs nullableVersions")
            return None
        if ftype.kind == "array" or ftype.kind == "struct":
            raise self.fail(at, "arrays and structs only take the default 'null'")
        name = ftype.name
        if name == "bool":
            if str(raw).lower() not in ("true", "false"):
                raise self.fail(at, f"bool default {raw!r} must be true or false")
            return str(raw).lower() == "true"
        if name == "string":
            return str(raw)
        if name == "float64":
            return float(raw)
        if name in FIXED_TYPES and name != "uuid":
            try:
                s = str(raw)
                return int(s, 16) if s.lower().startswith("0x") else int(s)
            except ValueError:
                raise self.fail(at, f"default {raw!r} is not an integer") from None
        raise self.fail(at, f"a {name} field cannot have a default other than null")


def load_message(path: Path | str) -> MessageSpec:
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except json.JSONDecodeError as e:
        raise SchemaError(f"{p}: not valid JSON ({e}); schemas are strict JSON without comments") from e
    return _Loader(data, str(p)).load()


def load_dir(directory: Path | str) -> list[MessageSpec]:
    """All ``*.json`` messages in a directory (not recursive), sorted by file name."""
    return [load_message(p) for p in sorted(Path(directory).glob("*.json"))]
