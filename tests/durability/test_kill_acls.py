"""Crash durability of ACLs: SIGKILL the broker (a separate process) while confluent-kafka's
AdminClient creates and deletes ACLs one at a time; after each restart every acknowledged creation
is there and every acknowledged deletion gone (``acls.json`` is fsynced before the answer). An ACL
whose request was in flight at the kill may go either way."""

from __future__ import annotations

import random
import threading
import time

from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from tests.durability.test_kill import BrokerProcess

KILLS = 6
EVERYTHING = AclBindingFilter(
    ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
)


def binding(i: int) -> AclBinding:
    return AclBinding(
        ResourceType.TOPIC,
        f"t{i}",
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )


def wait_listening(broker: BrokerProcess, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not broker.listening():
        assert time.monotonic() < deadline, "broker did not listen"
        time.sleep(0.05)


def described(bootstrap: str) -> set[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return {b.name for b in admin.describe_acls(EVERYTHING).result(timeout=30)}


class Book:
    """What the broker acknowledged: created (and not deleted since), deleted, and in flight."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.created: set[str] = set()
        self.deleted: set[str] = set()
        self.in_flight: set[str] = set()
        self.next_id = 0

    def work(self, admin: AdminClient, stop: threading.Event) -> None:
        """Create and delete ACLs one at a time until ``stop`` or the broker goes away."""
        while not stop.is_set():
            if self.created and self.rng.random() < 0.3:
                name = self.rng.choice(sorted(self.created))
                flt = AclBindingFilter(
                    ResourceType.TOPIC,
                    name,
                    ResourcePatternType.LITERAL,
                    None,
                    None,
                    AclOperation.ANY,
                    AclPermissionType.ANY,
                )
                self.created.discard(name)
                self.in_flight.add(name)
                try:
                    (fut,) = admin.delete_acls([flt]).values()
                    fut.result(timeout=5)
                except Exception:
                    return  # the broker is gone: the deletion may or may not have happened
                self.in_flight.discard(name)
                self.deleted.add(name)
            else:
                i = self.next_id
                self.next_id += 1
                self.in_flight.add(f"t{i}")
                try:
                    (fut,) = admin.create_acls([binding(i)]).values()
                    fut.result(timeout=5)
                except Exception:
                    return
                self.in_flight.discard(f"t{i}")
                self.created.add(f"t{i}")


def test_acknowledged_acl_changes_survive_sigkill(tmp_path):
    data, logs = tmp_path / "data", tmp_path / "logs"
    logs.mkdir()
    broker = BrokerProcess(data, logs, {"authorizer.class.name": "acl", "super.users": "User:ANONYMOUS"})
    book = Book(1234)
    try:
        for _kill in range(KILLS):
            broker.spawn()
            wait_listening(broker)
            present = described(broker.bootstrap)
            assert book.created <= present, f"acknowledged ACLs lost: {sorted(book.created - present)}"
            assert not (book.deleted & present), f"deleted ACLs back: {sorted(book.deleted & present)}"
            book.created |= book.in_flight & present  # what was in flight is whatever the broker kept
            book.in_flight.clear()
            admin = AdminClient({"bootstrap.servers": broker.bootstrap, "socket.timeout.ms": 2000})
            stop = threading.Event()
            t = threading.Thread(target=book.work, args=(admin, stop))
            t.start()
            time.sleep(book.rng.uniform(0.3, 1.0))
            broker.kill()
            stop.set()
            t.join(30)
            assert not t.is_alive()
        broker.spawn()
        wait_listening(broker)
        present = described(broker.bootstrap)
        assert book.created <= present and not (book.deleted & present)
        assert len(book.created) > 20, "too few acknowledged creations to mean anything"
        assert broker.terminate() == 0
    finally:
        broker.cleanup()
