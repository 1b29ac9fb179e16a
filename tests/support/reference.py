"""Released Kafka schemas and wire-layout extraction.

``scripts/reference.sh`` fetches the released KRPC JSON files into ``.reference/kafka-4`` and
``.reference/kafka-3.9``. Those files carry ``//`` comments, so they are read with
:func:`load_commented_json`.

A *wire layout* is what one message looks like on the wire at one version: whether it is flexible,
the ordered non-tagged fields (name, type, nullable, compact or not) and the tagged fields by tag,
recursively into nested structs. :func:`reference_layout` builds it from a raw reference JSON
document and :func:`spec_layout` from our own loaded :class:`codegen.spec.MessageSpec`; the two are
written independently so that a misreading in the spec loader shows up too.
:func:`compare_layouts` lists every difference, naming message, version and field path.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from codegen.spec import MessageSpec, StructSpec

REPO_ROOT = Path(__file__).resolve().parents[2]
SCHEMA_DIR = REPO_ROOT / "schemas"
REFERENCE_DIR = REPO_ROOT / ".reference"
#: Reference sets, newest first.
REFERENCE_NAMES = ("kafka-4", "kafka-3.9")


class ReferenceUnavailable(RuntimeError):
    """scripts/reference.sh did not produce the reference schemas."""


def ensure_reference(root: Path = REFERENCE_DIR) -> Path:
    """Return ``root``, running scripts/reference.sh first if a reference set is missing."""
    missing = [n for n in REFERENCE_NAMES if not (root / n / ".done").is_file()]
    if missing:
        env = dict(os.environ, PYTHON=sys.executable)
        try:
            proc = subprocess.run(
                ["bash", str(REPO_ROOT / "scripts" / "reference.sh"), str(root)],
                env=env,
                capture_output=True,
                text=True,
                timeout=900,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise ReferenceUnavailable(f"scripts/reference.sh could not run: {e}") from e
        still = [n for n in REFERENCE_NAMES if not (root / n / ".done").is_file()]
        if proc.returncode != 0 or still:
            raise ReferenceUnavailable(
                f"scripts/reference.sh exited {proc.returncode}; missing {still or missing}\n"
                f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
            )
    return root


# ---------------------------------------------------------------------------------------- loading


def strip_comments(text: str) -> str:
    """Remove ``//`` and ``/* */`` comments outside JSON strings."""
    out: list[str] = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            if c == "\\":
                out.append(text[i : i + 2])
                i += 2
                continue
            if c == '"':
                in_string = False
            out.append(c)
            i += 1
        elif c == '"':
            in_string = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise ValueError("unterminated /* comment")
            i = end + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def load_commented_json(path: Path | str) -> dict:
    return json.loads(strip_comments(Path(path).read_text()))


def load_reference_set(reference_dir: Path, name: str) -> dict[str, dict]:
    """Message name -> raw JSON for one reference set (e.g. ``kafka-4``)."""
    out = {}
    for p in sorted((reference_dir / name).glob("*.json")):
        doc = load_commented_json(p)
        out[doc["name"]] = doc
    return out


# ---------------------------------------------------------------------------------------- versions


def parse_versions(text: object) -> tuple[int, int] | None:
    """'N', 'N+', 'N-M', 'none' or missing -> inclusive (lo, hi), or None for no versions."""
    if text is None:
        return None
    s = str(text).strip()
    if s in ("", "none"):
        return None
    m = re.fullmatch(r"(\d+)(\+|-(\d+))?", s)
    if not m:
        raise ValueError(f"bad version range {text!r}")
    lo = int(m.group(1))
    if m.group(2) == "+":
        return lo, 0x7FFF
    return lo, int(m.group(3)) if m.group(3) is not None else lo


def in_versions(v: int, text: object) -> bool:
    r = parse_versions(text)
    return r is not None and r[0] <= v <= r[1]


# ---------------------------------------------------------------------------------------- layouts


@dataclass(frozen=True)
class FieldLayout:
    name: str
    type: str  # as written in the schema: "int32", "[]string", "[]TopicData", "Assignment"
    nullable: bool
    flexible: bool  # compact length prefixes for this field
    struct: StructLayout | None = None


@dataclass(frozen=True)
class TaggedLayout:
    name: str
    type: str
    nullable: bool
    struct: StructLayout | None = None


@dataclass(frozen=True)
class StructLayout:
    fields: tuple[FieldLayout, ...]
    tagged: tuple[tuple[int, TaggedLayout], ...]  # sorted by tag


@dataclass(frozen=True)
class MessageLayout:
    name: str
    version: int
    flexible: bool
    root: StructLayout


def reference_layout(doc: dict, version: int, *, any_version: bool = False) -> MessageLayout | None:
    """Layout of a raw reference message at ``version`` (None if it has no such version).

    ``any_version`` reads the fields at ``version`` even outside validVersions (what a codec that
    ignores the lower bound, like kafka-python, does).
    """
    if not any_version and not in_versions(version, doc["validVersions"]):
        return None
    flexible = in_versions(version, doc.get("flexibleVersions"))
    commons = {c["name"]: c for c in doc.get("commonStructs", [])}
    root = _ref_struct(doc["fields"], version, flexible, commons, doc["name"])
    return MessageLayout(doc["name"], version, flexible, root)


def _ref_struct(fields: list, v: int, flexible: bool, commons: dict, where: str) -> StructLayout:
    plain: list[FieldLayout] = []
    tagged: list[tuple[int, TaggedLayout]] = []
    for f in fields:
        if not in_versions(v, f["versions"]):
            continue
        t = f["type"]
        base = t[2:] if t.startswith("[]") else t
        nested = None
        if "fields" in f:
            nested = _ref_struct(f["fields"], v, flexible, commons, f"{where}.{f['name']}")
        elif base in commons:
            nested = _ref_struct(commons[base]["fields"], v, flexible, commons, base)
        elif base[:1].isupper():
            raise ValueError(f"{where}.{f['name']}: struct type {base} has no fields")
        nullable = in_versions(v, f.get("nullableVersions"))
        if flexible and in_versions(v, f.get("taggedVersions")):
            tagged.append((int(f["tag"]), TaggedLayout(f["name"], t, nullable, nested)))
        else:
            fflex = in_versions(v, f["flexibleVersions"]) if "flexibleVersions" in f else flexible
            plain.append(FieldLayout(f["name"], t, nullable, fflex, nested))
    return StructLayout(tuple(plain), tuple(sorted(tagged, key=lambda x: x[0])))


def spec_layout(m: MessageSpec, version: int) -> MessageLayout:
    """Layout of one of our messages at ``version``, read from the loaded spec model."""
    flexible = m.is_flexible(version)
    return MessageLayout(m.name, version, flexible, _spec_struct(m.root, version, flexible))


def _spec_struct(s: StructSpec, v: int, flexible: bool) -> StructLayout:
    plain: list[FieldLayout] = []
    tagged: list[tuple[int, TaggedLayout]] = []
    for f in s.fields:
        if not f.present(v):
            continue
        t = ("[]" if f.type.kind == "array" else "") + f.type.name
        nested = _spec_struct(f.struct, v, flexible) if f.struct is not None else None
        nullable = v in f.nullable
        if f.is_tagged(v, flexible):
            tagged.append((f.tag, TaggedLayout(f.name, t, nullable, nested)))
        else:
            plain.append(FieldLayout(f.name, t, nullable, f.is_flexible(v, flexible), nested))
    return StructLayout(tuple(plain), tuple(sorted(tagged, key=lambda x: x[0])))


def compare_layouts(ours: MessageLayout, ref: MessageLayout, label: str = "reference") -> list[str]:
    """Every difference between two layouts of one message version, one line each."""
    where = f"{ours.name} v{ours.version}"
    diffs: list[str] = []
    if ours.name != ref.name or ours.version != ref.version:
        diffs.append(f"{where}: compared with {ref.name} v{ref.version}")
    if ours.flexible != ref.flexible:
        diffs.append(f"{where}: message flexible: ours {ours.flexible}, {label} {ref.flexible}")
    _cmp_struct(ours.root, ref.root, where, "", label, diffs)
    return diffs


def _cmp_struct(a: StructLayout, b: StructLayout, where: str, path: str, label: str, out: list[str]) -> None:
    an = [f.name for f in a.fields]
    bn = [f.name for f in b.fields]
    if an != bn:
        i = next(i for i in range(max(len(an), len(bn))) if i >= len(an) or i >= len(bn) or an[i] != bn[i])
        at = an[i] if i < len(an) else bn[i]
        out.append(
            f"{where}: field {path}{at}: non-tagged fields differ at position {i}: ours {an}, {label} {bn}"
        )
    for fa, fb in zip(a.fields, b.fields, strict=False):
        if fa.name != fb.name:
            continue
        p = path + fa.name
        for attr in ("type", "nullable", "flexible"):
            x, y = getattr(fa, attr), getattr(fb, attr)
            if x != y:
                out.append(f"{where}: field {p}: {attr}: ours {x!r}, {label} {y!r}")
        _cmp_nested(fa, fb, where, p, label, out)
    ta, tb = dict(a.tagged), dict(b.tagged)
    for tag in sorted(set(ta) | set(tb)):
        x, y = ta.get(tag), tb.get(tag)
        if x is None or y is None:
            out.append(
                f"{where}: tagged field {path}{(x or y).name} (tag {tag}): "
                f"ours {x and x.name}, {label} {y and y.name}"
            )
            continue
        p = f"{path}{x.name}"
        for attr in ("name", "type", "nullable"):
            xv, yv = getattr(x, attr), getattr(y, attr)
            if xv != yv:
                out.append(f"{where}: tagged field {p} (tag {tag}): {attr}: ours {xv!r}, {label} {yv!r}")
        _cmp_nested(x, y, where, p, label, out)


def _cmp_nested(x, y, where: str, p: str, label: str, out: list[str]) -> None:
    if (x.struct is None) != (y.struct is None):
        out.append(f"{where}: field {p}: struct: ours {x.struct is not None}, {label} {y.struct is not None}")
    elif x.struct is not None:
        sep = "[]." if x.type.startswith("[]") else "."
        _cmp_struct(x.struct, y.struct, where, p + sep, label, out)


# ---------------------------------------------------------------------------------------- editing


def edit_struct(layout: StructLayout, path: tuple[str, ...], fn) -> StructLayout:
    """Return ``layout`` with the struct reached through field names ``path`` replaced by ``fn(it)``."""
    if not path:
        return fn(layout)
    head, rest = path[0], path[1:]
    fields = list(layout.fields)
    for i, f in enumerate(fields):
        if f.name == head:
            if f.struct is None:
                raise KeyError(f"{head} is not a struct field")
            fields[i] = FieldLayout(f.name, f.type, f.nullable, f.flexible, edit_struct(f.struct, rest, fn))
            return StructLayout(tuple(fields), layout.tagged)
    raise KeyError(f"no field {head}")


def insert_field(after: str | None, new: FieldLayout):
    """An ``edit_struct`` function inserting ``new`` after field ``after`` (None: append)."""

    def fn(s: StructLayout) -> StructLayout:
        names = [f.name for f in s.fields]
        i = len(names) if after is None else names.index(after) + 1
        return StructLayout(s.fields[:i] + (new,) + s.fields[i:], s.tagged)

    return fn
