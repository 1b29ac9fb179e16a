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
from tests.integration.conftest import DEFAULT_CONFIG
from tests.support.franz import FranzSession, require_franz

pytestmark = pytest.mark.franz

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@pytest.fixture
def franz(bt):
    with require_franz().session(bt.bootstrap, timeout=90) as s:
        yield s
    assert s.result is not None and s.result.returncode == 0, s.result


@pytest.fixture(params=[2, 0], ids=lambda v: f"tv{v}")
def txn_bt(request, broker_factory):
    """A broker finalizing transaction.version at the parameter's level: 2, franz-go speaks KIP-890
    part 2 (Produce v12 adds the partitions, EndTxn v5 bumps the epoch); 0, the classic protocol."""
    b = broker_factory({**DEFAULT_CONFIG, "transaction.version": str(request.param)})
    b.transaction_version = request.param
    return b


@pytest.fixture
def txn_franz(txn_bt):
    with require_franz().session(txn_bt.bootstrap, timeout=90) as s:
        yield s
    assert s.result is not None and s.result.returncode == 0, s.result


def records_for(n: int, partitions: int, tag: str, base_ts: int) -> list[dict]:
    out = []
    for i in range(n):
        key = None if i % 7 == 3 else f"k{i}"
        headers = [{"key": "h", "value": f"{tag}-{i}"}] + ([{"key": "dup", "value": "x"}] * (i % 3))
        out.append(
            {
                "partition": i % partitions,
                "key": key,
                "value": f"{tag}:{i}" * (1 + i % 5),
                "headers": headers,
                "timestamp": base_ts + i,
            }
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
    assert {p: sorted(offs) for p, offs in per_part.items()} == {
        p: list(range(n // parts)) for p in range(parts)
    }

    got = franz.ok("consume", topic=topic, count=n)["records"]
    assert len(got) == n
    by_value = {(r["partition"], r["offset"]): r for r in got}
    for (p, off), rec in zip(acks, sent, strict=True):
        r = by_value[(p, off)]
        assert (r["key"], r["value"], r["headers"], r["timestamp"]) == (
            rec["key"],
            rec["value"],
            rec["headers"],
            rec["timestamp"],
        )

    def stored():
        out = []
        for p in range(parts):
            log = bt.broker.logs.get(topic, p)
            out.append(
                (
                    {info.compression for *_, info in iter_records(log.read(0, 1 << 30))},
                    set(log.producers.producers),
                )
            )
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


def wait_assignment(
    franz: FranzSession, members: list[str], topic: str, want: int, timeout: float = 45
) -> dict:
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


GROUP_CASES = [
    ("classic", "cooperative-sticky"),
    ("classic", "range"),
    ("consumer", "cooperative-sticky"),
    ("consumer", "range"),
]


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
            "",
            "Stable",
            "consumer",
            balancer,
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
        "create_topics",
        topics=["fa-1", "fa-2"],
        partitions=3,
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
    assert franz.ok("alter_topic_configs", topics=["fa-1"], configs={"retention.ms": "7200000"})[
        "topics"
    ] == {"fa-1": ""}
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


def _values(recs: list[dict]) -> list[str]:
    return sorted(r["value"] for r in recs)


def _txn_meta(b, tid: str) -> tuple[int, int]:
    """The coordinator's state of ``tid``: producer epoch, and the transaction version the client's
    last transition spoke (2: KIP-890 part 2)."""
    meta = b.call(lambda: b.broker.txns.state.txns[tid].transit())
    return meta.producer_epoch, meta.client_transaction_version


def test_transactions_commit_abort_and_isolation(txn_bt, txn_franz: FranzSession):
    """A kgo transactional producer (kgo.TransactionalID) commits, aborts, commits and leaves a
    fourth transaction open, 6 records over 3 partitions each: the last stable offset stops at the
    open transaction's first record while the high watermark is past it; read_committed sees only
    the committed records, read_uncommitted all of them; once the open one commits, the last stable
    offset reaches the high watermark and read_committed sees it too."""
    franz, topic, parts = txn_franz, "fz-tx", 3
    txn_bt.call(txn_bt.broker.create_topic, topic, parts)

    def txn(k: int, end: str) -> dict:
        return {"records": [{"partition": i % parts, "value": f"{end}{k}-{i}"} for i in range(6)], "end": end}

    plan = [txn(0, "commit"), txn(1, "abort"), txn(2, "commit"), txn(3, "open")]
    got = franz.ok("transact", member="p", transactional_id="fz-tid", topic=topic, transactions=plan)
    assert [t["error"] for t in got["transactions"]] == ["", "", "", ""], got
    committed = [r["value"] for t in plan[:3] if t["end"] == "commit" for r in t["records"]]
    aborted = [r["value"] for r in plan[1]["records"]]
    pending = [r["value"] for r in plan[3]["records"]]
    # per partition: 2 records and a marker per ended transaction, then 2 records of the open one
    open_at = {str(p): min(o for q, o in got["transactions"][3]["offsets"] if q == p) for p in range(parts)}
    assert open_at == {str(p): 9 for p in range(parts)}
    hwm = franz.ok("list_offsets", topics=[topic])["offsets"][topic]
    lso = franz.ok("list_offsets", topics=[topic], isolation="read_committed")["offsets"][topic]
    assert (hwm, lso) == ({str(p): 11 for p in range(parts)}, open_at)

    # the aborted records lie before the last committed ones on every partition: had read_committed
    # delivered any, they would be among the first len(committed) records
    rc = franz.ok("consume", topic=topic, count=len(committed), isolation="read_committed")["records"]
    assert _values(rc) == sorted(committed)
    ru = franz.ok("consume", topic=topic, count=len(committed) + len(aborted) + len(pending))["records"]
    assert _values(ru) == sorted(committed + aborted + pending)

    ended = franz.ok("transact", member="p", topic=topic, transactions=[{"records": [], "end": "commit"}])
    assert ended["transactions"][0]["error"] == "", ended
    hwm = franz.ok("list_offsets", topics=[topic])["offsets"][topic]
    lso = franz.ok("list_offsets", topics=[topic], isolation="read_committed")["offsets"][topic]
    assert hwm == lso == {str(p): 12 for p in range(parts)}
    rc = franz.ok("consume", topic=topic, count=len(committed) + len(pending), isolation="read_committed")
    assert _values(rc["records"]) == sorted(committed + pending)
    # TV2: each of the 4 ends (EndTxn v5) bumped the epoch; TV0: none did
    assert _txn_meta(txn_bt, "fz-tid") == ((4, 2) if txn_bt.transaction_version == 2 else (0, 0))


def test_group_transact_session_exactly_once(txn_bt, txn_franz: FranzSession):
    """Consume-transform-produce with kgo.GroupTransactSession: 300 input records over 3 partitions,
    at most 40 per transaction, every 3rd transaction aborted (the session rewinds to the committed
    offsets): read_committed output holds every input record exactly once and the group's committed
    offsets are the input's end offsets."""
    franz, src, dst, group, parts, n = txn_franz, "fz-eos-in", "fz-eos-out", "fz-eos", 3, 300
    for t in (src, dst):
        txn_bt.call(txn_bt.broker.create_topic, t, parts)
    franz.ok("produce", topic=src, records=[{"partition": i % parts, "value": f"r{i}"} for i in range(n)])
    got = franz.ok("eos", topic=src, out=dst, group=group, transactional_id="fz-eos-tid", abort_every=3,
                   max_poll=40, timeout_ms=120_000, timeout=150)  # fmt: skip
    assert got["aborts"] >= 1 and got["commits"] >= n // 40, got
    ends = {str(p): n // parts for p in range(parts)}
    assert got["committed"] == ends
    assert franz.ok("fetch_offsets", group=group)["offsets"] == {src: ends}
    out = franz.ok("consume", topic=dst, count=n, isolation="read_committed")["records"]
    assert _values(out) == sorted(f"OUT-r{i}" for i in range(n))  # each once: no duplicate, none lost
    assert all(r["partition"] == int(r["value"][5:]) % parts for r in out)
    hwm = franz.ok("list_offsets", topics=[dst])["offsets"][dst]
    assert hwm == franz.ok("list_offsets", topics=[dst], isolation="read_committed")["offsets"][dst]
    assert sum(hwm.values()) > n + got["transactions"]  # the aborted attempts are in the log
    tv2 = txn_bt.transaction_version == 2
    assert _txn_meta(txn_bt, "fz-eos-tid") == ((got["transactions"], 2) if tv2 else (0, 0)), got


def test_transactional_fencing(txn_bt, txn_franz: FranzSession):
    """Two kgo clients with one transactional id: the second's InitProducerId fences the first and
    aborts its open transaction. The first's next produce is refused with INVALID_PRODUCER_EPOCH (as
    Kafka answers a produce at a stale epoch, also when KIP-890's implicit add finds the producer
    fenced); under TV2 franz-go's abort of that transaction (EndTxn v5 at the stale epoch) is refused
    with PRODUCER_FENCED, while under TV0 it takes INVALID_PRODUCER_EPOCH as recoverable (KIP-588),
    ends locally, and learns it is fenced from the InitProducerId of its next transaction
    (PRODUCER_FENCED, fatal). read_committed sees only the second's record."""
    franz, topic, tv2 = txn_franz, "fz-fence", txn_bt.transaction_version == 2
    txn_bt.call(txn_bt.broker.create_topic, topic, 1)

    def one(value: str, end: str) -> list[dict]:
        return [{"records": [{"partition": 0, "value": value}], "end": end}]

    def attempt(member: str, value: str, end: str, tid: str = "") -> tuple[dict, dict]:
        got = franz.ok(
            "transact", member=member, transactional_id=tid, topic=topic, transactions=one(value, end)
        )
        return got, got["transactions"][0]

    first, t = attempt("zombie", "zombie", "open", "fz-shared")
    assert t["error"] == "", first
    # franz-go decides at BeginTransaction, from the finalized features of its first ApiVersions
    # exchange, whether to speak KIP-890 part 2: with TV2 the Produce v12 added the partition
    assert _txn_meta(txn_bt, "fz-shared")[1] == (2 if tv2 else 0)
    second, t = attempt("winner", "winner", "commit", "fz-shared")
    assert t["error"] == "", second
    assert (second["producer_id"], second["producer_epoch"]) != (
        first["producer_id"],
        first["producer_epoch"],
    )

    _, late = attempt("zombie", "late", "commit")
    if tv2:  # the abort's EndTxn at the stale epoch: fatal (a real application closes the client)
        assert (late["kerr"], late["end_kerr"]) == ("INVALID_PRODUCER_EPOCH", "PRODUCER_FENCED"), late
    else:  # the abort ends nothing on the broker; the next transaction's InitProducerId is fenced
        assert (late["kerr"], late["end_kerr"]) == ("INVALID_PRODUCER_EPOCH", ""), late
        _, again = attempt("zombie", "again", "commit")
        assert again["kerr"] == "PRODUCER_FENCED" and "fatal" in again["error"], again
    print(f"franz-go, fenced (tv{txn_bt.transaction_version}): {late}")

    rc = franz.ok("consume", topic=topic, count=1, isolation="read_committed")["records"]
    assert [(r["offset"], r["value"]) for r in rc] == [(2, "winner")]  # after the zombie and its abort marker
    end = franz.ok("list_offsets", topics=[topic])["offsets"][topic]
    assert (
        end
        == franz.ok("list_offsets", topics=[topic], isolation="read_committed")["offsets"][topic]
        == {"0": 4}
    )
