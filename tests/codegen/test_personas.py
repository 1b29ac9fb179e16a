"""broker/personas.py is what `python -m codegen personas` reads off the releases' kafka-clients jars
(fetched by scripts/setup.sh test into .reference); it fails, never skips, when they are missing."""

from __future__ import annotations

import pytest

from broker import personas_redpanda
from codegen import personas


def test_checked_in_personas_match_the_released_jars():
    assert personas.generate(check=True) == []


def _redpanda_tree() -> dict[str, str]:
    """A miniature of Redpanda's sources in the shapes its handlers and schemata take."""
    h = "src/v/kafka/server/handlers"
    s = "src/v/kafka/protocol/schemata"
    return {
        f"{h}/handlers.h": "using request_types = make_request_types<\n  produce_handler,\n"
        "  list_offsets_handler,\n  api_versions_handler>;\n",
        f"{h}/produce.h": "using produce_handler = two_phase_handler<produce_api, 0, 7>;\n",
        f"{h}/list_offsets.h": "using list_offsets_handler\n  = single_stage_handler<list_offsets_api, 0, 4>;\n",
        f"{h}/api_versions.h": "struct api_versions_handler final\n"
        "  : public single_stage_handler<api_versions_api, 0, 3> {\n};\n",
        # declared but not registered in request_types: not advertised
        f"{h}/describe_cluster.h": "using describe_cluster_handler = single_stage_handler<describe_cluster_api, 0, 1>;",
        f"{s}/produce_request.json": '// comment\n{"apiKey": 0, "type": "request", "name": "ProduceRequest"}',
        f"{s}/list_offset_request.json": '{"apiKey": 2, "type": "request", "name": "ListOffsetRequest"}',
        f"{s}/api_versions_request.json": '{"apiKey": 18, "type": "request", "name": "ApiVersionsRequest"}',
        f"{s}/describe_cluster_request.json": '{"apiKey": 60, "type": "request", "name": "DescribeClusterRequest"}',
    }


def test_redpanda_ranges_are_the_registered_handlers_declared_versions():
    tree = _redpanda_tree()
    table = personas.redpanda_ranges(
        tree.__getitem__, lambda d: [p for p in tree if p.rpartition("/")[0] == d]
    )
    assert table == {0: ("Produce", 0, 7), 2: ("ListOffsets", 0, 4), 18: ("ApiVersions", 0, 3)}


def test_a_registered_handler_without_a_declaration_is_an_error():
    tree = _redpanda_tree()
    del tree["src/v/kafka/server/handlers/produce.h"]
    with pytest.raises(ValueError, match="produce_handler"):
        personas.redpanda_ranges(tree.__getitem__, lambda d: [p for p in tree if p.rpartition("/")[0] == d])


def test_checked_in_redpanda_table_names_its_release():
    # generated from a Redpanda clone (python -m codegen personas --redpanda DIR): the tag and commit
    assert personas_redpanda.RELEASE == personas.REDPANDA_RELEASE
    assert len(personas_redpanda.COMMIT) == 40
    text = personas.render_redpanda(
        personas_redpanda.RELEASE,
        personas_redpanda.COMMIT,
        {k: (n, *personas_redpanda.REDPANDA[k]) for k, n in _names().items()},
    )
    assert text == personas.REDPANDA_TARGET.read_text()


def _names() -> dict[int, str]:
    """The API names in the generated module's comments, by key."""
    out = {}
    for line in personas.REDPANDA_TARGET.read_text().splitlines():
        if line.startswith("    ") and "#" in line and ":" in line:
            key, _, name = line.strip().partition(":")
            out[int(key)] = name.rpartition("# ")[2]
    return out
