"""Graceful shutdown: stop accepting, answer the requests in flight, flush and fsync, exit 0; a
second signal exits at once. Checked through the data found after a restart, never through timings
(timeouts are hang guards)."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from broker.log.records import iter_records, simple_batch
from broker.protocol.generated.api_versions import ApiVersionsRequest
from broker.protocol.generated.create_topics import CreatableTopic, CreateTopicsRequest
from broker.protocol.generated.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from broker.protocol.generated.offset_fetch import OffsetFetchRequest
from broker.protocol.generated.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from broker.testing import BrokerThread, running_broker
from tests.support.process import free_port, serve, unread_bytes
from tests.support.produce_consume import fetch_request
from tests.support.wire import WireClient

PRODUCE, FETCH, OFFSET_COMMIT, OFFSET_FETCH, API_VERSIONS, CREATE_TOPICS = 0, 1, 8, 9, 18, 19
GUARD = 30.0
#: A group commit this far away never happens by itself during a test: only shutdown flushes.
FAR = {"log.flush": "interval", "log.flush.interval.ms": 3_600_000}


def _produce_request(value: bytes) -> ProduceRequest:
    batch = simple_batch([value])
    return ProduceRequest(
        None, -1, 30000, [TopicProduceData("t", partition_data=[PartitionProduceData(0, batch)])]
    )


def _stored_values(port: int) -> list[bytes]:
    with WireClient(port, timeout=GUARD) as c:
        resp = c.call(FETCH, 12, fetch_request("t", min_bytes=1, max_wait_ms=0))
    records = resp.responses[0].partitions[0].records or b""
    return [value for _off, _ts, _key, value, _h, _info in iter_records(records)]


def _create_topic(port: int) -> None:
    with WireClient(port) as c:
        r = c.call(CREATE_TOPICS, 5, CreateTopicsRequest([CreatableTopic("t", 1, 1)], 5000, False))
        assert r.topics[0].error_code == 0


def _deferred(bt: BrokerThread) -> int:
    return bt.call(lambda: sum(len(c._ordered) for c in bt.broker.connections))


def test_stop_answers_a_produce_waiting_for_its_group_commit(tmp_path):
    data = tmp_path / "d"
    bt = BrokerThread(data, FAR).start()
    try:
        _create_topic(bt.port)
        with WireClient(bt.port, timeout=GUARD) as c:
            # the first group commit runs at once; the next one would wait an hour
            assert (
                c.call(PRODUCE, 9, _produce_request(b"first")).responses[0].partition_responses[0].error_code
                == 0
            )
            cid = c.send(PRODUCE, 9, _produce_request(b"in flight"))
            deadline = time.monotonic() + GUARD
            while _deferred(bt) == 0:
                assert time.monotonic() < deadline, "hang guard: the produce never arrived"
                time.sleep(0.005)
            bt.stop(timeout=GUARD)
            assert not bt._thread.is_alive()
            corr, resp = c.recv(PRODUCE, 9)  # written before the connection closed
            part = resp.responses[0].partition_responses[0]
            assert corr == cid and part.error_code == 0 and part.base_offset == 1
    finally:
        bt.stop()
    with running_broker(data) as again:
        assert _stored_values(again.port) == [b"first", b"in flight"]
        recovery = (data / "recovery-point-offset-checkpoint").read_text().split()
        assert recovery[-3:] == ["t", "0", "2"]  # everything was fsynced before the checkpoint


def _commit(offset: int) -> OffsetCommitRequest:
    part = OffsetCommitRequestPartition(partition_index=0, committed_offset=offset)
    return OffsetCommitRequest("g", -1, "", None, -1, [OffsetCommitRequestTopic("t", partitions=[part])])


def test_stop_answers_an_offset_commit_waiting_for_its_group_commit(tmp_path):
    """The coordinator's records go through the same group commit: an OffsetCommit in flight at
    shutdown is answered, and the offset is there after a restart."""
    data = tmp_path / "d"
    bt = BrokerThread(data, FAR).start()
    try:
        _create_topic(bt.port)
        with WireClient(bt.port, timeout=GUARD) as c:
            first = c.call(OFFSET_COMMIT, 8, _commit(5))
            assert first.topics[0].partitions[0].error_code == 0
            cid = c.send(OFFSET_COMMIT, 8, _commit(42))
            _wait(lambda: _deferred(bt) == 1, "the commit to be parked")
            bt.stop(timeout=GUARD)
            corr, resp = c.recv(OFFSET_COMMIT, 8)
            assert corr == cid and resp.topics[0].partitions[0].error_code == 0
    finally:
        bt.stop()
    with running_broker(data) as again, WireClient(again.port) as c:
        resp = c.call(OFFSET_FETCH, 7, OffsetFetchRequest(group_id="g", topics=None))
        assert [
            (t.name, p.partition_index, p.committed_offset) for t in resp.topics for p in t.partitions
        ] == [("t", 0, 42)]


@pytest.mark.skipif(not Path("/proc/self/net/tcp").exists(), reason="needs Linux /proc/net/tcp")
def test_while_draining_new_connections_are_refused_and_no_more_requests_read(tmp_path):
    """Shutdown waits for a produce whose group commit is held back; meanwhile the port refuses new
    clients and a request sent on an open connection is not read. Releasing the commit lets the
    produce be answered and the shutdown finish."""
    bt = BrokerThread(tmp_path / "d", FAR).start()
    stopper = None
    try:
        _create_topic(bt.port)
        with WireClient(bt.port, timeout=GUARD) as c, WireClient(bt.port, timeout=GUARD) as other:
            assert (
                c.call(PRODUCE, 9, _produce_request(b"first")).responses[0].partition_responses[0].error_code
                == 0
            )
            logs = bt.broker.logs
            real_flush_soon = logs.flush_soon
            bt.call(setattr, logs, "flush_soon", lambda: None)  # hold the group commit back
            cid = c.send(PRODUCE, 9, _produce_request(b"in flight"))
            _wait(lambda: _deferred(bt) == 1, "the produce to be parked")
            stopper = threading.Thread(target=bt.stop, args=(GUARD,))
            stopper.start()
            _wait(lambda: bt.call(lambda: not bt.broker.listener.accepting), "the shutdown to begin")
            with pytest.raises(OSError):
                socket.create_connection(("127.0.0.1", bt.port), timeout=GUARD).close()
            other.send(API_VERSIONS, 3, ApiVersionsRequest("late", "1"))  # not read any more
            late = other.sock.getsockname()[1]
            _wait(lambda: unread_bytes(os.getpid(), bt.port, late), "the late request to sit unread")
            assert stopper.is_alive()
            bt.call(setattr, logs, "flush_soon", real_flush_soon)
            corr, resp = c.recv(PRODUCE, 9)
            assert corr == cid and resp.responses[0].partition_responses[0].error_code == 0
            stopper.join(GUARD)
            assert not stopper.is_alive() and not bt._thread.is_alive()
            assert other.is_closed_by_peer(timeout=GUARD)  # closed without an answer
    finally:
        bt.stop()
        if stopper is not None:
            stopper.join(GUARD)


def _wait(cond: Any, what: str) -> None:
    deadline = time.monotonic() + GUARD
    while not cond():
        assert time.monotonic() < deadline, f"hang guard: {what}"
        time.sleep(0.005)


# ---------------------------------------------------------------- the real process


@pytest.mark.skipif(not Path("/proc/self/net/tcp").exists(), reason="needs Linux /proc/net/tcp")
def test_sigterm_answers_the_produce_in_flight_and_exits_0_with_the_data_durable(tmp_path):
    data, port = tmp_path / "d", free_port()
    proc = serve(data, port, *(f"{k}={v}" for k, v in FAR.items()))
    try:
        _create_topic(port)
        with WireClient(port, timeout=GUARD) as c:
            assert (
                c.call(PRODUCE, 9, _produce_request(b"first")).responses[0].partition_responses[0].error_code
                == 0
            )
            cid = c.send(PRODUCE, 9, _produce_request(b"in flight"))
            client_port = c.sock.getsockname()[1]
            deadline = time.monotonic() + GUARD
            while unread_bytes(proc.pid, port, client_port) != 0:  # the broker has read it
                assert time.monotonic() < deadline, "hang guard: the broker never read the produce"
                time.sleep(0.005)
            proc.send_signal(signal.SIGTERM)
            corr, resp = c.recv(PRODUCE, 9)
            part = resp.responses[0].partition_responses[0]
            assert corr == cid and part.error_code == 0 and part.base_offset == 1
            assert c.is_closed_by_peer(timeout=GUARD)
        assert proc.wait(timeout=GUARD) == 0
        err = proc.stderr.read()
        assert "broker stopped" in err and "Traceback" not in err
    finally:
        proc.kill()
        proc.wait()
    proc = serve(data, port)
    try:
        assert _stored_values(port) == [b"first", b"in flight"]
    finally:
        proc.terminate()
        assert proc.wait(timeout=GUARD) == 0


def test_second_signal_exits_at_once(tmp_path):
    """Both signals are made pending while the process is stopped, so the second one is handled
    while the graceful shutdown has only just begun."""
    port = free_port()
    proc = serve(tmp_path / "d", port)
    try:
        with WireClient(port) as c:
            assert c.call(API_VERSIONS, 3, ApiVersionsRequest("x", "1")).error_code == 0
        os.kill(proc.pid, signal.SIGSTOP)
        os.kill(proc.pid, signal.SIGTERM)
        os.kill(proc.pid, signal.SIGINT)
        os.kill(proc.pid, signal.SIGCONT)
        code = proc.wait(timeout=GUARD)
        err = proc.stderr.read()
        assert code in (128 + signal.SIGTERM, 128 + signal.SIGINT), err
        assert "exiting at once" in err and "broker stopped" not in err
    finally:
        proc.kill()
        proc.wait()
