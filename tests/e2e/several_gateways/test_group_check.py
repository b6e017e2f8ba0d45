"""A gateway never silently shares a cluster with gateways it cannot share it with
(`gateway/cluster/group_check.py`).

A group-mode gateway is a live member of the ingest consumer group; in the first tests a real
consumer subscribed under that group stands for one. Every gateway is a member of the
presence group; the later tests meet real gateways. The last one has one gateway and two group-mode
gateways take turns on a cluster (`gateway/cluster/sole_gateway.py`). All on a broker of the
module's own (the session's single gateway must not meet them). The harness's gateways only warn
(`KQS_SHARED_CLUSTER=warn`); these tests set the default, "refuse", where they test it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer

from gateway.cluster.group_check import SHARED_CLUSTER_EXIT
from tests.support.group_mode import gateway_id, owners_of, topic_of
from tests.support.harness import (
    GatewayProcess,
    eventually,
    json_client,
    query_client,
    visible_and_in_flight,
)
from tests.support.queues_at_once import use_queues_at_once
from topology.admin import TopicAdmin
from topology.names import INGEST_GROUP

WARNING = "other KQS gateways serve this Kafka cluster"
# The run: 24 queues of 40 messages (KQS_AT_ONCE_QUEUES, KQS_AT_ONCE_MESSAGES).
QUEUES = int(os.environ.get("KQS_AT_ONCE_QUEUES", "8"))
MESSAGES = int(os.environ.get("KQS_AT_ONCE_MESSAGES", "10"))
REFUSE = {"KQS_SHARED_CLUSTER": "refuse", "KQS_LOG_FORMAT": "json"}


@pytest.fixture(scope="module")
def kafka_bootstrap(own_kafka_bootstrap: str) -> str:
    return own_kafka_bootstrap


@pytest.fixture
def group_member(kafka_bootstrap: str) -> Iterator[str]:
    """A consumer holding a partition as a member of the ingest group; yields its client id."""
    topic = f"group-check-{uuid.uuid4().hex[:8]}"
    asyncio.run(TopicAdmin(kafka_bootstrap).create_topic(topic, 1, {}))
    client_id = f"member-{uuid.uuid4().hex[:8]}"
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "group.id": INGEST_GROUP,
            "client.id": client_id,
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])

    def joined() -> bool | None:
        consumer.poll(0.1)
        return True if consumer.assignment() else None

    try:
        eventually(joined, "the consumer's partition assignment", timeout_s=30)
        yield client_id
    finally:
        consumer.close()  # leaves the group at once


def members(bootstrap: str) -> list[str]:
    return asyncio.run(TopicAdmin(bootstrap).group_members(INGEST_GROUP))


def warnings_in(log_path: Path) -> list[dict[str, object]]:
    lines = log_path.read_text(errors="replace").splitlines()
    entries = [json.loads(line) for line in lines if line.startswith("{")]
    return [
        entry
        for entry in entries
        if WARNING in str(entry.get("msg", "")) + str(entry.get("reason", ""))
    ]


def test_the_live_members_of_the_ingest_group_are_listed(
    kafka_bootstrap: str, group_member: str
) -> None:
    assert [m for m in members(kafka_bootstrap) if m.startswith(f"{group_member}@")]


def test_an_unknown_group_has_no_members(kafka_bootstrap: str) -> None:
    admin = TopicAdmin(kafka_bootstrap)
    assert asyncio.run(admin.group_members(f"no-such-group-{uuid.uuid4().hex}")) == []


def test_a_single_gateway_beside_group_members_refuses_to_start_naming_the_setting(
    kafka_bootstrap: str, group_member: str, tmp_path: Path
) -> None:
    gateway = GatewayProcess(tmp_path / "single", kafka_bootstrap, env=REFUSE)
    with pytest.raises(RuntimeError, match="exited early"):
        gateway.start()
    assert gateway.wait() == SHARED_CLUSTER_EXIT
    found = warnings_in(gateway.log_path)
    assert len(found) == 1, gateway.log_tail()
    assert found[0]["level"] == "error"
    assert "KQS_PARTITION_OWNERSHIP=group" in str(found[0]["reason"])
    assert f"{group_member}@" in str(found[0]["reason"])


def test_a_single_gateway_beside_group_members_warns_naming_them_when_told_to(
    kafka_bootstrap: str, group_member: str, tmp_path: Path
) -> None:
    gateway = GatewayProcess(
        tmp_path / "single",
        kafka_bootstrap,
        env={"KQS_LOG_FORMAT": "json", "KQS_SHARED_CLUSTER": "warn"},
    )
    gateway.start()
    try:
        found = warnings_in(gateway.log_path)
    finally:
        gateway.stop()
    assert len(found) == 1, gateway.log_tail()
    assert found[0]["level"] == "warning"
    named = found[0]["members"]
    assert isinstance(named, list)
    assert [m for m in named if str(m).startswith(f"{group_member}@")]
    assert "KQS_PARTITION_OWNERSHIP=group" in str(found[0]["msg"])


def test_a_single_gateway_alone_on_its_cluster_does_not_warn(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    # The members of the tests above left when they closed (a LeaveGroup each).
    eventually(lambda: True if not members(kafka_bootstrap) else None, "an empty group", 10)
    gateway = GatewayProcess(tmp_path / "alone", kafka_bootstrap, env=REFUSE)
    gateway.start()
    gateway.stop()
    assert warnings_in(gateway.log_path) == []
    assert "listening" in gateway.log_path.read_text()


def test_a_gateway_restarted_after_a_crash_is_not_refused_by_its_own_membership(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Its dead membership names its own id (`<data-dir>/gateway-id`): itself, not another."""
    gateway = GatewayProcess(tmp_path / "crashing", kafka_bootstrap, env=REFUSE)
    gateway.start()
    gateway.kill()
    gateway.start()
    gateway.stop()
    assert warnings_in(gateway.log_path) == []
    assert "other gateways on this cluster" not in gateway.log_path.read_text()


def test_a_second_gateway_with_the_defaults_refuses_to_start_naming_the_first(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """The issue's measured scenario began with this start: served beside the first, the
    second delivered 780 of 960 messages a second time inside their lease."""
    first = GatewayProcess(tmp_path / "first", kafka_bootstrap, env=REFUSE)
    first.start()
    try:
        for mode in ("all", "group"):  # the default, and a group-mode gateway beside it
            second = GatewayProcess(
                tmp_path / f"second-{mode}",
                kafka_bootstrap,
                env={**REFUSE, "KQS_PARTITION_OWNERSHIP": mode},
            )
            with pytest.raises(RuntimeError, match="exited early"):
                second.start(timeout_s=60)
            assert second.wait() == SHARED_CLUSTER_EXIT
            (refused,) = warnings_in(second.log_path)
            assert gateway_id(first) in str(refused["reason"])
            assert "KQS_PARTITION_OWNERSHIP=group" in str(refused["reason"])
        # The first one never noticed: it serves on alone.
        outcome = use_queues_at_once([first.endpoint], queues=4, messages=10, prefix="alone")
        assert outcome.twice == 0 and not outcome.missing, outcome.report()
    finally:
        first.stop()


def test_gateways_that_all_share_partitions_start_side_by_side_and_deliver_nothing_twice(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """The same run as the issue's, with KQS_PARTITION_OWNERSHIP=group on both."""
    env = {
        **REFUSE,
        "KQS_PARTITION_OWNERSHIP": "group",
        "KQS_RECEIPT_SECRET": uuid.uuid4().hex,
        "KQS_PARTITIONS": "4",
    }
    pair = [GatewayProcess(tmp_path / f"group-{n}", kafka_bootstrap, env=env) for n in "ab"]
    try:
        for gateway in pair:
            gateway.start()
        outcome = use_queues_at_once([g.endpoint for g in pair], QUEUES, MESSAGES, prefix="pair")
        assert outcome.twice == 0 and not outcome.missing, outcome.report()
        assert all(warnings_in(g.log_path) == [] for g in pair)
    finally:
        for gateway in pair:
            gateway.stop()


def test_one_gateway_and_group_mode_gateways_taking_turns_serve_each_others_changes(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Each side trusted its own store when it had one: a group-mode gateway its copy of a
    partition where it was named last, one gateway its store. One gateway now names itself
    in the owners directory, and each side restores what the other served since from the
    changelog (`gateway/cluster/sole_gateway.py`)."""
    # One partition: which group-mode gateway served it last is then known
    env = {**REFUSE, "KQS_RECEIPT_SECRET": uuid.uuid4().hex, "KQS_PARTITIONS": "1"}
    group_env = {**env, "KQS_PARTITION_OWNERSHIP": "group"}
    single = GatewayProcess(tmp_path / "single", kafka_bootstrap, env=env)
    pair = [GatewayProcess(tmp_path / f"group-{n}", kafka_bootstrap, env=group_env) for n in "ab"]
    handles: dict[str, str] = {}

    # Given a queue of 10 messages sent and received (10 minutes) through one gateway (JSON)
    with running(single):
        sqs = json_client(single.endpoint)
        name = f"turns-{uuid.uuid4().hex[:8]}"
        url = sqs.create_queue(QueueName=name)["QueueUrl"]
        sqs.send_message_batch(
            QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"m{i}"} for i in range(10)]
        )
        handles.update(receive_all(sqs, url, 10))
    # which two group-mode gateways then served (Query): m0-m2 deleted, m3 and m4 visible
    with running(*pair):
        group = query_client(pair[0].endpoint)
        assert_counts(group, url, (0, 10), "the one gateway's receives, in the group")
        for body in ("m0", "m1", "m2"):
            query_client(pair[1].endpoint).delete_message(QueueUrl=url, ReceiptHandle=handles[body])
        for body in ("m3", "m4"):
            group.change_message_visibility(
                QueueUrl=url, ReceiptHandle=handles[body], VisibilityTimeout=0
            )
        assert_counts(group, url, (2, 5), "the group's changes")
    topic = topic_of(kafka_bootstrap, name)
    (last,) = [g for g in pair if gateway_id(g) == owners_of(kafka_bootstrap, topic)[0].gateway]

    # When the one gateway starts again on its data directory
    with running(single):
        sqs = json_client(single.endpoint)
        # Then it serves the group's changes, not its older store
        assert_counts(sqs, url, (2, 5), "the group's changes, at the one gateway")
        assert "rebuilt from the changelog" in single.log_path.read_text()
        # and when it deletes m5 and makes m6 visible
        sqs.delete_message(QueueUrl=url, ReceiptHandle=handles["m5"])
        sqs.change_message_visibility(
            QueueUrl=url, ReceiptHandle=handles["m6"], VisibilityTimeout=0
        )
    assert owners_of(kafka_bootstrap, topic)[0].gateway == gateway_id(single)

    # and the group-mode gateways start again on theirs, the one that served it last first
    with running(last, *[g for g in pair if g is not last]):
        # Then they serve its changes, not their own older copies
        assert_counts(query_client(pair[1].endpoint), url, (3, 3), "its changes, in the group")


@contextlib.contextmanager
def running(*gateways: GatewayProcess) -> Iterator[None]:
    try:
        for gateway in gateways:
            gateway.start()
        yield
    finally:
        for gateway in gateways:
            gateway.stop()  # a clean stop: each one's changelog is complete


def receive_all(sqs: Any, url: str, count: int) -> dict[str, str]:
    """Receive `count` messages for 10 minutes; their receipt handles by body."""
    received: dict[str, str] = {}

    def every_one() -> dict[str, str] | None:
        for message in sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600, WaitTimeSeconds=1
        ).get("Messages", []):
            received[message["Body"]] = message["ReceiptHandle"]
        return received if len(received) == count else None

    return eventually(every_one, f"the {count} messages", 30)


def assert_counts(sqs: Any, url: str, expected: tuple[int, int], what: str) -> None:
    """(visible, in flight) becomes `expected` (a gateway serves once it has restored)."""
    eventually(
        lambda: True if visible_and_in_flight(sqs, url) == expected else None,
        f"{expected} (visible, in flight): {what}",
        60,
    )
