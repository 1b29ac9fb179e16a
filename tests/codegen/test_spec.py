"""The spec model rejects bad schemas with a message naming the file, the field and the fix."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from codegen.spec import SchemaError, load_message

BASE = {
    "apiKey": 900,
    "type": "request",
    "name": "FooRequest",
    "validVersions": "0-3",
    "flexibleVersions": "2+",
    "fields": [
        {"name": "GroupId", "type": "string", "versions": "0+", "about": "A string."},
        {"name": "Bar", "type": "int32", "versions": "1+", "about": "An int."},
        {
            "name": "Topics",
            "type": "[]Topic",
            "versions": "0+",
            "about": "Nested.",
            "fields": [
                {"name": "Name", "type": "string", "versions": "0+", "about": "Topic name."},
                {"name": "Partitions", "type": "[]int32", "versions": "0+", "about": "Ids."},
            ],
        },
    ],
}


def write(tmp_path: Path, doc: dict | str, file_name: str = "FooRequest.json") -> Path:
    path = tmp_path / file_name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def field(doc: dict, name: str) -> dict:
    return next(f for f in doc["fields"] if f["name"] == name)


def nested(doc: dict, name: str) -> dict:
    return next(f for f in field(doc, "Topics")["fields"] if f["name"] == name)


def test_the_base_schema_loads(tmp_path: Path) -> None:
    m = load_message(write(tmp_path, BASE))
    assert m.name == "FooRequest" and [f.name for f in m.root.fields] == ["GroupId", "Bar", "Topics"]
    assert m.structs["Topic"].fields[1].type.element.name == "int32"


def _set(key: str, value: object, name: str) -> Callable[[dict], None]:
    def edit(doc: dict) -> None:
        field(doc, name)[key] = value

    return edit


def _append(new: dict, into_topics: bool = False) -> Callable[[dict], None]:
    def edit(doc: dict) -> None:
        (field(doc, "Topics")["fields"] if into_topics else doc["fields"]).append(new)

    return edit


def _tagged(name: str, tag: int, tagged: str = "2+") -> dict:
    return {
        "name": name,
        "type": "int32",
        "versions": "2+",
        "taggedVersions": tagged,
        "tag": tag,
        "about": "T.",
    }


def _both(*edits: Callable[[dict], None]) -> Callable[[dict], None]:
    def edit(doc: dict) -> None:
        for e in edits:
            e(doc)

    return edit


def _nested_nullable(doc: dict) -> None:
    nested(doc, "Partitions")["type"] = "int64"
    nested(doc, "Name")["type"] = "int16"
    nested(doc, "Name")["nullableVersions"] = "0+"


# (id, edit, fragments the message must contain: where + what + how to fix)
CASES = [
    (
        "version-range-text",
        _set("versions", "0to3", "Bar"),
        ["FooRequest.Bar", "'0to3'", "write 'N', 'N+', 'N-M' or 'none'"],
    ),
    (
        "valid-versions-reversed",
        lambda d: d.update(validVersions="3-1"),
        ["validVersions", "'3-1'", "swap the bounds"],
    ),
    (
        "valid-versions-open",
        lambda d: d.update(validVersions="0+"),
        ["validVersions", "give a closed range"],
    ),
    (
        "unknown-type",
        _set("type", "int33", "Bar"),
        ["FooRequest.Bar", "unknown type 'int33'", "use a primitive", "int32"],
    ),
    (
        "unknown-field-key",
        _set("nullable", True, "Bar"),
        ["FooRequest.Bar", "unknown key(s) ['nullable']", "allowed:", "nullableVersions"],
    ),
    (
        "unknown-top-level-key",
        lambda d: d.update(listeners=["broker"]),
        ["top level", "unknown key(s) ['listeners']", "allowed:", "validVersions"],
    ),
    (
        "tagged-outside-flexible",
        _append(_tagged("Late", 0, tagged="1+")),
        ["FooRequest.Late", "taggedVersions 1+", "flexibleVersions 2+", "only in flexible versions"],
    ),
    (
        "tagged-without-flexible-versions",
        _both(lambda d: d.pop("flexibleVersions"), _append(_tagged("Late", 0))),
        ["FooRequest.Late", "flexibleVersions none", "only in flexible versions"],
    ),
    (
        "duplicate-tag",
        _both(_append(_tagged("First", 3)), _append(_tagged("Second", 3))),
        ["FooRequest.Second", "tag 3 is already used by First", "pick another"],
    ),
    (
        "duplicate-field-name",
        _append({"name": "Bar", "type": "int64", "versions": "0+", "about": "Again."}),
        ["FooRequest.Bar", "used twice", re.compile(r"\b(rename|remove|drop|delete)\b")],
    ),
    (
        "nullable-int",
        _set("nullableVersions", "1+", "Bar"),
        ["FooRequest.Bar", "int32 cannot be nullable", "drop nullableVersions"],
    ),
    (
        "nullable-int-nested",
        _nested_nullable,
        ["FooRequest.Topics(Topic).Name", "int16 cannot be nullable", "drop nullableVersions"],
    ),
    (
        "struct-without-fields",
        _append({"name": "Owner", "type": "Owner", "versions": "0+", "about": "S."}),
        ["FooRequest.Owner", "struct type Owner", "no 'fields'", "commonStructs"],
    ),
    (
        "struct-array-without-fields",
        _append({"name": "Leaders", "type": "[]Leader", "versions": "0+", "about": "S."}, into_topics=True),
        ["FooRequest.Topics(Topic).Leaders", "struct type Leader", "no 'fields'", "commonStructs"],
    ),
    (
        "default-null-without-nullable",
        _set("default", "null", "GroupId"),
        ["FooRequest.GroupId", "default 'null'", "needs nullableVersions"],
    ),
    (
        "tag-without-tagged-versions",
        _append({"name": "Stray", "type": "int32", "versions": "2+", "tag": 1, "about": "T."}),
        ["FooRequest.Stray", "'tag' given without taggedVersions", "add taggedVersions or drop the tag"],
    ),
]


@pytest.mark.parametrize("edit, fragments", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_schema_is_rejected_with_where_and_fix(tmp_path: Path, edit, fragments) -> None:
    doc = copy.deepcopy(BASE)
    edit(doc)
    path = write(tmp_path, doc)
    with pytest.raises(SchemaError) as err:
        load_message(path)
    msg = str(err.value)
    assert str(path) in msg, f"message does not name the file: {msg}"
    for frag in fragments:
        if isinstance(frag, re.Pattern):
            assert frag.search(msg), f"no fix hint matching {frag.pattern!r} in: {msg}"
        else:
            assert frag in msg, f"{frag!r} missing from: {msg}"


def test_file_name_must_match_the_message(tmp_path: Path) -> None:
    path = write(tmp_path, BASE, "BarRequest.json")
    with pytest.raises(SchemaError) as err:
        load_message(path)
    msg = str(err.value)
    assert str(path) in msg and "file should be named FooRequest.json" in msg


def test_comments_are_rejected_with_a_hint(tmp_path: Path) -> None:
    path = write(tmp_path, "// licence\n" + json.dumps(BASE))
    with pytest.raises(SchemaError) as err:
        load_message(path)
    assert str(path) in str(err.value) and "strict JSON without comments" in str(err.value)


def test_request_name_must_end_in_request(tmp_path: Path) -> None:
    doc = copy.deepcopy(BASE)
    doc["name"] = "FooResponseX"
    path = write(tmp_path, doc, "FooResponseX.json")
    with pytest.raises(SchemaError, match="must end in 'Request'"):
        load_message(path)
