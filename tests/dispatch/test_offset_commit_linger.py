"""OffsetCommits sent in one event-loop turn, through the broker's request pipeline in-process: the
coordinator appends their records as one batch (runtime.py ``run_lingering``), and what every client
sees is what it would see had each been appended alone: each answer, OffsetFetch (read-your-commit,
even in the same turn), the state after a restart, and the errors of a commit that follows one
creating its group."""

from __future__ import annotations

from broker.coordinator import OFFSETS_TOPIC
from broker.dispatch.registry import ClientInfo
from broker.protocol.errors import ErrorCode
from broker.protocol.generated.create_topics import CreatableTopic, CreateTopicsRequest
from broker.protocol.generated.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from broker.protocol.generated.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic
from tests.support.inprocess import InProcessBroker

COMMIT, FETCH, CREATE_TOPICS = 8, 9, 19


def commit_req(
    group: str, parts: dict[int, int], generation: int = -1, member: str = ""
) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member,
        group_instance_id=None,
        topics=[
            OffsetCommitRequestTopic(
                name="t",
                partitions=[
                    OffsetCommitRequestPartition(p, off, -1, committed_metadata="m" if p % 2 else "")
                    for p, off in parts.items()
                ],
            )
        ],
    )


def fetched(node: InProcessBroker, group: str, parts: list[int]) -> dict[int, tuple[int, str | None]]:
    with node.client() as c:
        resp = c.call(
            FETCH, 7, OffsetFetchRequest(group_id=group, topics=[OffsetFetchRequestTopic("t", parts)])
        )
    return {p.partition_index: (p.committed_offset, p.metadata) for t in resp.topics for p in t.partitions}


def setup(node: InProcessBroker) -> None:
    with node.client() as c:
        c.call(CREATE_TOPICS, 5, CreateTopicsRequest([CreatableTopic("t", 4, 1, [], [])], 10000, False))
        for g in ("g1", "g2"):  # the groups exist: their next commits linger
            assert c.call(COMMIT, 8, commit_req(g, {0: 1})).topics[0].partitions[0].error_code == 0


def test_commits_of_one_turn_share_a_batch_and_read_back_as_if_alone(tmp_path):
    node = InProcessBroker(tmp_path / "d", {"log.flush": "interval"})
    try:
        setup(node)
        before = node.broker.logs.get(OFFSETS_TOPIC, 0).log_end_offset
        client = ClientInfo(peer="in-process")
        tasks = [
            node.start(COMMIT, 8, commit_req("g1", {0: 10, 1: 11}), client),
            node.start(COMMIT, 8, commit_req("g2", {2: 22}), client),
            node.start(COMMIT, 8, commit_req("g1", {0: 12, 3: 13}), client),  # a later commit wins
            node.start(
                FETCH,
                7,
                OffsetFetchRequest(group_id="g1", topics=[OffsetFetchRequestTopic("t", [0, 1])]),
                client,
            ),
        ]
        answers = [node.answer(t, COMMIT, 8) for t in tasks[:3]]
        for a in answers:
            assert all(p.error_code == 0 for t in a.topics for p in t.partitions)
        # the fetch in the same turn reads the commits before it
        same_turn = node.answer(tasks[3], FETCH, 7)
        assert {p.partition_index: p.committed_offset for p in same_turn.topics[0].partitions} == {
            0: 12,
            1: 11,
        }
        assert fetched(node, "g1", [0, 1, 3]) == {0: (12, ""), 1: (11, "m"), 3: (13, "m")}
        assert fetched(node, "g2", [2]) == {2: (22, "")}
        assert node.broker.logs.get(OFFSETS_TOPIC, 0).log_end_offset == before + 5
    finally:
        node.stop()
    again = InProcessBroker(tmp_path / "d", {"log.flush": "interval"})
    try:  # the restart replays the shared batch to the same state
        assert fetched(again, "g1", [0, 1, 3]) == {0: (12, ""), 1: (11, "m"), 3: (13, "m")}
        assert fetched(again, "g2", [2]) == {2: (22, "")}
    finally:
        again.stop()


def test_a_member_commit_after_the_commit_that_creates_its_group_in_the_same_turn(tmp_path):
    # sequentially: the simple commit makes the (empty) group, so the member's commit then gets
    # UNKNOWN_MEMBER_ID, not the ILLEGAL_GENERATION of a group that does not exist
    node = InProcessBroker(tmp_path / "d", {"log.flush": "interval"})
    try:
        setup(node)
        client = ClientInfo(peer="in-process")
        first = node.start(COMMIT, 8, commit_req("new", {0: 5}), client)
        second = node.start(COMMIT, 8, commit_req("new", {1: 6}, generation=3, member="m-1"), client)
        assert node.answer(first, COMMIT, 8).topics[0].partitions[0].error_code == 0
        code = node.answer(second, COMMIT, 8).topics[0].partitions[0].error_code
        assert code == ErrorCode.UNKNOWN_MEMBER_ID
    finally:
        node.stop()
