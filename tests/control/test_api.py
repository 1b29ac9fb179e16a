"""The control API over HTTP: the Python client, the CLI, the bearer token, 400/404 answers and the
live-state endpoints, against a broker with kafka-python clients."""

from __future__ import annotations

import json
import urllib.request

import pytest
from click.testing import CliRunner
from kafka import KafkaConsumer, KafkaProducer

from broker.cli import main
from broker.control import ControlClient
from broker.control.client import ControlError


@pytest.fixture
def bt(broker_factory):
    return broker_factory({"control.port": 0, "control.token": "s3cret"})


def test_token_is_required(bt):
    with pytest.raises(ControlError) as e:
        ControlClient(bt.control_url).rules()
    assert e.value.status == 401
    assert ControlClient(bt.control_url, token="s3cret").rules() == []


def test_bad_requests_get_400_with_choices_and_nothing_is_applied(bt):
    c = ControlClient(bt.control_url, token="s3cret")
    with pytest.raises(ControlError) as e:
        c.add_rule(api="JoinGruop", close="after")
    assert e.value.status == 400 and "JoinGroup" in e.value.body["valid"]
    with pytest.raises(ControlError) as e:
        c.add_rules([{"api": "Fetch", "delay_ms": 10}, {"api": "Fetch", "error": "NOT_AN_ERROR"}])
    assert e.value.status == 400 and "NOT_LEADER_OR_FOLLOWER" in e.value.body["valid"]
    with pytest.raises(ControlError) as e:
        c.add_rule(api="Fetch", delay_ms="soon")
    assert e.value.status == 400 and "bad duration" in e.value.body["error"]
    req = urllib.request.Request(
        bt.control_url + "/faults",
        data=b"{not json",
        method="POST",
        headers={"Authorization": "Bearer s3cret"},
    )
    with pytest.raises(urllib.error.HTTPError) as he:
        urllib.request.urlopen(req)
    assert he.value.code == 400 and "not JSON" in json.loads(he.value.read())["error"]
    assert c.rules() == []
    with pytest.raises(ControlError) as e:
        c.remove_rule(99)
    assert e.value.status == 404
    with pytest.raises(ControlError) as e:
        c.group("nobody")
    assert e.value.status == 404


def test_live_state_of_a_group_its_offsets_topics_and_connections(bt):
    bt.call(bt.broker.create_topic, "t", 2)
    producer = KafkaProducer(bootstrap_servers=bt.bootstrap)
    for i in range(5):
        producer.send("t", b"v%d" % i, partition=i % 2)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(
        "t",
        bootstrap_servers=bt.bootstrap,
        group_id="g",
        client_id="reader",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=10000,
    )
    try:
        got = 0
        for _ in consumer:
            got += 1
            if got == 5:
                break
        consumer.commit()
        c = ControlClient(bt.control_url, token="s3cret")
        (g,) = [g for g in c.groups() if g["group_id"] == "g"]
        assert (g["type"], g["state"], g["generation"]) == ("classic", "Stable".upper(), 1)
        (m,) = g["members"]
        assert m["client_id"] == "reader" and m["assignment"] == {"t": [0, 1]}
        assert c.group("g") == g
        offsets = c.offsets("g")
        assert {t: {p: o["offset"] for p, o in parts.items()} for t, parts in offsets.items()} == {
            "t": {"0": 3, "1": 2}
        }
        assert offsets["t"]["0"]["metadata"] == "" and offsets["t"]["0"]["commit_timestamp"] > 0
        (t,) = [t for t in c.topics() if t["name"] == "t"]
        assert [
            (p["partition"], p["log_start_offset"], p["log_end_offset"], p["high_watermark"])
            for p in t["partitions"]
        ] == [
            (0, 0, 3, 3),
            (1, 0, 2, 2),
        ]
        conns = c.connections()
        assert any(x["client_id"] == "reader" for x in conns)
        assert all(x["id"] > 0 and x["peer"].startswith("127.0.0.1:") for x in conns)
    finally:
        consumer.close()


def test_cli_adds_lists_and_removes_rules(bt):
    env = {"PYKBROKER_CONTROL_URL": bt.control_url, "PYKBROKER_CONTROL_TOKEN": "s3cret"}
    runner = CliRunner()
    out = runner.invoke(
        main, ["ctl", "fault", "add", "--api", "Fetch", "--delay", "2s", "--times", "1"], env=env
    )
    assert out.exit_code == 0, out.output
    rule = json.loads(out.output)
    assert rule["action"] == {"delay_ms": 2000} and rule["times"] == 1
    out = runner.invoke(
        main, ["ctl", "fault", "add", "--json", '{"api": "Produce", "error": "NO_SUCH_ERROR"}'], env=env
    )
    assert out.exit_code == 1 and "unknown error 'NO_SUCH_ERROR'" in out.output
    listed = json.loads(runner.invoke(main, ["ctl", "fault", "list"], env=env).output)
    assert [r["id"] for r in listed] == [rule["id"]]
    assert runner.invoke(main, ["ctl", "fault", "rm", str(rule["id"])], env=env).exit_code == 0
    assert json.loads(runner.invoke(main, ["ctl", "fault", "clear"], env=env).output) == 0
    assert json.loads(runner.invoke(main, ["ctl", "topics"], env=env).output) == []
    assert runner.invoke(main, ["ctl", "offsets", "nobody"], env=env).exit_code == 1


def test_control_is_off_unless_configured(broker):
    assert broker.control_url is None
    assert broker.control.rules() == []


def test_live_state_of_a_kip848_consumer_group(bt):
    import time

    from confluent_kafka import Consumer

    bt.call(bt.broker.create_topic, "t", 3)
    c = Consumer(
        {
            "bootstrap.servers": bt.bootstrap,
            "group.id": "cg",
            "group.protocol": "consumer",
            "client.id": "new",
        }
    )
    try:
        c.subscribe(["t"])
        client = ControlClient(bt.control_url, token="s3cret")
        deadline = time.monotonic() + 30
        while True:
            c.poll(0.2)
            groups = [g for g in client.groups() if g["group_id"] == "cg"]
            if groups and groups[0]["state"] == "STABLE":
                break
            assert time.monotonic() < deadline, groups
        (g,) = groups
        assert g["type"] == "consumer" and g["group_epoch"] >= 1 and g["assignment_epoch"] == g["group_epoch"]
        (m,) = g["members"]
        assert m["client_id"] == "new" and m["member_epoch"] == g["group_epoch"]
        assert m["subscribed_topic_names"] == ["t"]
        assert m["assignment"] == m["target_assignment"] == {"t": [0, 1, 2]}
        assert m["pending_revocation"] == {}
    finally:
        c.close()


def test_client_and_cli_drive_the_clock_trace_invariants_and_rebalances(bt, tmp_path):
    client = ControlClient(bt.control_url, token="s3cret")
    assert client.set_clock_mode("manual")["mode"] == "manual"
    now = client.clock()["now_ms"]
    assert client.advance("2s")["now_ms"] == now + 2000
    journal = tmp_path / "t.jsonl"
    assert client.start_trace(str(journal))["file"] == str(journal)
    assert client.stop_trace()["was"]["file"] == str(journal)
    assert client.check_invariants()["enabled"] and client.violations() == []
    assert client.report_rebalances() == client.rebalances()

    env = {"PYKBROKER_CONTROL_URL": bt.control_url, "PYKBROKER_CONTROL_TOKEN": "s3cret"}
    runner = CliRunner()
    out = runner.invoke(main, ["ctl", "clock", "--advance", "1500"], env=env)
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["now_ms"] == now + 3500
    out = runner.invoke(main, ["ctl", "clock", "--advance", "soon"], env=env)
    assert out.exit_code == 1 and "soon" in out.output  # a bad duration is refused, naming it
    assert json.loads(runner.invoke(main, ["ctl", "invariants"], env=env).output)["enabled"] is True
    assert json.loads(runner.invoke(main, ["ctl", "invariants", "--off"], env=env).output)["enabled"] is False
    assert runner.invoke(main, ["ctl", "rebalances", "--on"], env=env).exit_code == 0
    assert runner.invoke(main, ["ctl", "trace"], env=env).exit_code == 0
