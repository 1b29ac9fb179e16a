"""Startup benchmark: how long until a broker answers, as a process and as an in-process test fixture.

    python bench/startup_bench.py [--runs 10] [--fixture-runs 20] [--broker-root DIR ...]

(a) Process: ``python -m broker serve --port P --data-dir D`` (a free port chosen beforehand, a fresh
    data directory each time) is started with ``subprocess.Popen``; the clock runs from just before
    ``Popen`` until the first ApiVersions v3 response has been read (connect is retried every 2 ms).
    Median and max of ``--runs``. Bar (issue 19): median at most 100 ms. Also printed: the broker
    process's CPU time (user + system, from /proc, 10 ms ticks, averaged over the runs) at that
    moment, which a loaded machine disturbs far less than the wall clock, and for scale the bare
    interpreter's start-up (``python -c pass``), which every process start pays. With
    ``--broker-root`` (repeatable) the same is measured for other checkouts' ``broker`` package too,
    alternating run by run, e.g. a ``git archive`` of an older commit: before/after in one run;
    ``--broker-python PY`` runs those checkouts with another interpreter (e.g. a venv installed
    the way an older scripts/setup.sh did), so that the install's own start cost is compared too.
(b) Fixture: ``broker.testing.BrokerThread(tmpdir).start()`` (construction included, imports done
    beforehand), and ``stop()`` timed separately; median and max of ``--fixture-runs``. Bar: start
    median under 20 ms (stop is reported, no bar). The first start is also shown on its own: it
    pays the lazy import of the API modules, as the first broker of a test session does.

With ``PYTHONDONTWRITEBYTECODE`` set (no ``.pyc`` files), every process start compiles the broker
from source; the script says so when that is the case, and names each measured checkout whose
``broker`` modules lack an up-to-date ``.pyc`` (a comparison with it would be unfair: run
``python -m compileall broker`` there first).

Exit status 1 if a bar is missed.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from struct import Struct
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from broker.protocol.generated import api_versions, request_header  # noqa: E402
from broker.testing import BrokerThread  # noqa: E402

PROCESS_BAR_MS = 100.0
FIXTURE_BAR_MS = 20.0
_SIZE = Struct(">i")
CORRELATION_ID = 0x5EED


def api_versions_request() -> bytes:
    header = request_header.RequestHeader(
        request_api_key=18, request_api_version=3, correlation_id=CORRELATION_ID, client_id="startup-bench"
    )
    body = api_versions.ApiVersionsRequest(
        client_software_name="pykbroker-bench", client_software_version="1.0"
    )
    payload = request_header.encode_v2(header) + api_versions.encode_request_v3(body)
    return _SIZE.pack(len(payload)) + payload


REQUEST = api_versions_request()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed before a full response")
        buf += chunk
    return buf


def ask_api_versions(sock: socket.socket) -> None:
    """Send ApiVersions v3 and check the answer: our correlation id, a whole body, error code 0."""
    sock.sendall(REQUEST)
    (size,) = _SIZE.unpack(_recv_exactly(sock, 4))
    payload = _recv_exactly(sock, size)
    (corr,) = _SIZE.unpack_from(payload, 0)
    resp, end = api_versions.decode_response_v3(payload, 4)
    if corr != CORRELATION_ID or end != len(payload) or resp.error_code != 0:
        raise RuntimeError(f"bad ApiVersions response {payload[:64]!r}")


_CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid: int) -> float:
    """user + system CPU seconds of ``pid`` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


class Start(NamedTuple):
    wall: float  # seconds from Popen to the first ApiVersions response read
    cpu: float  # the broker process's CPU seconds at that moment


def time_to_first_response(
    port: int,
    data_dir: Path,
    log: Path,
    timeout: float = 10.0,
    root: Path = ROOT,
    python: str = sys.executable,
) -> Start:
    """Popen to the first ApiVersions response read, for the ``broker`` package in ``root``."""
    cmd = [python, "-m", "broker", "serve", "--port", str(port), "--data-dir", str(data_dir)]
    env = {**os.environ, "PYTHONPATH": str(root)}
    with open(log, "wb") as logf:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=logf, stderr=subprocess.STDOUT)
        try:
            deadline = t0 + timeout
            while True:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
                        ask_api_versions(s)
                        wall = time.perf_counter() - t0
                        return Start(wall, proc_cpu(proc.pid))
                except (ConnectionRefusedError, ConnectionResetError):
                    if proc.poll() is not None:
                        raise RuntimeError(f"broker exited with {proc.returncode}; see {log}") from None
                    if time.perf_counter() > deadline:
                        raise TimeoutError(f"broker did not answer within {timeout} s") from None
                    time.sleep(0.002)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def stale_bytecode(root: Path) -> list[str]:
    """The modules of ``root``'s broker package whose .pyc is missing or older than the source."""
    out = []
    for path in sorted((root / "broker").rglob("*.py")):
        cached = Path(importlib.util.cache_from_source(str(path)))
        try:
            header = cached.read_bytes()[:16]
        except OSError:
            out.append(str(path.relative_to(root)))
            continue
        flags, mtime, size = Struct("<III").unpack(header[4:16])
        st = path.stat()
        if flags == 0 and (mtime != int(st.st_mtime) & 0xFFFFFFFF or size != st.st_size & 0xFFFFFFFF):
            out.append(str(path.relative_to(root)))
    return out


def interpreter_floor(runs: int, python: str = sys.executable) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([python, "-c", "pass"], check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def fixture_times(runs: int, base: Path) -> tuple[list[float], list[float]]:
    starts, stops = [], []
    for i in range(runs):
        data_dir = base / f"fixture-{i}"
        t0 = time.perf_counter()
        bt = BrokerThread(data_dir).start()
        t1 = time.perf_counter()
        try:
            with socket.create_connection(("127.0.0.1", bt.port), timeout=5) as s:
                ask_api_versions(s)
        finally:
            t2 = time.perf_counter()
            bt.stop()
            t3 = time.perf_counter()
        starts.append(t1 - t0)
        stops.append(t3 - t2)
    return starts, stops


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.1f} ms"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10, help="process starts to time")
    ap.add_argument("--fixture-runs", type=int, default=20, help="in-process fixture starts to time")
    ap.add_argument(
        "--broker-root",
        type=Path,
        action="append",
        default=[],
        help="also time the broker package of this checkout (repeatable)",
    )
    ap.add_argument(
        "--broker-python",
        default=sys.executable,
        help="the interpreter for the --broker-root checkouts (default: this one)",
    )
    args = ap.parse_args()
    failed = []
    roots = [ROOT, *args.broker_root]
    with tempfile.TemporaryDirectory(prefix="startup-bench-") as tmp:
        base = Path(tmp)
        starts: dict[Path, list[Start]] = {r: [] for r in roots}
        for i in range(args.runs):
            for k, root in enumerate(roots):
                starts[root].append(
                    time_to_first_response(
                        free_port(),
                        base / f"data-{i}-{k}",
                        base / f"broker-{i}-{k}.log",
                        root=root,
                        python=sys.executable if root == ROOT else args.broker_python,
                    )
                )
        for root in roots:
            times = [s.wall for s in starts[root]]
            cpu = statistics.mean(s.cpu for s in starts[root])
            med = statistics.median(times)
            where = "" if root == ROOT else f"  [{root}]"
            if root == ROOT:
                ok = med * 1000 <= PROCESS_BAR_MS
                if not ok:
                    failed.append("process start")
                verdict = f"  bar: median <={PROCESS_BAR_MS:g} ms {'ok' if ok else 'MISS'}"
            else:
                verdict = ""
            print(
                f"process start -> first ApiVersions response: median {ms(med)}, max {ms(max(times))}, "
                f"broker CPU {ms(cpu)} (n={args.runs}){verdict}{where}"
            )
        print(
            f"  for scale: bare interpreter start (python -c pass): median {ms(interpreter_floor(args.runs))}"
        )
        if args.broker_root and args.broker_python != sys.executable:
            floor = interpreter_floor(args.runs, args.broker_python)
            print(f"  and of --broker-python {args.broker_python}: median {ms(floor)}")

        starts, stops = fixture_times(args.fixture_runs, base)
        med = statistics.median(starts)
        ok = med * 1000 < FIXTURE_BAR_MS
        if not ok:
            failed.append("fixture start")
        print(
            f"BrokerThread(tmpdir).start():              median {ms(med)}, max {ms(max(starts))} "
            f"(n={args.fixture_runs})  bar: median <{FIXTURE_BAR_MS:g} ms {'ok' if ok else 'MISS'}"
        )
        print(f"  the first start in this process (lazy imports of the API modules): {ms(starts[0])}")
        print(
            f"BrokerThread.stop():                       median {ms(statistics.median(stops))}, "
            f"max {ms(max(stops))} (n={args.fixture_runs})  no bar"
        )
    if sys.flags.dont_write_bytecode:
        compiled = Path(importlib.util.cache_from_source(str(ROOT / "broker" / "cli.py"))).exists()
        print(
            "note: PYTHONDONTWRITEBYTECODE is set: "
            + (
                "the broker's .pyc files compiled beforehand are used (scripts/setup.sh compiles them)"
                if compiled
                else "no .pyc files are written, so every broker process compiles the broker's modules "
                "from source (run scripts/setup.sh, or python -m compileall broker)"
            )
        )
        for root in roots:
            stale = stale_bytecode(root)
            if stale:
                print(
                    f"note: {root}: {len(stale)} broker modules have no up-to-date .pyc ({', '.join(stale[:3])}"
                    f"{', ...' if len(stale) > 3 else ''}): each start compiles them, an unfair comparison "
                    f"(python -m compileall {root / 'broker'})"
                )
    if failed:
        print("missed bars: " + ", ".join(failed))
        return 1
    print("all bars met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
