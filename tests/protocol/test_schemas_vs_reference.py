"""Our schemas/ against the released Kafka schemas (kafka-4 and kafka-3.9 from scripts/reference.sh).

For every message and every version we serve, the wire layout (flexibility, ordered non-tagged fields
with type/nullability/compactness, tagged fields by tag, recursively) must equal that of every
reference that has the version. ConsumerGroupHeartbeat v1 and ConsumerGroupDescribe v1 are newer
than both references and are checked against a fact table from released Kafka 4.0 instead.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pytest

from broker.protocol.generated import APIS
from codegen.spec import FieldSpec, MessageSpec, StructSpec, load_message
from tests.support.reference import (
    REFERENCE_NAMES,
    SCHEMA_DIR,
    FieldLayout,
    MessageLayout,
    ReferenceUnavailable,
    StructLayout,
    compare_layouts,
    edit_struct,
    ensure_reference,
    insert_field,
    load_reference_set,
    parse_versions,
    reference_layout,
    spec_layout,
    strip_comments,
)
from tests.support.values import all_specs

SPECS = all_specs()

EXPECTED_APIS = {
    "ApiVersions": 18,
    "Metadata": 3,
    "FindCoordinator": 10,
    "CreateTopics": 19,
    "DeleteTopics": 20,
    "CreatePartitions": 37,
    "Produce": 0,
    "Fetch": 1,
    "ListOffsets": 2,
    "OffsetForLeaderEpoch": 23,
    "InitProducerId": 22,
    "AddPartitionsToTxn": 24,
    "AddOffsetsToTxn": 25,
    "EndTxn": 26,
    "TxnOffsetCommit": 28,
    "DescribeProducers": 61,
    "DescribeTransactions": 65,
    "ListTransactions": 66,
    "DescribeAcls": 29,
    "CreateAcls": 30,
    "DeleteAcls": 31,
    "DescribeConfigs": 32,
    "IncrementalAlterConfigs": 44,
    "DescribeCluster": 60,
    "JoinGroup": 11,
    "SyncGroup": 14,
    "Heartbeat": 12,
    "LeaveGroup": 13,
    "OffsetCommit": 8,
    "OffsetFetch": 9,
    "OffsetDelete": 47,
    "DescribeGroups": 15,
    "ListGroups": 16,
    "DeleteGroups": 42,
    "ConsumerGroupHeartbeat": 68,
    "ConsumerGroupDescribe": 69,
    "SaslHandshake": 17,
    "SaslAuthenticate": 36,
    "DeleteRecords": 21,
    "DescribeTopicPartitions": 75,
    "DescribeLogDirs": 35,
    "AlterReplicaLogDirs": 34,
    "DescribeQuorum": 55,
    "ElectLeaders": 43,
    "AlterPartitionReassignments": 45,
    "ListPartitionReassignments": 46,
    "ListConfigResources": 74,
    "UpdateFeatures": 57,
    "AlterConfigs": 33,
    "DescribeClientQuotas": 48,
    "AlterClientQuotas": 49,
    "DescribeUserScramCredentials": 50,
    "AlterUserScramCredentials": 51,
}

#: Our validVersions where they deliberately differ from the union of the reference ranges.
VERSION_OVERRIDES = {"Produce": (3, None), "Fetch": (4, None), "ConsumerGroupHeartbeat": (0, 1)}
VERSION_OVERRIDES["ConsumerGroupDescribe"] = (0, 1)

# Released Kafka 4.0 facts (KIP-848 / KIP-1082 / KIP-1099) for the versions no reference has.
# Each v1 layout is the kafka-3.9 v0 layout with these edits: (struct path, edit).
_REGEX = FieldLayout("SubscribedTopicRegex", "string", nullable=True, flexible=True)
_MEMBER_TYPE = FieldLayout("MemberType", "int8", nullable=False, flexible=True)
KIP848_V1_FACTS = {
    "ConsumerGroupHeartbeatRequest": [((), insert_field("SubscribedTopicNames", _REGEX))],
    "ConsumerGroupHeartbeatResponse": [],
    "ConsumerGroupDescribeRequest": [],
    "ConsumerGroupDescribeResponse": [(("Groups", "Members"), insert_field(None, _MEMBER_TYPE))],
}
#: Defaults of the fields added in v1 (field path -> default).
KIP848_V1_DEFAULTS = {
    "ConsumerGroupHeartbeatRequest": {"SubscribedTopicRegex": None},
    "ConsumerGroupDescribeResponse": {"Groups.Members.MemberType": -1},
}
NOT_IN_REFERENCES = {(name, 1) for name in KIP848_V1_FACTS}


@pytest.fixture(scope="module")
def refs(reference_dir: Path) -> dict[str, dict[str, dict]]:
    out = {name: load_reference_set(reference_dir, name) for name in REFERENCE_NAMES}
    for name, docs in out.items():
        assert len(docs) > 50, f"reference set {name} looks incomplete: {len(docs)} messages"
    return out


def api_name(m: MessageSpec) -> str:
    for suffix in ("Request", "Response"):
        if m.type in ("request", "response") and m.name.endswith(suffix):
            return m.name[: -len(suffix)]
    return m.name


def walk_fields(s: StructSpec, path: str = ""):
    for f in s.fields:
        yield path + f.name, f
        if f.struct is not None:
            yield from walk_fields(f.struct, f"{path}{f.name}.")


def reference_fields(doc: dict) -> dict[str, dict]:
    """Field path -> raw field JSON, commonStructs resolved."""
    commons = {c["name"]: c["fields"] for c in doc.get("commonStructs", [])}
    out: dict[str, dict] = {}

    def walk(fields: list, path: str) -> None:
        for f in fields:
            out[path + f["name"]] = f
            base = f["type"].removeprefix("[]")
            sub = f.get("fields", commons.get(base))
            if sub is not None:
                walk(sub, f"{path}{f['name']}.")

    walk(doc["fields"], "")
    return out


def reference_default(raw: dict, f: FieldSpec) -> object:
    """A reference field's default, normalised the way Kafka's generator reads it."""
    d = raw.get("default")
    kind, name = f.type.kind, f.type.name
    if d is None:
        if kind == "array":
            return []
        if kind == "struct":
            return None
        return {"bool": False, "string": "", "bytes": b"", "records": None, "uuid": None}.get(name, 0)
    if d == "null":
        return None
    if name == "bool":
        return str(d).lower() == "true"
    if name == "string":
        return str(d)
    s = str(d)
    return int(s, 16) if s.lower().startswith("0x") else int(s)


# ------------------------------------------------------------------------------------------- layouts


@pytest.mark.parametrize(
    "m, v",
    [(m, v) for m in SPECS for v in m.versions],
    ids=[f"{m.name}-v{v}" for m in SPECS for v in m.versions],
)
def test_layout_matches_every_reference_with_the_version(m: MessageSpec, v: int, refs) -> None:
    ours = spec_layout(m, v)
    checked, diffs = [], []
    for set_name in REFERENCE_NAMES:
        doc = refs[set_name].get(m.name)
        ref = reference_layout(doc, v) if doc is not None else None
        if ref is None:
            continue
        checked.append(set_name)
        diffs += compare_layouts(ours, ref, set_name)
    assert not diffs, "\n".join(diffs)
    if (m.name, v) not in NOT_IN_REFERENCES:
        assert checked, f"{m.name} v{v} is served but no reference ({', '.join(REFERENCE_NAMES)}) has it"


@pytest.mark.parametrize("name", sorted(KIP848_V1_FACTS))
def test_kip848_v1_layout_matches_kafka_4_0_facts(name: str, refs) -> None:
    m = next(m for m in SPECS if m.name == name)
    assert 1 in m.versions, f"{name}: v1 must be served"
    base = reference_layout(refs["kafka-3.9"][name], 0)
    assert base is not None, f"kafka-3.9 has no {name} v0"
    root = base.root
    for path, edit in KIP848_V1_FACTS[name]:
        root = edit_struct(root, path, edit)
    expected = MessageLayout(name, 1, True, root)
    diffs = compare_layouts(spec_layout(m, 1), expected, "Kafka 4.0 facts")
    assert not diffs, "\n".join(diffs)
    fields = dict(walk_fields(m.root))
    for path, default in KIP848_V1_DEFAULTS.get(name, {}).items():
        f = fields[path]
        assert (f.versions.lo, f.default) == (1, default), (
            f"{name}.{path}: added in v1 with default {default!r}"
        )


def test_kip848_v1_versions_are_in_no_reference(refs) -> None:
    """If a reference gains these versions, the general layout test covers them; say so here."""
    covered = [
        (set_name, name)
        for name, v in sorted(NOT_IN_REFERENCES)
        for set_name in REFERENCE_NAMES
        if name in refs[set_name] and reference_layout(refs[set_name][name], v) is not None
    ]
    assert covered == [], f"references now have KIP-848 v1; drop the fact-table exception: {covered}"


@pytest.mark.parametrize("m", SPECS, ids=[m.name for m in SPECS])
def test_field_defaults_match_the_references(m: MessageSpec, refs) -> None:
    """Defaults decide what an absent field decodes to and whether a tagged field is written."""
    diffs = []
    for set_name in REFERENCE_NAMES:
        doc = refs[set_name].get(m.name)
        if doc is None:
            continue
        raw = reference_fields(doc)
        for path, f in walk_fields(m.root):
            if path in raw and reference_default(raw[path], f) != f.default:
                diffs.append(
                    f"{m.name}.{path}: default ours {f.default!r}, {set_name} {raw[path].get('default')!r}"
                )
    assert not diffs, "\n".join(diffs)


# ------------------------------------------------------------------------------------------- versions


@pytest.mark.parametrize("m", SPECS, ids=[m.name for m in SPECS])
def test_valid_versions_are_the_union_of_the_references(m: MessageSpec, refs) -> None:
    ranges = sorted(
        parse_versions(refs[s][m.name]["validVersions"]) for s in REFERENCE_NAMES if m.name in refs[s]
    )
    assert ranges, f"{m.name}: no reference has this message"
    lo, hi = ranges[0]
    for a, b in ranges[1:]:
        assert a <= hi + 1, f"{m.name}: reference ranges {ranges} leave a gap"
        hi = max(hi, b)
    want_lo, want_hi = VERSION_OVERRIDES.get(api_name(m), (None, None))
    expected = (lo if want_lo is None else want_lo, hi if want_hi is None else want_hi)
    assert (m.valid.lo, m.valid.hi) == expected, (
        f"{m.name}: validVersions {m.valid}, expected {expected[0]}-{expected[1]} (references {ranges})"
    )


def test_api_set_and_keys() -> None:
    apis: dict[str, set] = {}
    for m in SPECS:
        if m.type in ("request", "response"):
            apis.setdefault(api_name(m), set()).add((m.type, m.api_key))
    assert {name: sorted(kinds) for name, kinds in apis.items()} == {
        name: [("request", key), ("response", key)] for name, key in EXPECTED_APIS.items()
    }
    assert sorted(m.name for m in SPECS if m.type not in ("request", "response")) == [
        "RequestHeader",
        "ResponseHeader",
    ]
    assert {info.name: key for key, info in APIS.items()} == EXPECTED_APIS
    for key, info in APIS.items():
        rq = next(m for m in SPECS if m.name == info.name + "Request")
        fv = rq.flexible.intersect(rq.valid)
        assert info.key == key == rq.api_key, info
        assert (info.min_version, info.max_version) == (rq.valid.lo, rq.valid.hi), info
        assert info.first_flexible_version == (None if fv.empty else fv.lo), info


@pytest.mark.parametrize("m", SPECS, ids=[m.name for m in SPECS])
def test_api_keys_match_the_references(m: MessageSpec, refs) -> None:
    for set_name in REFERENCE_NAMES:
        doc = refs[set_name].get(m.name)
        if doc is not None:
            assert (doc.get("apiKey"), doc["type"]) == (m.api_key, m.type), f"{m.name} vs {set_name}"


# ------------------------------------------------------------------------------------------- self-tests


def _kafka4(refs, name: str, v: int) -> MessageLayout:
    layout = reference_layout(refs["kafka-4"][name], v)
    assert layout is not None
    return layout


def test_comparator_accepts_identical_layouts(refs) -> None:
    for name, v in [("FetchResponse", 18), ("MetadataResponse", 12), ("RequestHeader", 2)]:
        layout = _kafka4(refs, name, v)
        assert compare_layouts(layout, copy.deepcopy(layout)) == []


def test_comparator_reports_swapped_fields(refs) -> None:
    ref = _kafka4(refs, "JoinGroupResponse", 9)
    f = list(ref.root.fields)
    f[2], f[3] = f[3], f[2]
    mutated = dataclasses.replace(ref, root=StructLayout(tuple(f), ref.root.tagged))
    diffs = compare_layouts(mutated, ref)
    assert len(diffs) == 1 and "JoinGroupResponse v9" in diffs[0] and "GenerationId" in diffs[0], diffs


def test_comparator_reports_nested_changes(refs) -> None:
    ref = _kafka4(refs, "FetchResponse", 16)

    def change(attr: str, value: object):
        def fn(s: StructLayout) -> StructLayout:
            fields = tuple(
                dataclasses.replace(x, **{attr: value}) if x.name == "Records" else x for x in s.fields
            )
            return StructLayout(fields, s.tagged)

        return fn

    for attr, value in [("nullable", False), ("type", "bytes"), ("flexible", False)]:
        mutated = dataclasses.replace(
            ref, root=edit_struct(ref.root, ("Responses", "Partitions"), change(attr, value))
        )
        diffs = compare_layouts(mutated, ref)
        assert diffs == [
            f"FetchResponse v16: field Responses[].Partitions[].Records: {attr}: "
            f"ours {value!r}, reference {getattr(_records(ref), attr)!r}"
        ]
    dropped = dataclasses.replace(
        ref,
        root=edit_struct(ref.root, ("Responses",), lambda s: StructLayout(s.fields[:1], s.tagged)),
    )
    diffs = compare_layouts(dropped, ref)
    assert len(diffs) == 1 and "Responses[].Partitions" in diffs[0], diffs
    unflexible = dataclasses.replace(ref, flexible=False)
    assert compare_layouts(unflexible, ref) == [
        "FetchResponse v16: message flexible: ours False, reference True"
    ]


def _records(layout: MessageLayout) -> FieldLayout:
    responses = next(f for f in layout.root.fields if f.name == "Responses")
    partitions = next(f for f in responses.struct.fields if f.name == "Partitions")
    return next(f for f in partitions.struct.fields if f.name == "Records")


def test_comparator_reports_nullable_range_and_tag_changes(refs) -> None:
    doc = refs["kafka-4"]["JoinGroupResponse"]
    changed = copy.deepcopy(doc)
    protocol_name = next(f for f in changed["fields"] if f["name"] == "ProtocolName")
    protocol_name["nullableVersions"] = "8+"
    diffs = compare_layouts(reference_layout(changed, 7), reference_layout(doc, 7))
    assert diffs == ["JoinGroupResponse v7: field ProtocolName: nullable: ours False, reference True"]
    assert compare_layouts(reference_layout(changed, 8), reference_layout(doc, 8)) == []

    doc = refs["kafka-4"]["ApiVersionsResponse"]
    changed = copy.deepcopy(doc)
    epoch = next(f for f in changed["fields"] if f["name"] == "FinalizedFeaturesEpoch")
    epoch["tag"] = 7
    diffs = compare_layouts(reference_layout(changed, 3), reference_layout(doc, 3))
    assert len(diffs) == 2 and all("FinalizedFeaturesEpoch" in d for d in diffs), diffs
    assert "tag 1" in diffs[0] + diffs[1] and "tag 7" in diffs[0] + diffs[1], diffs
    epoch["type"] = "int32"
    epoch["tag"] = 1
    diffs = compare_layouts(reference_layout(changed, 3), reference_layout(doc, 3))
    assert diffs == [
        "ApiVersionsResponse v3: tagged field FinalizedFeaturesEpoch (tag 1): type: ours 'int32', reference 'int64'"
    ]


def test_comparator_catches_an_edited_schema_of_ours(refs, tmp_path: Path) -> None:
    """End to end: a schemas/ file with two fields swapped no longer matches the reference."""
    doc = json.loads((SCHEMA_DIR / "HeartbeatRequest.json").read_text())
    doc["fields"][1], doc["fields"][2] = doc["fields"][2], doc["fields"][1]
    path = tmp_path / "HeartbeatRequest.json"
    path.write_text(json.dumps(doc))
    edited = load_message(path)
    diffs = compare_layouts(spec_layout(edited, 4), reference_layout(refs["kafka-4"]["HeartbeatRequest"], 4))
    assert len(diffs) == 1 and diffs[0].startswith("HeartbeatRequest v4: field "), diffs


def test_unobtainable_reference_is_an_error_not_a_skip(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    with pytest.raises(ReferenceUnavailable, match="reference.sh exited"):
        ensure_reference(blocker / "reference")


def test_comment_stripping_keeps_slashes_inside_strings() -> None:
    text = '// head\n{ "a": "http://x//y", /* c */ "b": "q\\"//", // tail\n "c": 1 }\n'
    assert json.loads(strip_comments(text)) == {"a": "http://x//y", "b": 'q"//', "c": 1}
