"""All partition logs of the broker, and the flush policy that decides when an append is durable.

``log.flush``:

* ``always``   -- every append is fsynced before it is acknowledged (appends that arrive while an
  fsync runs share the next one);
* ``interval`` -- group commit: appends are acknowledged after the next fsync, which starts at most
  ``log.flush.interval.ms`` (5 ms) after the previous one started, so many appends share one fsync;
* ``never``    -- acknowledged at once; the OS writes the data back when it likes.

A failed write (ENOSPC, EIO) fails its Produce with KAFKA_STORAGE_ERROR and leaves nothing in the
file. A failed fsync fails every append not yet durable with KAFKA_STORAGE_ERROR and cuts those
appends from their logs (``PartitionLog.discard_unflushed``). Both are retriable: unlike Kafka, which
takes a failed log directory offline, this single-directory broker keeps serving reads and retries
writes, which succeed again once the disk does.

The fsyncs run in worker threads (the files of one group commit spread over ``FLUSH_WORKERS`` of
them), so the event loop keeps serving reads and other appends. Only
flushed data is visible to consumers (the high watermark), so a consumer never sees a record that a
crash could take back.
"""

from __future__ import annotations

import asyncio
import logging
import os
import resource
import shutil
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from broker.protocol.errors import ErrorCode, KafkaError

from .cleaner import LogCleaner
from .config import LONG_MAX, LogConfig
from .partition import PartitionLog, now_ms
from .segment import SYSTEM_OPS, FileOps, OpenFiles, Segment

log = logging.getLogger(__name__)

COORDINATOR_TOPIC = "__consumer_offsets"

CHECKPOINT = "recovery-point-offset-checkpoint"
#: log start offsets moved by DeleteRecords (Kafka's file name and format)
START_CHECKPOINT = "log-start-offset-checkpoint"
PRODUCER_ID_BLOCK = "producer-id-block"
PRODUCER_ID_BLOCK_SIZE = 1000


class StorageError(KafkaError):
    def __init__(self, message: str):
        super().__init__(ErrorCode.KAFKA_STORAGE_ERROR, message)


#: threads that fsync the files of one group commit side by side (each takes every n-th file)
FLUSH_WORKERS = 32


def _fsync_each(segments: list[Segment]) -> None:
    for seg in segments:
        if not seg.closed:
            try:
                seg.flush()
            except OSError:
                if not seg.closed:  # closed meanwhile by a topic deletion: nothing to make durable
                    raise


def _fsync_all(segments: list[Segment], pool: ThreadPoolExecutor | None = None) -> None:
    """fsync every segment; with ``pool``, its threads share the files (the disk takes many fsyncs
    at once, and a thread that waits for the GIL after its fsync holds up only its own share).
    Raises the first failure, after every share has finished."""
    workers = min(len(segments), FLUSH_WORKERS) if pool is not None else 1
    if workers <= 1:
        _fsync_each(segments)
        return
    jobs = [pool.submit(_fsync_each, segments[i::workers]) for i in range(workers)]
    errors = [e for e in (job.exception() for job in jobs) if e is not None]
    if errors:
        raise errors[0]


def open_files_limit(setting: int) -> int:
    """log.max.open.files: the setting, or with 0 half the process's soft limit on open files (the
    rest is for connections and everything else), at least 64; unbounded if that limit is."""
    if setting > 0:
        return setting
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 0
    return max(64, soft // 2)


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """(topic, partition) -> durable offset from a recovery-point checkpoint file (empty if none)."""
    out: dict[tuple[str, int], int] = {}
    if not path.exists():
        return out
    for line in path.read_text().splitlines()[2:]:
        parts = line.split()
        if len(parts) == 3:
            out[(parts[0], int(parts[1]))] = int(parts[2])
    return out


class LogManager:
    """``file_ops``: the system calls segments write and sync through (tests inject disk faults)."""

    def __init__(
        self,
        data_dir: Path,
        broker_config: Any,
        file_ops: FileOps = SYSTEM_OPS,
        recover: bool = False,
        clock: Callable[[], float] | None = None,
        time_ms: Callable[[], int] | None = None,
    ):
        self.file_ops = file_ops
        #: monotonic seconds for the group-commit window (default: the event loop's clock)
        self._clock = clock
        #: the broker clock's ms (broker/clock.py): retention, segment rolls, LogAppendTime
        self.now_ms: Callable[[], int] = time_ms or now_ms
        self.data_dir = data_dir
        #: ``serve --recover``: partitions opened at start-up truncate at corruption instead of refusing
        self.recover = recover
        self.broker_config = broker_config
        self.policy: str = broker_config["log.flush"]
        self.interval = broker_config["log.flush.interval.ms"] / 1000
        self.logs: dict[tuple[str, int], PartitionLog] = {}
        self._dirty: set[PartitionLog] = set()
        self._next: asyncio.Future | None = None
        self._flushing = False
        self._scheduled: asyncio.TimerHandle | None = None
        #: when the last group commit started (monotonic seconds); None before the first, which
        #: starts at once -- a monotonic clock's zero is the machine's boot, not "long ago"
        self._last_flush_start: float | None = None
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="fsync")
        #: the threads a group commit's fsyncs are spread over (``_fsync_all``)
        self._flushers = ThreadPoolExecutor(FLUSH_WORKERS, thread_name_prefix="fsync-file")
        self._tasks: list[asyncio.Task] = []
        self.recovery_points = self._read_checkpoint()
        self.start_offsets = read_checkpoint(data_dir / START_CHECKPOINT)
        self.cleaner = LogCleaner(broker_config)
        self.cleaner.now_ms = self.now_ms
        #: log.flush=never: partitions with flush.messages / flush.ms and unflushed appends since when
        self._unflushed_since: dict[PartitionLog, float] = {}
        self._next_pid, self._pid_block_end = self._load_pid_block()
        #: every segment's open file, at most log.max.open.files of them
        self.files = OpenFiles(open_files_limit(broker_config["log.max.open.files"]))

    # ------------------------------------------------------------------ topics

    def log_config(self, overrides: dict[str, str]) -> LogConfig:
        return LogConfig.resolve(self.broker_config.log_defaults(), overrides)

    def partition_dir(self, topic: str, partition: int) -> Path:
        return self.data_dir / f"{topic}-{partition}"

    def open_partition(
        self, topic: str, partition: int, configs: dict[str, str], config: LogConfig | None = None
    ) -> PartitionLog:
        """Open (or create) one partition's log; ``config``: the topic's resolved ``configs``, when
        the caller has it (the partitions of a topic share one)."""
        key = (topic, partition)
        plog = PartitionLog(
            self.partition_dir(topic, partition),
            topic,
            partition,
            config or self.log_config(configs),
            self.recovery_points.get(key, 0),
            recover=self.recover,
            ops=self.file_ops,
            log_start_offset=self.start_offsets.get(key, 0),
            files=self.files,
        )
        self.logs[key] = plog
        if "compact" in plog.config.cleanup_policy and topic != COORDINATOR_TOPIC:
            self.cleaner.register(plog, user=True)
        return plog

    def open_topic(self, topic: str, partitions: int, configs: dict[str, str], first: int = 0) -> None:
        config = self.log_config(configs)  # resolved once: the same for every partition
        for p in range(first, partitions):
            self.open_partition(topic, p, configs, config)

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self.logs.get((topic, partition))

    def reconfigure(self, topic: str, configs: dict[str, str]) -> None:
        cfg = self.log_config(configs)
        for (t, _p), plog in self.logs.items():
            if t == topic:
                plog.config = cfg
                if topic == COORDINATOR_TOPIC:  # compacted by the coordinator's own registration
                    continue
                if "compact" in cfg.cleanup_policy:
                    self.cleaner.register(plog, user=True)
                else:
                    self.cleaner.unregister(plog)

    def delete_topic(self, topic: str) -> None:
        """Close the topic's logs and remove their directories (renamed first, then deleted)."""
        for key in [k for k in self.logs if k[0] == topic]:
            plog = self.logs[key]
            suffix = f".{uuid.uuid4().hex}-delete"
            # like Kafka's logDeleteDirName: keep the whole name within the 255-byte limit
            doomed = plog.dir.with_name(plog.dir.name[: 255 - len(suffix)] + suffix)
            os.rename(plog.dir, doomed)  # only then is the partition gone from the manager
            del self.logs[key]
            self.cleaner.unregister(plog)
            self._dirty.discard(plog)
            self.recovery_points.pop(key, None)
            plog.close_for_delete()
            shutil.rmtree(doomed, ignore_errors=True)
        # a recreated topic must not inherit the old partitions' recovery points nor start offsets
        self.write_checkpoint()
        if any(t == topic for t, _p in self.start_offsets):
            self.write_start_checkpoint()

    # ------------------------------------------------------------------ durability

    def appended(self, plog: PartitionLog) -> asyncio.Future | None:
        """After an append: a future that completes once it is durable (None if it already is).

        With ``never``, the topic's flush.messages and flush.ms still ask for an fsync (in the
        background, nobody waits): once that many messages are unflushed, or by the periodic
        check when the oldest unflushed one is that old. With ``always`` and ``interval`` every
        append is fsynced before its acknowledgement, which is stricter than any flush.* value."""
        if self.policy == "never":
            plog.mark_flushed(*plog.flush_target(), durable=False)
            cfg = plog.config
            if cfg.flush_messages < LONG_MAX or cfg.flush_ms < LONG_MAX:
                self._unflushed_since.setdefault(plog, asyncio.get_running_loop().time())
                if plog.log_end_offset - plog.durable_offset >= cfg.flush_messages:
                    self._flush_in_background(plog)
            return None
        self._dirty.add(plog)
        if self._next is None:
            self._next = asyncio.get_running_loop().create_future()
        self._schedule()
        return self._next

    def _flush_in_background(self, plog: PartitionLog) -> None:
        """An fsync of ``plog`` through the group-commit machinery that no request waits for."""
        self._unflushed_since.pop(plog, None)
        self._dirty.add(plog)
        if self._next is None:
            self._next = asyncio.get_running_loop().create_future()
            self._next.add_done_callback(lambda f: f.cancelled() or f.exception())  # errors are logged
        self._schedule()

    def check_flush_ms(self) -> None:
        """log.flush=never: fsync the partitions whose oldest unflushed message is flush.ms old."""
        now = asyncio.get_running_loop().time()
        for plog, since in list(self._unflushed_since.items()):
            if plog.deleted:
                self._unflushed_since.pop(plog, None)
            elif (now - since) * 1000 >= plog.config.flush_ms:
                self._flush_in_background(plog)

    def flush_soon(self) -> None:
        """Start a group commit that is waiting for its interval now (at shutdown)."""
        if self._scheduled is not None:
            self._scheduled.cancel()
            self._scheduled = None
            self._start_flush()

    def _now(self) -> float:
        """Monotonic seconds for the group-commit window: the injected clock, else the loop's."""
        return self._clock() if self._clock is not None else asyncio.get_running_loop().time()

    def _schedule(self) -> None:
        if self._flushing or self._scheduled is not None or self._next is None:
            return
        loop = asyncio.get_running_loop()
        delay = 0.0
        if self.policy == "interval" and self._last_flush_start is not None:
            delay = max(0.0, self._last_flush_start + self.interval - self._now())
        self._scheduled = loop.call_later(delay, self._start_flush)

    def _start_flush(self) -> None:
        self._scheduled = None
        self._flushing = True
        loop = asyncio.get_running_loop()
        self._last_flush_start = self._now()
        fut, self._next = self._next, None
        dirty, self._dirty = self._dirty, set()
        targets = [(plog, plog.flush_target()) for plog in dirty if not plog.deleted]
        segments = list({id(t[1]): t[1] for _p, t in targets}.values())
        job = loop.run_in_executor(self._executor, _fsync_all, segments, self._flushers)
        job.add_done_callback(lambda j: self._flush_done(j, fut, targets))

    def _flush_done(self, job: asyncio.Future, fut: asyncio.Future, targets: list) -> None:
        self._flushing = False
        exc = job.exception()
        if exc is not None:
            # Whatever that fsync covered may never reach the disk (and a later fsync can succeed
            # without writing the pages whose write-back failed): every append not yet durable
            # fails -- those of this flush and those waiting for the next -- and is cut from its log.
            log.error("fsync failed: %s", exc)
            error = StorageError(f"fsync failed: {exc}")
            pending, self._next = self._next, None
            dirty, self._dirty = self._dirty, set()
            for plog in {plog for plog, _target in targets} | dirty:
                if not plog.deleted:
                    plog.discard_unflushed()
            for f in (fut, pending):
                if f is not None and not f.done():
                    f.set_exception(error)
        else:
            for plog, target in targets:
                if not plog.deleted:
                    plog.mark_flushed(*target)
            if not fut.done():
                fut.set_result(None)
        self._schedule()

    # ------------------------------------------------------------------ checkpoints

    def _read_checkpoint(self) -> dict[tuple[str, int], int]:
        return read_checkpoint(self.data_dir / CHECKPOINT)

    def write_checkpoint(self) -> None:
        """Kafka's format: version, count, then 'topic partition offset' lines."""
        # the recovery point is what is known to be on disk: below it, damage is corruption, not a torn tail
        rows = [(t, p, plog.durable_offset) for (t, p), plog in self.logs.items() if not plog.deleted]
        self.recovery_points = {(t, p): o for t, p, o in rows}
        body = "0\n" + f"{len(rows)}\n" + "".join(f"{t} {p} {o}\n" for t, p, o in rows)
        _atomic_write(self.data_dir / CHECKPOINT, body.encode())

    def write_start_checkpoint(self, moved: dict[tuple[str, int], int] | None = None) -> None:
        """The log start offsets of every partition whose start is inside its first segment (moved by
        DeleteRecords), with ``moved`` applied, in the recovery checkpoint's format; fsynced."""
        starts = {
            key: plog.log_start_offset
            for key, plog in self.logs.items()
            if not plog.deleted and plog.log_start_offset > plog.segments[0].base_offset
        }
        starts.update(moved or {})
        body = "0\n" + f"{len(starts)}\n" + "".join(f"{t} {p} {o}\n" for (t, p), o in starts.items())
        _atomic_write(self.data_dir / START_CHECKPOINT, body.encode())
        self.start_offsets = starts

    def delete_records(self, plog: PartitionLog, offset: int) -> int:
        """DeleteRecords on one partition: move its log start offset to ``offset`` (durably: the
        checkpoint is fsynced before the log serves the new start), then delete the whole segments
        below it. Returns the log start offset afterwards (the low watermark). OFFSET_OUT_OF_RANGE
        above the high watermark; KAFKA_STORAGE_ERROR when the checkpoint cannot be written."""
        plog.check_start(offset)
        if offset > plog.log_start_offset:
            try:
                self.write_start_checkpoint({(plog.topic, plog.partition): offset})
            except OSError as e:
                log.error("%s-%d: cannot write %s: %s", plog.topic, plog.partition, START_CHECKPOINT, e)
                raise StorageError(f"cannot record the new log start offset: {e}") from e
            plog.advance_start(offset)
            plog.delete_below_start()
        return plog.log_start_offset

    # ------------------------------------------------------------------ producer ids

    def _load_pid_block(self) -> tuple[int, int]:
        path = self.data_dir / PRODUCER_ID_BLOCK
        start = int(path.read_text().strip()) if path.exists() else 0
        return start, start  # the persisted block end is the first id not yet handed out

    def allocate_producer_id(self) -> int:
        if self._next_pid >= self._pid_block_end:
            self._pid_block_end = self._next_pid + PRODUCER_ID_BLOCK_SIZE
            _atomic_write(self.data_dir / PRODUCER_ID_BLOCK, str(self._pid_block_end).encode())
        pid = self._next_pid
        self._next_pid += 1
        return pid

    # ------------------------------------------------------------------ background work

    def start(self) -> None:
        self._tasks.append(asyncio.create_task(self._periodic(5.0, self.write_checkpoint)))
        interval = self.broker_config["log.retention.check.interval.ms"] / 1000
        self._tasks.append(asyncio.create_task(self._periodic(interval, self.apply_retention)))
        if self.policy == "never":
            self._tasks.append(asyncio.create_task(self._periodic(0.1, self.check_flush_ms)))
        self.cleaner.start()

    async def _periodic(self, seconds: float, fn: Any) -> None:
        while True:
            await asyncio.sleep(seconds)
            try:
                fn()
            except Exception:
                log.exception("periodic %s failed", getattr(fn, "__name__", fn))

    def apply_retention(self, now: int | None = None) -> None:
        """Apply retention at ``now`` (default: the broker clock's now; a manual clock's advance
        passes the time it moved to)."""
        if now is None:
            now = self.now_ms()
        for plog in list(self.logs.values()):
            plog.apply_retention(now)

    async def close(self) -> None:
        for t in self._tasks:
            t.cancel()
        await self.cleaner.close()
        if self._scheduled is not None:
            self._scheduled.cancel()
            self._scheduled = None
        while self._flushing:
            await asyncio.sleep(0.001)
        for plog in self.logs.values():
            plog.close()
            plog.mark_flushed(*plog.flush_target())
        if self._next is not None and not self._next.done():
            self._next.set_result(None)
        self.write_checkpoint()
        self._executor.shutdown(wait=True)
        self._flushers.shutdown(wait=True)
