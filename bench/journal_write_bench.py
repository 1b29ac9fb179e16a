"""Group-commit write benchmark: the whole machine's CPU per group commit for the three ways a commit
can be made durable -- fdatasync of each touched segment, the journal through the page cache, the
journal with direct I/O -- including the segments' write-back that the journal leaves for later.

    python bench/journal_write_bench.py [--files 1,8,100] [--commit-bytes 600000] [--commits 400]
                                        [--rounds 3] [--dir DIR]

Each commit appends ``--commit-bytes`` spread over ``--files`` segment files (as a group commit of
that many partitions: ``os.write`` to each, through the page cache) and then makes them durable:

* ``segments``: fdatasync of every file on a pool of threads (``LogManager``'s ``_fsync_all``, for
  commits of fewer than ``log.flush.journal.min.partitions``);
* ``journal``: the commit's entries written to the journal (``broker.log.journal.Journal``) through
  the page cache, one fdatasync (``log.flush.journal.direct=false``);
* ``direct``: the same journal with direct I/O (the default where the file system takes it).

A journal mode leaves the segments' pages dirty; after the commits a ``syncfs`` of the file system
writes them back (the broker's background sync does that every ``log.flush.journal.sync.ms``), and
that is counted too. CPU is this process's and the kernel threads' (the write-back workers do part of
the work outside this process; other processes on a shared machine are left out); the modes alternate
and the best round of each counts. Printed per commit and as a ratio to ``segments``.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from broker.log import journal as jmod
from broker.log.journal import APPEND, Journal
from broker.log.manager import FLUSH_WORKERS, syncfs

MODES = ("segments", "journal", "direct")


def cpu_spent() -> float:
    """CPU seconds of this process (every thread) and of the kernel's threads (children of kthreadd:
    the write-back workers, the file system's journal thread), so that other processes on a shared
    machine do not count."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    ticks = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        if fields[1] == "2" or pid == "2":  # (state, ppid, ...): a kernel thread
            ticks += int(fields[11]) + int(fields[12])
    return usage.ru_utime + usage.ru_stime + ticks / os.sysconf("SC_CLK_TCK")


def one_round(
    mode: str, directory: Path, files: int, commit_bytes: int, commits: int, pool
) -> tuple[float, float]:
    """(machine CPU seconds per commit, wall seconds per commit) of ``commits`` commits in ``mode``."""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir()
    fds = [
        os.open(directory / f"{i:05d}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        for i in range(files)
    ]
    chunk = b"x" * (commit_bytes // files)
    journal = None
    if mode != "segments":
        journal = Journal(directory, direct=mode == "direct")
        journal.open()
        if mode == "direct" and not journal.direct:
            raise SystemExit(f"{directory}: the file system refuses direct I/O")
        keys = [jmod.partition_key(bytes(16), "t", i) for i in range(files)]
    os.sync()
    busy0, t0 = cpu_spent(), time.perf_counter()
    try:
        for c in range(commits):
            for fd in fds:
                os.write(fd, chunk)
            if journal is None:
                workers = min(files, FLUSH_WORKERS)
                jobs = [
                    pool.submit(lambda share: [os.fdatasync(fd) for fd in share], fds[i::workers])
                    for i in range(workers)
                ]
                for job in jobs:
                    job.result()
            else:
                bufs: list = []
                for key in keys:
                    bufs += jmod.encode_keyed(APPEND, c, key, chunk)
                journal.write(bufs)
        syncfs(directory)  # the segments' write-back the journal modes left for the background sync
        busy1, t1 = cpu_spent(), time.perf_counter()
    finally:
        for fd in fds:
            os.close(fd)
        if journal is not None:
            journal.close()
    shutil.rmtree(directory, ignore_errors=True)
    return (busy1 - busy0) / commits, (t1 - t0) / commits


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", default="1,8,100", help="segment files a commit touches (comma-separated)")
    ap.add_argument(
        "--commit-bytes", type=int, default=600_000, help="bytes appended per commit, over the files"
    )
    ap.add_argument("--commits", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", type=Path, default=None, help="where to write (default: a temporary directory)")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="journal-bench-", dir=args.dir))
    pool = ThreadPoolExecutor(FLUSH_WORKERS)
    try:
        print(
            f"{args.commit_bytes:,} bytes per commit, {args.commits} commits, best of {args.rounds} (CPU of this process and the kernel's threads, incl. write-back)"
        )
        print(
            "| files | "
            + " | ".join(f"{m}: CPU / wall per commit" for m in MODES)
            + " | direct vs segments | direct vs journal |"
        )
        print("| --- |" + " --- |" * (len(MODES) + 2))
        for files in (int(x) for x in args.files.split(",")):
            cpu: dict[str, list[float]] = {m: [] for m in MODES}
            wall: dict[str, list[float]] = {m: [] for m in MODES}
            for _ in range(args.rounds):
                for mode in MODES:
                    c, w = one_round(mode, base / mode, files, args.commit_bytes, args.commits, pool)
                    cpu[mode].append(c)
                    wall[mode].append(w)
            best = {m: min(cpu[m]) for m in MODES}
            cells = [f"{best[m] * 1e3:.3f} / {statistics.median(wall[m]) * 1e3:.3f} ms" for m in MODES]
            print(
                f"| {files:,} | "
                + " | ".join(cells)
                + f" | {best['segments'] / best['direct']:.2f}x less | {best['journal'] / best['direct']:.2f}x less |"
            )
    finally:
        pool.shutdown()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
