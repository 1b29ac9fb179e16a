"""Protocol-level differential tests: every API and version both brokers serve, the corpus of
tests/differential/corpus.py sent to pykbroker and to Apache Kafka, answers compared field by field
after normalising (tests/differential/engine.py). A difference fails unless tests/differential/
allowed.py lists it with a reason."""

from __future__ import annotations

import pytest

from broker.dispatch import build_registry
from broker.protocol.generated.api_versions import ApiVersionsRequest
from tests.differential import tally
from tests.differential.allowed import allowed_by
from tests.differential.corpus import BUILDERS, Names, generic_cases
from tests.differential.engine import Peer, api_name, run_case
from tests.support.wire import WireClient

OUR_RANGES = {k: (lo, hi) for k, lo, hi in build_registry().ranges()}


@pytest.fixture(scope="session")
def kafka_ranges(peers: tuple[Peer, Peer]) -> dict[int, tuple[int, int]]:
    with WireClient(peers[1].port) as c:
        resp = c.call(18, 3, ApiVersionsRequest("differential", "1"))
    return {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}


#: APIs compared with Kafka by a module of their own (a Kafka configured differently)
COMPARED_ELSEWHERE = {29: "test_acls.py", 30: "test_acls.py", 31: "test_acls.py"}
#: APIs served but not in the corpus yet, each with why: a new API must be added to one of the three
NOT_YET_COMPARED: dict[int, str] = {}


def test_corpus_covers_every_api_we_serve() -> None:
    assert set(BUILDERS).isdisjoint(COMPARED_ELSEWHERE) and set(BUILDERS).isdisjoint(NOT_YET_COMPARED)
    assert set(BUILDERS) | set(COMPARED_ELSEWHERE) | set(NOT_YET_COMPARED) == set(OUR_RANGES)


@pytest.mark.parametrize("api", sorted(BUILDERS), ids=[api_name(k) for k in sorted(BUILDERS)])
def test_api(api: int, peers: tuple[Peer, Peer], kafka_ranges: dict[int, tuple[int, int]]) -> None:
    ours, theirs = peers
    name = api_name(api)
    lo = max(OUR_RANGES[api][0], kafka_ranges.get(api, (1 << 15, 0))[0])
    hi = min(OUR_RANGES[api][1], kafka_ranges.get(api, (1 << 15, -1))[1])
    assert lo <= hi, (
        f"no version of {name} both brokers serve: ours {OUR_RANGES[api]}, Kafka {kafka_ranges.get(api)}"
    )
    unexplained: list[str] = []
    for v in range(lo, hi + 1):
        cases = list(BUILDERS[api](v, Names())) + list(generic_cases(api, v))
        for case, steps in cases:
            for r in run_case(case, steps, ours, theirs):
                if not r.compared:
                    continue
                bad = []
                for d in r.differences:
                    rule = allowed_by(api_name(r.api), r.version, case, d.path, d.ours, d.theirs)
                    if rule is None:
                        bad.append(d)
                    else:
                        tally.RULES_USED[f"{api_name(r.api)}: {rule.reason}"] += 1
                tally.record("protocol", api_name(r.api), bool(r.differences), not bad)
                unexplained += [f"{api_name(r.api)} v{r.version} [{case}] step {r.step}: {d}" for d in bad]
    assert not unexplained, f"{len(unexplained)} unexplained differences:\n" + "\n".join(unexplained)
