"""CreateAcls, DescribeAcls and DeleteAcls compared with Apache Kafka configured with its
StandardAuthorizer (``User:ANONYMOUS``, the PLAINTEXT principal, a super user on both: the ACL APIs
themselves are compared, not refusals). Every version both serve (Kafka 4: 1-3); valid and invalid
creations, every kind of filter, deletions. Kafka answers DescribeAcls resources and DeleteAcls
matches in hash order: both answers are sorted before they are compared. Kafka's broker applies an
ACL change a moment after answering it (when it replays the controller's record): after each change
the test waits until DescribeAcls shows what that broker's own answer said changed. No difference is
allowed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from broker.dispatch.create_acls import binding
from broker.protocol.generated.create_acls import AclCreation, CreateAclsRequest
from broker.protocol.generated.delete_acls import DeleteAclsFilter, DeleteAclsRequest
from broker.protocol.generated.describe_acls import DescribeAclsRequest
from broker.protocol.primitives import Message
from broker.security.authorizer import (
    ALL,
    ALLOW,
    ALTER,
    CLUSTER,
    DENY,
    DESCRIBE,
    GROUP,
    LITERAL,
    OP_ANY,
    PERM_ANY,
    PREFIXED,
    PT_ANY,
    PT_MATCH,
    READ,
    RT_ANY,
    TOPIC,
    TRANSACTIONAL_ID,
    WRITE,
    AclBinding,
)
from tests.differential.engine import Peer, Step, diff, normalise
from tests.support.real_kafka import RealKafka

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
VERSIONS = (1, 2, 3)  # what Kafka 4 serves (v0 was removed by KIP-896)
SUPER = {"super.users": "User:ANONYMOUS"}


@pytest.fixture(scope="module")
def acl_peers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Peer, Peer]]:
    from broker.testing import running_broker

    if not RealKafka.available():
        pytest.skip("no Apache Kafka broker: run scripts/kafka.sh (scripts/test.sh does)")
    kafka = RealKafka(
        overrides={
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            **SUPER,
        }
    )
    kafka.start(tmp_path_factory.mktemp("real-kafka-acls"))
    try:
        with running_broker(
            tmp_path_factory.mktemp("ours-acls"), {"authorizer.class.name": "acl", **SUPER}
        ) as bt:
            ours, theirs = Peer("pykbroker", bt.port, 1), Peer("kafka", kafka.port, kafka.node_id)
            yield ours, theirs
            ours.close()
            theirs.close()
    finally:
        kafka.stop()


def creation(rt, name, pt, principal, host, op, perm) -> AclCreation:
    return AclCreation(rt, name, pt, principal, host, op, perm)


def describe(rt=RT_ANY, name=None, pt=PT_ANY, principal=None, host=None, op=OP_ANY, perm=PERM_ANY):
    return DescribeAclsRequest(rt, name, pt, principal, host, op, perm)


def delete_filter(rt=RT_ANY, name=None, pt=PT_ANY, principal=None, host=None, op=OP_ANY, perm=PERM_ANY):
    return DeleteAclsFilter(rt, name, pt, principal, host, op, perm)


def sorted_view(norm: Any) -> Any:
    """Hash-ordered lists of the ACL answers, sorted."""
    if isinstance(norm, dict):
        out = {k: sorted_view(v) for k, v in norm.items()}
        for key in ("resources", "acls", "matching_acls"):
            if isinstance(out.get(key), list):
                out[key] = sorted(out[key], key=repr)
        return out
    if isinstance(norm, list):
        return [sorted_view(x) for x in norm]
    return norm


CREATIONS = [
    creation(TOPIC, "t", LITERAL, "User:alice", "*", READ, ALLOW),
    creation(TOPIC, "t", LITERAL, "User:alice", "*", READ, ALLOW),  # again: kept once
    creation(TOPIC, "t-", PREFIXED, "User:*", "10.0.0.1", WRITE, DENY),
    creation(TOPIC, "*", LITERAL, "User:bob", "*", DESCRIBE, ALLOW),
    creation(GROUP, "g", PREFIXED, "User:alice", "*", ALL, ALLOW),
    creation(CLUSTER, "kafka-cluster", LITERAL, "User:bob", "*", ALTER, ALLOW),
    creation(TRANSACTIONAL_ID, "tx", LITERAL, "User:alice", "*", WRITE, ALLOW),
    # refused: INVALID_REQUEST
    creation(CLUSTER, "other", LITERAL, "User:bob", "*", ALTER, ALLOW),
    creation(TOPIC, "", LITERAL, "User:bob", "*", READ, ALLOW),
    creation(99, "x", LITERAL, "User:bob", "*", READ, ALLOW),
    creation(TOPIC, "x", LITERAL, "User:bob", "*", 99, ALLOW),
]
#: each makes Kafka's broker fail the whole request (it cannot build the binding)
NOT_BINDINGS = [
    creation(TOPIC, "x", PT_MATCH, "User:bob", "*", READ, ALLOW),
    creation(TOPIC, "x", PT_ANY, "User:bob", "*", READ, ALLOW),
    creation(RT_ANY, "x", LITERAL, "User:bob", "*", READ, ALLOW),
    creation(TOPIC, "x", LITERAL, "User:bob", "*", OP_ANY, ALLOW),
    creation(TOPIC, "x", LITERAL, "User:bob", "*", READ, PERM_ANY),
]
DESCRIBES = [
    describe(),
    describe(TOPIC),
    describe(TOPIC, "t"),
    describe(TOPIC, "t", LITERAL),
    describe(TOPIC, "t-1", PT_MATCH),
    describe(TOPIC, "t-", PREFIXED),
    describe(GROUP, "g1", PT_MATCH),
    describe(principal="User:alice"),
    describe(host="10.0.0.1"),
    describe(op=READ),
    describe(perm=DENY),
    describe(rt=99),
    describe(op=99),
]


def steps(v: int) -> list[Step]:
    out = [Step(DESCRIBE_ACLS, v, describe(), label="empty")]
    out.append(Step(CREATE_ACLS, v, CreateAclsRequest(CREATIONS), label="create"))
    for i, bad in enumerate(NOT_BINDINGS):
        body = CreateAclsRequest([creation(TOPIC, "y", LITERAL, "User:bob", "*", READ, ALLOW), bad])
        out.append(Step(CREATE_ACLS, v, body, label=f"not a binding {i}"))
    out += [Step(DESCRIBE_ACLS, v, d, label=f"describe {i}") for i, d in enumerate(DESCRIBES)]
    out.append(
        Step(
            DELETE_ACLS,
            v,
            DeleteAclsRequest(
                [
                    delete_filter(TOPIC, "t", LITERAL),
                    delete_filter(TOPIC, "t-1", PT_MATCH),  # the prefixed t- and the wildcard *
                    delete_filter(GROUP, pt=9),  # unknown pattern type: INVALID_REQUEST
                    delete_filter(op=42),  # unknown operation: INVALID_REQUEST
                    delete_filter(GROUP, "nothing"),
                ]
            ),
            label="delete",
        )
    )
    out.append(Step(DESCRIBE_ACLS, v, describe(), label="after delete"))
    out.append(Step(DELETE_ACLS, v, DeleteAclsRequest([delete_filter()]), label="delete all"))
    out.append(Step(DESCRIBE_ACLS, v, describe(), label="empty again"))
    return out


def bindings(peer: Peer) -> set[AclBinding] | None:
    """Every ACL ``peer`` describes now (None: no answer)."""
    raw = peer.send(Step(DESCRIBE_ACLS, 3, describe(), label="barrier"))
    if not isinstance(raw, Message) or raw.error_code:
        return None
    return {
        AclBinding(
            r.resource_type,
            r.resource_name,
            r.pattern_type,
            a.principal,
            a.host,
            a.operation,
            a.permission_type,
        )
        for r in raw.resources
        for a in r.acls
    }


def visible(step: Step, answer: Any) -> tuple[set[AclBinding], set[AclBinding]]:
    """What a CreateAcls or DeleteAcls ``answer`` says it changed, as (bindings created, bindings
    deleted): by the peer's own answer, not by the other peer's."""
    if step.api == CREATE_ACLS and isinstance(answer, Message):
        created = zip(step.body.creations, answer.results, strict=True)
        return {binding(c) for c, r in created if r.error_code == 0}, set()
    if step.api == DELETE_ACLS and isinstance(answer, Message):
        matched = [
            m
            for f in answer.filter_results
            if f.error_code == 0
            for m in f.matching_acls
            if m.error_code == 0
        ]
        return set(), {
            AclBinding(
                m.resource_type,
                m.resource_name,
                m.pattern_type,
                m.principal,
                m.host,
                m.operation,
                m.permission_type,
            )
            for m in matched
        }
    return set(), set()


def wait_until_visible(peer: Peer, step: Step, answer: Any, timeout: float = 10.0) -> None:
    """Kafka applies an ACL change once its broker replays the controller's metadata record, a
    moment after it answered the change: wait (up to ``timeout``) until DescribeAcls shows what the
    answer said was created and no longer shows what it said was deleted, so that the next step
    compares both brokers in the same state (a barrier on Kafka's own answer, never on ours)."""
    created, deleted = visible(step, answer)
    if not created and not deleted:
        return
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        now = bindings(peer)
        if now is not None and created <= now and not (deleted & now):
            return
        time.sleep(0.05)


@pytest.mark.parametrize("version", VERSIONS)
def test_acl_apis_answer_as_kafka(acl_peers, version):
    ours, theirs = acl_peers
    problems = []
    for step in steps(version):
        views = []
        for peer in (ours, theirs):
            raw = peer.send(step)
            wait_until_visible(peer, step, raw)
            norm = normalise(raw, peer.node_id) if isinstance(raw, Message) else raw
            views.append(sorted_view(norm))
        for d in diff(views[0], views[1]):
            problems.append(f"v{version} {step.label}: {d}")
    assert not problems, "\n".join(problems)
