"""The chaos of the multi-node cluster's acceptance (issue 14), shared by its client suites.

:class:`Chaos` runs one exact schedule on a cluster of 3 nodes (``cluster.nodes``), driven through
the control API, in a thread, while the test's clients produce and consume:

- every leader is shuffled every 500 ms for 10 s (:data:`SHUFFLES` shuffles, the k-th at
  ``k * 0.5`` s from the start: absolute times, so a slow call does not stretch the window);
- node 3 goes down right after the shuffle at 2 s and comes back right after the one at 5 s;
- once, right after the shuffle at 7 s, the coordinator of every watched group moves to another
  node. A move alone must not rebalance a group, so it is made when every watched group is settled
  (a classic group Stable, a consumer group Stable with every member at the group epoch); if one
  is not (it is still recovering from the node's departure), the move waits for the next tick.
  The groups' generations / epochs just before the move are kept in :attr:`Chaos.before_move`.

Throughout, the watched groups' committed offsets are read every 100 ms; one that goes back is
recorded in :attr:`Chaos.backwards`.
"""

from __future__ import annotations

import threading
import time
from typing import Any

#: the schedule, in ticks of TICK_S from the start
TICK_S = 0.5
SHUFFLES = 20
NODE_DOWN_TICK = 4
NODE_UP_TICK = 10
MOVE_TICK = 14
DOWN_NODE = 3


def group_marks(group: dict[str, Any]) -> tuple:
    """What a rebalance changes: a classic group's generation, a consumer group's group epoch and
    its members' epochs (by member id)."""
    if group["type"] == "classic":
        return ("classic", group["generation"])
    return (
        "consumer",
        group["group_epoch"],
        sorted((m["member_id"], m["member_epoch"]) for m in group["members"]),
    )


def settled(group: dict[str, Any] | None) -> bool:
    if group is None or group["state"] != "STABLE" or not group["members"]:
        return False
    if group["type"] == "classic":
        return True
    return all(m["member_epoch"] == group["group_epoch"] for m in group["members"])


class Chaos:
    """The schedule above, for the groups ``groups`` (whose offsets it watches and whose
    coordinators it moves) on the topic ``topic``. Use as a context manager; :meth:`wait` waits
    for the whole schedule."""

    def __init__(self, control: Any, groups: list[str], topic: str = "events"):
        self.control, self.groups, self.topic = control, list(groups), topic
        self.stop = threading.Event()
        self.shuffles = 0
        self.backwards: list[str] = []
        self.last: dict[tuple[str, int], int] = {}
        self.commits_seen: dict[str, int] = {g: 0 for g in self.groups}
        self.before_move: dict[str, tuple] = {}
        self.moves: list[dict[str, Any]] = []
        #: (what, seconds from the start) of every operation, and how late the tick ran
        self.log: list[tuple[str, float]] = []
        self.deferred_moves = 0
        self.failure: BaseException | None = None
        self.started = 0.0
        self.finished = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="chaos")

    def watch_offsets(self) -> None:
        for g in self.groups:
            try:
                offsets = self.control.offsets(g)
            except KeyError:  # nothing committed yet (NotFound)
                continue
            for p, committed in offsets.get(self.topic, {}).items():
                key = (g, int(p))
                if committed["offset"] < self.last.get(key, -1):
                    self.backwards.append(f"{g} partition {p}: {self.last[key]} -> {committed['offset']}")
                if committed["offset"] != self.last.get(key):
                    self.commits_seen[g] += 1
                self.last[key] = committed["offset"]

    def _note(self, what: str) -> None:
        self.log.append((what, round(time.monotonic() - self.started, 2)))

    def _try_move(self) -> bool:
        states = {g: self.control.group(g) for g in self.groups}
        if not all(settled(s) for s in states.values()):
            return False
        self.before_move = {g: group_marks(s) for g, s in states.items()}
        for g in self.groups:
            self.moves.append(self.control.move_coordinator(g))
        self._note("move coordinators")
        return True

    def _run(self) -> None:
        try:
            self.started = time.monotonic()
            moved = False
            for tick in range(1, SHUFFLES + 1):
                while not self.stop.is_set():
                    left = self.started + tick * TICK_S - time.monotonic()
                    if left <= 0:
                        break
                    self.watch_offsets()
                    self.stop.wait(min(0.1, max(left, 0)))
                if self.stop.is_set():
                    return
                self.control.shuffle_leaders()
                self.shuffles += 1
                self._note(f"shuffle {tick}")
                if tick == NODE_DOWN_TICK:
                    self.control.node_down(DOWN_NODE)
                    self._note(f"node {DOWN_NODE} down")
                if tick == NODE_UP_TICK:
                    self.control.node_up(DOWN_NODE)
                    self._note(f"node {DOWN_NODE} up")
                if tick >= MOVE_TICK and not moved and self.groups:
                    moved = self._try_move()
                    self.deferred_moves += not moved
            self.watch_offsets()
        except BaseException as e:  # noqa: BLE001 - reported by wait()/__exit__
            self.failure = e
        finally:
            self.finished.set()

    @property
    def elapsed(self) -> float:
        return self.log[-1][1] if self.log else 0.0

    def wait(self, timeout: float = 120) -> None:
        """Wait for the schedule to end; raise what went wrong in it."""
        self.finished.wait(timeout)
        if self.failure is not None:
            raise AssertionError(f"the chaos schedule failed: {self.failure!r}") from self.failure
        assert self.finished.is_set(), f"the chaos schedule did not end: {self.log}"

    def __enter__(self) -> Chaos:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        self.watch_offsets()
