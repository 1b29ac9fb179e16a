"""Drive the emitter over a schema directory and write (or check) the generated package."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from .emit import BANNER, ModuleEmitter, module_name
from .spec import MessageSpec, load_dir

ROOT = Path(__file__).resolve().parent.parent

#: (schema directory, output package) pairs, relative to the repository root.
TARGETS = [
    ("schemas", "broker/protocol/generated"),
    ("schemas/records", "broker/coordinator/generated"),
    ("schemas/txn-records", "broker/txn/generated"),
]


def render_package(schema_dir: Path, rel_schema_dir: str) -> dict[str, str]:
    """File name -> source text for every module of one generated package."""
    messages = load_dir(schema_dir)
    groups: dict[str, list[MessageSpec]] = defaultdict(list)
    for m in messages:
        groups[module_name(m.name)].append(m)
    files: dict[str, str] = {}
    index_rows = []
    for mod, msgs in sorted(groups.items()):
        msgs.sort(key=lambda m: {"request": 0, "response": 1}.get(m.type, 2))
        sources = [f"{rel_schema_dir}/{Path(m.path).name}" for m in msgs]
        m0 = msgs[0]
        if m0.type in ("request", "response"):
            title = m0.name[: -len("Request")] if m0.name.endswith("Request") else m0.name
            doc = f"{title} (API key {m0.api_key}) v{m0.valid}: request and response codecs."
            types = {m.type for m in msgs}
            if types != {"request", "response"}:
                raise ValueError(f"{mod}: an API needs both a request and a response schema")
            rq, rs = msgs
            if (rq.api_key, rq.valid, rq.flexible) != (rs.api_key, rs.valid, rs.flexible):
                raise ValueError(
                    f"{rq.path} and {rs.path}: apiKey, validVersions and flexibleVersions must match"
                )
            fv = m0.flexible.intersect(m0.valid)
            index_rows.append((m0.api_key, title, mod, m0.valid.lo, m0.valid.hi, None if fv.empty else fv.lo))
        else:
            doc = f"{m0.name} v{m0.valid} codecs."
        files[f"{mod}.py"] = ModuleEmitter(msgs, sources).render(doc)
    if any(m.type == "data" for m in messages):
        files["__init__.py"] = render_record_index(messages, rel_schema_dir)
    else:
        files["__init__.py"] = render_index(index_rows, rel_schema_dir)
    return files


def render_record_index(messages: list[MessageSpec], rel_schema_dir: str) -> str:
    """The one record-type table: type id -> key and value modules (``XKey`` pairs with ``XValue``)."""
    by_name = {m.name: m for m in messages}
    rows = []
    for m in messages:
        if not m.name.endswith("Key"):
            continue
        if m.api_key is None:
            raise ValueError(f"{m.path}: a record key schema needs apiKey (the record type id)")
        value = by_name.get(m.name[: -len("Key")] + "Value")
        if value is None:
            raise ValueError(f"{m.path}: no {m.name[:-3]}Value schema pairs with this key")
        rows.append(
            (m.api_key, m.name[: -len("Key")], module_name(m.name), module_name(value.name), value.valid.hi)
        )
    ids = [r[0] for r in rows]
    if len(ids) != len(set(ids)):
        raise ValueError(f"{rel_schema_dir}: record type ids must be unique, got {sorted(ids)}")
    lines = [
        BANNER.format(sources=f"{rel_schema_dir}/*.json").rstrip("\n"),
        '"""Coordinator record types: the int16 that prefixes a record key in the coordinator log."""',
        "",
        "from __future__ import annotations",
        "",
        "import importlib",
        "from types import ModuleType",
        "from typing import NamedTuple",
        "",
        "",
        "class RecordType(NamedTuple):",
        "    id: int",
        "    name: str",
        "    key_module: str",
        "    value_module: str",
        "    value_version: int  # the value version the broker writes",
        "",
        "    def key_codec(self) -> ModuleType:",
        '        return importlib.import_module(f"{__name__}.{self.key_module}")',
        "",
        "    def value_codec(self) -> ModuleType:",
        '        return importlib.import_module(f"{__name__}.{self.value_module}")',
        "",
        "",
        "RECORD_TYPES: dict[int, RecordType] = {",
    ]
    for rid, name, km, vm, vv in sorted(rows):
        lines.append(f"    {rid}: RecordType({rid}, {name!r}, {km!r}, {vm!r}, {vv}),")
    lines += ["}", "BY_NAME: dict[str, RecordType] = {r.name: r for r in RECORD_TYPES.values()}", ""]
    return "\n".join(lines)


def render_index(rows: list[tuple], rel_schema_dir: str) -> str:
    lines = [
        BANNER.format(sources=f"{rel_schema_dir}/*.json").rstrip("\n"),
        '"""Index of the generated API codecs: key -> name, module and version range.',
        "",
        "Modules are imported on first use (``codec(api_key)``) so that start-up stays fast.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "import importlib",
        "from types import ModuleType",
        "from typing import NamedTuple",
        "",
        "",
        "class ApiInfo(NamedTuple):",
        "    key: int",
        "    name: str",
        "    module: str",
        "    min_version: int",
        "    max_version: int",
        "    first_flexible_version: int | None",
        "",
        "    def is_flexible(self, version: int) -> bool:",
        "        f = self.first_flexible_version",
        "        return f is not None and version >= f",
        "",
        "",
        "APIS: dict[int, ApiInfo] = {",
    ]
    for key, title, mod, lo, hi, fv in sorted(rows):
        lines.append(f"    {key}: ApiInfo({key}, {title!r}, {mod!r}, {lo}, {hi}, {fv}),")
    lines += [
        "}",
        "",
        "",
        "def codec(api_key: int) -> ModuleType:",
        '    """The generated module for an API key (KeyError if we have none)."""',
        '    return importlib.import_module(f"{__name__}.{APIS[api_key].module}")',
        "",
    ]
    return "\n".join(lines)


def generate(check: bool = False, root: Path = ROOT) -> list[str]:
    """Write the generated packages, or with ``check`` return the drifted paths without writing."""
    drift: list[str] = []
    for rel_src, rel_out in TARGETS:
        src, out = root / rel_src, root / rel_out
        files = render_package(src, rel_src)
        existing = {p.name for p in out.glob("*.py")} if out.exists() else set()
        for stale in sorted(existing - set(files)):
            drift.append(f"{rel_out}/{stale} (no schema produces it)")
            if not check:
                (out / stale).unlink()
        for name, text in files.items():
            path = out / name
            if path.exists() and path.read_text() == text:
                continue
            drift.append(f"{rel_out}/{name}")
            if not check:
                out.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
    return drift
