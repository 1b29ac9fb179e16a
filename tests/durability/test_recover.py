"""``serve --recover``: a partition log damaged where start-up refuses (a bad batch in a non-last
segment above the recovery point) is truncated at that batch, later segments deleted, what was
dropped reported, and the broker starts and serves what survived.

The log is written by an in-process broker (topic with segment.bytes=2000, several segments) and
damaged as in test_torn_tail.py; the broker under test is a ``python -m broker serve`` subprocess.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from broker.log.batch import iter_batches
from tests.support.process import free_port

from .test_torn_tail import (
    batches_in,
    flip_bit,
    produce,
    read_all,
    segment_files,
    set_recovery_point,
    values,
    write,
)

TIMEOUT = 60.0  # hang guard only


class Served:
    """A ``serve`` subprocess; ``port`` for the helpers of test_torn_tail."""

    def __init__(self, data: Path, *args: str):
        self.port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "broker", "serve", "--port", str(self.port), "--data-dir", str(data)]
            + ["--config", "log.flush=always", *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []

    def wait_listening(self) -> None:
        deadline = time.monotonic() + TIMEOUT
        assert self.proc.stderr is not None
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                raise AssertionError("broker exited:\n" + "".join(self.lines))
            self.lines.append(line)
            if " listening on " in line:
                return
        raise AssertionError("broker did not start:\n" + "".join(self.lines))

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.communicate(timeout=TIMEOUT)


def damaged_log(broker_factory, data: Path) -> tuple[list[tuple[int, bytes]], Path, object]:
    """Twelve acknowledged batches over several segments; a bit of the second batch of the second
    segment flipped, and the recovery point back at 0 as a crash before the checkpoint leaves it."""
    b = broker_factory({"log.flush": "always"}, data)
    b.call(b.broker.create_topic, "s", 1, {"segment.bytes": "2000"})
    expected = write(b, "s", [values(f"s{i}", 3, 150) for i in range(12)])
    b.stop()
    segs = segment_files(data, "s")
    assert len(segs) >= 3, segs
    seg = segs[1]
    batch = batches_in(seg)[1]
    flip_bit(seg, batch.position + batch.size - 5, 2)
    set_recovery_point(data, "s", 0)
    return expected, seg, batch


def test_start_up_refuses_a_damaged_log_naming_file_byte_and_offset(broker_factory, tmp_path):
    data = tmp_path / "d"
    _expected, seg, batch = damaged_log(broker_factory, data)
    size = seg.stat().st_size
    proc = subprocess.run(
        [sys.executable, "-m", "broker", "serve", "--port", str(free_port()), "--data-dir", str(data)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert proc.returncode == 1, proc.stderr
    assert f"error: {seg}: corrupt record batch at byte {batch.position}: CRC-32C mismatch" in proc.stderr
    assert f"truncate {seg.name} at byte {batch.position} (offset {batch.base_offset} on)" in proc.stderr
    assert "--recover" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert seg.stat().st_size == size  # nothing was changed


def test_recover_truncates_reports_and_serves_what_survived(broker_factory, tmp_path):
    data = tmp_path / "d"
    expected, seg, batch = damaged_log(broker_factory, data)
    segs = segment_files(data, "s")
    later = segs[segs.index(seg) + 1 :]
    dropped = [(o, v) for o, v in expected if o >= batch.base_offset]
    dropped_bytes = seg.stat().st_size - batch.position + sum(p.stat().st_size for p in later)
    dropped_batches = sum(len(iter_batches(p.read_bytes(), verify_crc=False)) for p in [seg, *later]) - 1

    served = Served(data, "--recover")
    try:
        served.wait_listening()
        (report,) = [line for line in served.lines if "--recover: truncated" in line]
        assert (
            f"s-0: --recover: truncated the log at {seg} byte {batch.position} (CRC-32C mismatch)" in report
        )
        assert f"dropped offsets {batch.base_offset}-{expected[-1][0]}" in report
        assert f"({dropped_batches} batches, {len(dropped)} records, {dropped_bytes} bytes;" in report
        assert all(p.name in report for p in later)
        assert re.search(rf"files: {seg.name} from byte {batch.position}", report)
        # the surviving records are served, CRC-checked, and appends continue after them
        survivors = [r for r in expected if r[0] < batch.base_offset]
        assert read_all(served, "s") == survivors
        assert produce(served, "s", [b"after"]) == batch.base_offset
        assert not any(p.exists() for p in later)
    finally:
        served.stop()

    # a plain restart afterwards needs no --recover: the log is whole again
    again = Served(data)
    try:
        again.wait_listening()
        assert read_all(again, "s") == survivors + [(batch.base_offset, b"after")]
        assert not [line for line in again.lines if "WARNING" in line]
    finally:
        again.stop()


def test_recover_changes_nothing_in_a_healthy_log(broker_factory, tmp_path):
    data = tmp_path / "d"
    b = broker_factory({"log.flush": "always"}, data)
    b.call(b.broker.create_topic, "s", 1, {"segment.bytes": "2000"})
    expected = write(b, "s", [values(f"s{i}", 3, 150) for i in range(6)])
    b.stop()
    before = {p: p.read_bytes() for p in segment_files(data, "s")}
    served = Served(data, "--recover")
    try:
        served.wait_listening()
        assert read_all(served, "s") == expected
        assert not [line for line in served.lines if "--recover" in line]
    finally:
        served.stop()
    assert {p: p.read_bytes() for p in segment_files(data, "s")} == before
