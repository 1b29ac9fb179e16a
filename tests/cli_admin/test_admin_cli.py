"""The admin commands (broker/cli_admin) against a running pykbroker, through click's runner: tables,
--json, exit codes and one-line errors."""

from __future__ import annotations

import threading

import confluent_kafka
import orjson
import pytest
from click.testing import CliRunner

from broker.cli import main
from broker.cli_admin.common import EXIT_KAFKA_ERROR, EXIT_UNREACHABLE


@pytest.fixture
def broker(broker_factory):
    """No initial rebalance delay: the consumers' groups form at once, not after Kafka's default 3 s."""
    return broker_factory({"group.initial.rebalance.delay.ms": 0})


@pytest.fixture
def cli(broker):
    runner = CliRunner()

    def run(*args: str, input: str | None = None, code: int = 0):
        result = runner.invoke(main, [*args, "-b", broker.bootstrap], input=input, catch_exceptions=False)
        assert result.exit_code == code, (result.stdout, result.stderr)
        return result

    return run


def js(result):
    return orjson.loads(result.stdout)


def test_topics_create_list_describe_alter_delete(cli):
    assert (
        "Created topic orders."
        in cli("topics", "create", "orders", "-p", "3", "-c", "retention.ms=60000").stdout
    )
    again = cli("topics", "create", "orders", code=EXIT_KAFKA_ERROR)
    assert again.stderr.startswith("error: TOPIC_ALREADY_EXISTS") and again.stderr.count("\n") == 1
    cli("topics", "create", "orders", "--if-not-exists")

    table = cli("topics", "list").stdout.splitlines()
    assert table[0].split() == ["TOPIC", "PARTITIONS", "INTERNAL"]
    assert table[1].split() == ["orders", "3"]
    assert js(cli("topics", "list", "--json")) == [{"name": "orders", "partitions": 3, "internal": False}]

    (d,) = js(cli("topics", "describe", "orders", "--json"))
    assert [p["partition"] for p in d["partitions"]] == [0, 1, 2]
    assert {p["leader"] for p in d["partitions"]} == {1}
    assert d["configs"]["retention.ms"] == "60000"

    cli("topics", "alter-config", "orders", "--set", "retention.ms=120000", "--set", "cleanup.policy=compact")
    (d,) = js(cli("topics", "describe", "orders", "--json"))
    assert d["configs"]["retention.ms"] == "120000" and d["configs"]["cleanup.policy"] == "compact"
    cli("topics", "alter-config", "orders", "--delete", "cleanup.policy")
    (d,) = js(cli("topics", "describe", "orders", "--json"))
    assert "cleanup.policy" not in d["configs"]
    bad = cli("topics", "alter-config", "orders", "--set", "retention.ms=soon", code=EXIT_KAFKA_ERROR)
    assert bad.stderr.startswith("error: ")

    cli("topics", "delete", "orders")
    missing = cli("topics", "describe", "orders", code=EXIT_KAFKA_ERROR)
    assert "UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr
    cli("topics", "delete", "orders", code=EXIT_KAFKA_ERROR)
    cli("topics", "delete", "orders", "--if-exists")


def test_produce_and_consume_formats(cli):
    cli("topics", "create", "t", "-p", "1")
    cli("produce", "t", input="a\nb\nc\n")
    out = js(cli("produce", "t", "-K", ":", "-H", "h=1", "--json", input="k1:v1\nk2:v2\n"))
    assert out == {"topic": "t", "count": 2, "last_offsets": {"0": 4}}
    cli("produce", "t", "-K", ":", input="no separator\n", code=EXIT_KAFKA_ERROR)

    assert cli("consume", "t", "--from-beginning", "-n", "5").stdout.splitlines() == [
        "a",
        "b",
        "c",
        "v1",
        "v2",
    ]
    kv = cli("consume", "t", "-p", "0", "--from-beginning", "-n", "5", "--format", "kv").stdout.splitlines()
    assert kv[3:] == ["k1\tv1", "k2\tv2"]
    recs = [
        orjson.loads(x)
        for x in cli("consume", "t", "--from-beginning", "-n", "5", "--json").stdout.splitlines()
    ]
    assert [r["offset"] for r in recs] == [0, 1, 2, 3, 4]
    assert recs[3]["key"] == "k1" and recs[3]["headers"] == [["h", "1"]]
    cli("consume", "nope", "--from-beginning", "-n", "1", code=EXIT_KAFKA_ERROR)


def test_groups_lag_reset_delete(cli):
    cli("topics", "create", "t", "-p", "2")
    cli("produce", "t", input="".join(f"{i}\n" for i in range(10)))
    consumed = cli("consume", "t", "-g", "g", "--from-beginning", "-n", "10").stdout.splitlines()
    assert sorted(consumed, key=int) == [str(i) for i in range(10)]

    (g,) = js(cli("groups", "list", "--json"))
    assert g["group"] == "g" and g["state"] == "Empty"
    lag = js(cli("groups", "lag", "g", "--json"))
    assert lag["total_lag"] == 0 and len(lag["partitions"]) == 2
    table = cli("groups", "describe", "g").stdout.splitlines()
    assert table[0].startswith("Group: g  State: Empty")
    assert table[1].split()[:5] == ["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"]

    # dry run by default: the plan is printed, nothing changes
    plan = js(cli("groups", "reset-offsets", "g", "--all-topics", "--to-earliest", "--json"))
    assert {p["new_offset"] for p in plan["partitions"]} == {0} and plan["executed"] is False
    assert js(cli("groups", "lag", "g", "--json"))["total_lag"] == 0
    cli("groups", "reset-offsets", "g", "--all-topics", "--to-earliest", "--execute")
    assert js(cli("groups", "lag", "g", "--json"))["total_lag"] == 10
    ends = [p["log_end_offset"] for p in js(cli("groups", "lag", "g", "--json"))["partitions"]]
    cli("groups", "reset-offsets", "g", "--topic", "t", "--shift-by", "2", "--execute")
    # keyless records land where the producer's partitioner puts them: a partition with fewer
    # than 2 records is shifted to its end (clamped)
    assert js(cli("groups", "lag", "g", "--json"))["total_lag"] == sum(end - min(2, end) for end in ends)
    cli("groups", "reset-offsets", "g", "--topic", "t:0", "--to-latest", "--execute")
    cli(
        "groups", "reset-offsets", "g", "--topic", "t:1", "--to-offset", "1000", "--execute"
    )  # clamped to the end
    assert js(cli("groups", "lag", "g", "--json"))["total_lag"] == 0
    cli("groups", "reset-offsets", "g", "--topic", "t", "--to-datetime", "2000-01-01T00:00:00Z", "--execute")
    assert js(cli("groups", "lag", "g", "--json"))["total_lag"] == 10
    cli("groups", "reset-offsets", "g", "--topic", "t", code=2)  # no --to-*: a usage error

    cli("groups", "delete", "g")
    gone = cli("groups", "describe", "g", code=EXIT_KAFKA_ERROR)
    assert gone.stderr.startswith("error: ") and gone.stderr.count("\n") == 1


def test_kip848_group_described_through_consumer_group_describe(cli, broker):
    cli("topics", "create", "m", "-p", "2")
    cli("produce", "m", input="a\nb\nc\n")
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "modern", "group.protocol": "consumer",
         "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )  # fmt: skip
    consumer.subscribe(["m"])
    try:
        got = 0
        while got < 3:
            msg = consumer.poll(0.2)
            got += msg is not None and msg.error() is None
        consumer.commit(asynchronous=False)
        d = js(cli("groups", "describe", "modern", "--json"))
        assert d["state"] == "Stable" and len(d["members"]) == 1
        assert sorted(p["partition"] for p in d["members"][0]["partitions"]) == [0, 1]
        assert d["total_lag"] == 0 and {p["member_id"] for p in d["partitions"]} == {
            d["members"][0]["member_id"]
        }
        (g,) = js(cli("groups", "list", "--json"))
        assert g["type"] == "consumer"
    finally:
        consumer.close()


def test_cluster_describe(cli, broker):
    d = js(cli("cluster", "describe", "--json"))
    assert d["brokers"] == [{"id": 1, "host": "127.0.0.1", "port": broker.port, "rack": None}]
    assert d["cluster_id"] and d["controller_id"] == 1
    assert cli("cluster", "describe").stdout.startswith(f"Cluster: {d['cluster_id']}")


@pytest.mark.server  # connects (and is refused) on a loopback port
def test_unreachable_bootstrap_is_exit_3(unused_tcp_port):
    result = CliRunner().invoke(
        main,
        ["topics", "list", "-b", f"127.0.0.1:{unused_tcp_port}", "--timeout", "1"],
        catch_exceptions=False,
    )
    assert result.exit_code == EXIT_UNREACHABLE
    assert result.stderr.startswith("error: cannot reach") and result.stderr.count("\n") == 1


def test_consume_in_a_group_that_never_assigns_ends_at_the_join_timeout(cli, broker):
    """A member whose rebalance cannot complete (the other member will not rejoin until its
    application polls) does not wait forever when the run is meant to end."""
    cli("topics", "create", "stuck", "-p", "1")
    assigned = []
    holder = confluent_kafka.Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "held", "max.poll.interval.ms": 300000}
    )
    holder.subscribe(["stuck"], on_assign=lambda c, parts: assigned.extend(parts))
    try:
        while not assigned:
            holder.poll(0.2)
        # the holder no longer polls: it cannot revoke, so the group's next rebalance waits for it
        out = cli(
            "consume",
            "stuck",
            "-g",
            "held",
            "--idle-timeout",
            "1",
            "--join-timeout",
            "3",
            code=EXIT_KAFKA_ERROR,
        )
        assert "group 'held' assigned no partitions within 3 s" in out.stderr
    finally:
        holder.close()


def test_consume_in_a_group_with_nothing_to_assign_ends_after_its_idle_timeout(cli, broker):
    """Two members, one partition: whichever member gets nothing still ends after --idle-timeout."""
    cli("topics", "create", "one", "-p", "1")
    cli("produce", "one", input="x\n")
    first = cli("consume", "one", "-g", "pair", "--from-beginning", "-n", "1")
    assert first.stdout.splitlines() == ["x"]
    other = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "pair"})
    other.subscribe(["one"])
    stop = threading.Event()

    def keep_polling() -> None:  # the other member rejoins every rebalance the runs below cause
        while not stop.is_set():
            other.poll(0.1)

    poller = threading.Thread(target=keep_polling)
    poller.start()
    try:
        for _ in range(3):  # either member may be given the partition; every run ends
            done = cli("consume", "one", "-g", "pair", "--idle-timeout", "1", "--join-timeout", "60")
            assert done.stdout == ""
    finally:
        stop.set()
        poller.join()
        other.close()
