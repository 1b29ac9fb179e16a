"""franz-go's transactional fencing against Apache Kafka (the session's real broker) and pykbroker:
the same epochs, errors, records and offsets. Here, beside the other comparisons, so the real Kafka
starts once per run (tests/conftest.py puts tests/differential on one worker)."""

from __future__ import annotations

import uuid

import pytest

from tests.support.franz import FranzSession, require_franz

pytestmark = pytest.mark.franz


@pytest.fixture
def franz(our_broker):
    with require_franz().session(our_broker.bootstrap, timeout=90) as s:
        yield s
    assert s.result is not None and s.result.returncode == 0, s.result


def _fencing_outcome(franz: FranzSession, suffix: str) -> dict:
    """The fencing scenario of test_transactional_fencing as a franz-go user sees it, names made
    unique by ``suffix``: epochs, the errors of the fenced producer, what read_committed reads."""
    topic, tid = f"fzd-fence-{suffix}", f"fzd-shared-{suffix}"
    created = franz.ok("create_topics", topics=[topic], partitions=1)["topics"][topic]
    assert created["error"] == "", created

    def attempt(member: str, value: str, end: str, with_tid: bool = False) -> dict:
        return franz.ok("transact", member=member, transactional_id=tid if with_tid else "", topic=topic,
                        transactions=[{"records": [{"partition": 0, "value": value}], "end": end}])  # fmt: skip

    first = attempt("z-" + suffix, "zombie", "open", True)
    second = attempt("w-" + suffix, "winner", "commit", True)
    late = attempt("z-" + suffix, "late", "commit")["transactions"][0]
    read = franz.ok("consume", topic=topic, count=1, isolation="read_committed")["records"]
    return {
        "epochs": (first["producer_epoch"], second["producer_epoch"]),
        "same producer id": first["producer_id"] == second["producer_id"],
        "errors": [t["kerr"] or t["error"] for t in first["transactions"] + second["transactions"]],
        "fenced": (late["kerr"], late["end_kerr"]),
        "read_committed": [(r["offset"], r["value"]) for r in read],
        "end": franz.ok("list_offsets", topics=[topic])["offsets"][topic],
        "lso": franz.ok("list_offsets", topics=[topic], isolation="read_committed")["offsets"][topic],
    }


def test_transactional_fencing_as_on_kafka(franz: FranzSession, real_kafka):
    """The fencing scenario run by franz-go against Apache Kafka (the session's real broker, 4.x with
    transaction.version 2) and against pykbroker: the same epochs, errors, records and offsets. (Its
    first ApiVersions, v5, is answered by both with UNSUPPORTED_VERSION and ApiVersions' range only,
    so franz-go speaks KIP-890 part 2 from the first transaction on both.)"""
    suffix = uuid.uuid4().hex[:8]
    ours = _fencing_outcome(franz, suffix)
    with require_franz().session(real_kafka.bootstrap, timeout=90) as theirs_session:
        theirs = _fencing_outcome(theirs_session, suffix)
    assert theirs["fenced"] == ("INVALID_PRODUCER_EPOCH", "PRODUCER_FENCED"), theirs
    assert ours == theirs, f"pykbroker {ours}\n  vs Kafka {theirs}"
