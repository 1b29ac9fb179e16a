"""franz-go (github.com/twmb/franz-go: kgo and kadm) against the broker, through tests/go/main.go.

One probe process per test; group members are named kgo clients living inside it. Every scenario
checks the records, offsets and assignments the client reports against what was produced and
against the broker's own state.
"""

from __future__ import annotations

import base64
import time
from collections import defaultdict

import pytest

from broker.log.records import iter_records
from tests.support.franz import FranzSession, require_franz

pytestmark = pytest.mark.franz

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@pytest.fixture
def franz(bt):
    with require_franz().session(bt.bootstrap, timeout=90) as s:
        yield s
    assert s.result is not None and s.result.returncode == 0, s.result


def records_for(n: int, partitions: int, tag: str, base_ts: int) -> list[dict]:
    out = []
    for i in range(n):
        key = None if i % 7 == 3 else f"k{i}"
        headers = [{"key": "h", "value": f"{tag}-{i}"}] + ([{"key": "dup", "value": "x"}] * (i % 3))
        out.append(
            {"partition": i % partitions, "key": key, "value": f"{tag}:{i}" * (1 + i % 5), "headers": headers,
             "timestamp": base_ts + i}
        )
    return out


@pytest.mark.parametrize("codec", list(CODECS))
def test_produce_consume_every_codec(bt, franz: FranzSession, codec):
    """kgo's idempotent producer (its default) with each codec, 3 partitions, keys (and null keys)
    and repeated headers; read back by kgo and checked against the stored batches."""
    topic, parts, n = f"fz-{codec}", 3, 300
    bt.call(bt.broker.create_topic, topic, parts)
    base_ts = int(time.time() * 1000) - 60_000
    sent = records_for(n, parts, codec, base_ts)
    acks = franz.ok("produce", topic=topic, codec=codec, records=sent)["offsets"]
    per_part: dict[int, list[int]] = defaultdict(list)
    for (p, off), rec in zip(acks, sent, strict=True):
        assert p == rec["partition"]
        per_part[p].append(off)
    assert {p: sorted(offs) for p, offs in per_part.items()} == {p: list(range(n // parts)) for p in range(parts)}

    got = franz.ok("consume", topic=topic, count=n)["records"]
    assert len(got) == n
    by_value = {(r["partition"], r["offset"]): r for r in got}
    for (p, off), rec in zip(acks, sent, strict=True):
        r = by_value[(p, off)]
        assert (r["key"], r["value"], r["headers"], r["timestamp"]) == (
            rec["key"], rec["value"], rec["headers"], rec["timestamp"]
        )

    def stored():
        out = []
        for p in range(parts):
            log = bt.broker.logs.get(topic, p)
            out.append(({info.compression for *_, info in iter_records(log.read(0, 1 << 30))},
                        set(log.producers.producers)))
        return out

    state = bt.call(stored)
    assert all(comp == {CODECS[codec]} for comp, _ in state), state
    # idempotent by default: one producer id with sequence state on every partition
    pids = [pid for _, pid in state]
    assert all(len(s) == 1 for s in pids) and len(set().union(*pids)) == 1, pids


def test_non_idempotent_producer(bt, franz: FranzSession):
    bt.call(bt.broker.create_topic, "fz-plain", 1)
    sent = records_for(50, 1, "plain", int(time.time() * 1000))
    acks = franz.ok("produce", topic="fz-plain", idempotent=False, records=sent)["offsets"]
    assert acks == [[0, i] for i in range(50)]
    assert bt.call(lambda: bt.broker.logs.get("fz-plain", 0).producers.producers) == {}
    assert [r["value"] for r in franz.ok("consume", topic="fz-plain", count=50)["records"]] == [
        r["value"] for r in sent
    ]


def wait_assignment(franz: FranzSession, members: list[str], topic: str, want: int, timeout: float = 45) -> dict:
    """Poll the members until their assignments are disjoint and cover ``want`` partitions."""
    deadline = time.monotonic() + timeout
    while True:
        got = {m: franz.ok("assignment", member=m)["assignment"].get(topic, []) for m in members}
        flat = [p for ps in got.values() for p in ps]
        if sorted(flat) == list(range(want)) and all(got.values()):
            return got
        assert time.monotonic() < deadline, f"assignments did not settle: {got}"
        time.sleep(0.2)


def drain(franz: FranzSession, member: str, count: int) -> list[dict]:
    out: list[dict] = []
    deadline = time.monotonic() + 45
    while len(out) < count and time.monotonic() < deadline:
        out += franz.ok("poll", member=member, count=count - len(out), timeout_ms=2000)["records"]
    assert len(out) == count, f"{member} got {len(out)} of {count}"
    return out


GROUP_CASES = [("classic", "cooperative-sticky"), ("classic", "range"), ("consumer", "cooperative-sticky"),
               ("consumer", "range")]


@pytest.mark.parametrize(("protocol", "balancer"), GROUP_CASES)
def test_group_shares_partitions_and_commits_resume(bt, franz: FranzSession, protocol, balancer):
    """Two kgo group members split 4 partitions, consume and commit; after both leave, a new member
    resumes exactly at the committed offsets. ``consumer`` is KIP-848 (kgo.ServerSideBalancer:
    ConsumerGroupHeartbeat v1 with the server-side ``uniform`` or ``range`` assignor)."""
    topic, group, parts, per = "fz-g", f"fz-{protocol}-{balancer}", 4, 10
    bt.call(bt.broker.create_topic, topic, parts)
    base_ts = int(time.time() * 1000)
    franz.ok("produce", topic=topic, records=records_for(parts * per, parts, "a", base_ts))

    join = {"group": group, "topics": [topic], "balancer": balancer, "protocol": protocol}
    franz.ok("join", member="a", **join)
    alone = wait_assignment(franz, ["a"], topic, parts)
    assert alone == {"a": [0, 1, 2, 3]}
    franz.ok("join", member="b", **join)
    both = wait_assignment(franz, ["a", "b"], topic, parts)
    assert sorted(map(len, both.values())) == [2, 2], both
    if balancer == "range":
        assert sorted(both.values()) == [[0, 1], [2, 3]], both

    if protocol == "classic":
        desc = franz.ok("describe_groups", groups=[group])["groups"][group]
        assert (desc["error"], desc["state"], desc["protocol_type"], desc["protocol"]) == (
            "", "Stable", "consumer", balancer
        )
        described = sorted(sorted(m["assigned"][topic]) for m in desc["members"])
    else:
        desc = franz.ok("describe_consumer_groups", groups=[group])["groups"][group]
        assert (desc["error"], desc["state"]) == ("", "Stable"), desc
        assert desc["assignor"] == ("range" if balancer == "range" else "uniform")
        assert all(m["member_epoch"] == desc["epoch"] for m in desc["members"]), desc
        described = sorted(m["assigned"][topic] for m in desc["members"])
    assert described == sorted(both.values())
    assert {g: v["state"] for g, v in franz.ok("list_groups")["groups"].items()} == {group: "Stable"}

    for m in ("a", "b"):
        recs = drain(franz, m, per * len(both[m]))
        assert {r["partition"] for r in recs} == set(both[m])
        for p in both[m]:
            assert [r["offset"] for r in recs if r["partition"] == p] == list(range(per))
        committed = franz.ok("commit", member=m)["committed"][topic]
        assert committed == {str(p): per for p in both[m]}
    franz.ok("leave", member="a")
    franz.ok("leave", member="b")

    assert franz.ok("fetch_offsets", group=group)["offsets"] == {topic: {str(p): per for p in range(parts)}}
    franz.ok("produce", topic=topic, records=records_for(parts * per, parts, "b", base_ts + 1000))
    franz.ok("join", member="c", **join)
    recs = drain(franz, "c", parts * per)
    assert sorted((r["partition"], r["offset"]) for r in recs) == [
        (p, per + i) for p in range(parts) for i in range(per)
    ]
    assert {r["value"].split(":")[0] for r in recs} == {"b"}
    franz.ok("leave", member="c")


def test_admin(bt, franz: FranzSession):
    """kadm: create (with configs) / list / describe and alter configs / delete topics; start, end and
    timestamp offsets; committed offsets and group listing."""
    created = franz.ok(
        "create_topics", topics=["fa-1", "fa-2"], partitions=3,
        configs={"retention.ms": "3600000", "cleanup.policy": "delete", "max.message.bytes": "200000"},
    )["topics"]
    for name in ("fa-1", "fa-2"):
        t = created[name]
        assert (t["error"], t["partitions"], t["replication_factor"]) == ("", 3, 1), t
        assert t["configs"]["retention.ms"] == "3600000" and t["configs"]["max.message.bytes"] == "200000"
        assert base64.b64decode(t["id"]) == bt.call(lambda n=name: bt.broker.topics.get(n).topic_id.bytes)
    again = franz.ok("create_topics", topics=["fa-1"], partitions=1)["topics"]["fa-1"]
    assert "TOPIC_ALREADY_EXISTS" in again["error"]
    bad = franz.ok("create_topics", topics=["fa-bad"], partitions=1, configs={"retention.ms": "soon"})
    assert "INVALID_CONFIG" in bad["topics"]["fa-bad"]["error"]
    assert set(franz.ok("list_topics")["topics"].items()) >= {("fa-1", 3), ("fa-2", 3)}

    cfg = franz.ok("describe_topic_configs", topics=["fa-1"])["topics"]["fa-1"]["configs"]
    assert cfg["retention.ms"] == {"value": "3600000", "source": "DYNAMIC_TOPIC_CONFIG"}
    assert cfg["segment.bytes"]["source"] == "DEFAULT_CONFIG"
    assert franz.ok("alter_topic_configs", topics=["fa-1"], configs={"retention.ms": "7200000"})["topics"] == {
        "fa-1": ""
    }
    cfg = franz.ok("describe_topic_configs", topics=["fa-1"])["topics"]["fa-1"]["configs"]
    assert cfg["retention.ms"]["value"] == "7200000"
    assert bt.call(lambda: bt.broker.topics.get("fa-1").configs.get("retention.ms")) in ("7200000", 7200000)

    base_ts = int(time.time() * 1000) - 100_000
    franz.ok("produce", topic="fa-2", records=records_for(30, 3, "t", base_ts))
    start = franz.ok("list_offsets", topics=["fa-2"], codec="start")["offsets"]
    end = franz.ok("list_offsets", topics=["fa-2"])["offsets"]
    assert start == {"fa-2": {"0": 0, "1": 0, "2": 0}} and end == {"fa-2": {"0": 10, "1": 10, "2": 10}}
    # record i lands on partition i % 3 at offset i // 3 with timestamp base_ts + i
    at = franz.ok("list_offsets", topics=["fa-2"], millis=base_ts + 14)["offsets"]
    assert at == {"fa-2": {"0": 5, "1": 5, "2": 4}}  # records 15, 16 and 14: the first with ts >= +14
    after_all = franz.ok("list_offsets", topics=["fa-2"], millis=base_ts + 10_000)["offsets"]
    assert after_all == end

    franz.ok("join", member="m", group="fa-g", topics=["fa-2"])
    drain(franz, "m", 30)
    franz.ok("commit", member="m")
    franz.ok("leave", member="m")
    assert franz.ok("fetch_offsets", group="fa-g")["offsets"] == {"fa-2": {"0": 10, "1": 10, "2": 10}}
    assert franz.ok("list_groups")["groups"] == {"fa-g": {"state": "Empty", "protocol_type": "consumer"}}

    deleted = franz.ok("delete_topics", topics=["fa-1", "fa-nope"])["topics"]
    assert deleted["fa-1"] == "" and "UNKNOWN_TOPIC_OR_PARTITION" in deleted["fa-nope"]
    assert "fa-1" not in franz.ok("list_topics")["topics"]
    assert bt.call(lambda: bt.broker.topics.get("fa-1")) is None
