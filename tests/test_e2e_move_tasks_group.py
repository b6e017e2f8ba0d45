"""Message move tasks with two gateways sharing the queues' partitions (group mode), both
protocols, on this module's own broker.

A dead-letter queue's tasks run on its home gateway, the one serving its partition 0; the
other gateway forwards Start, List and Cancel there, and the home moves the messages of every
partition, holding and removing through their owners those it does not serve. Queues here
have two partitions, so each gateway serves one of the DLQ's. Every wait is bounded polling.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
from botocore.exceptions import ClientError
from confluent_kafka import Consumer, TopicPartition

from gateway.move_tasks import encode_handle
from tests.support.harness import GatewayProcess, client_for, gateway_pair
from tests.support.harness import eventually as harness_eventually
from tests.support.harness import visible_and_in_flight as counts
from tests.test_e2e_move_tasks import ALREADY_RUNNING, arn_of, error_of, redrive_to
from tests.test_e2e_ownership import gateway_id, owners_of, receive_all, topic_of

SECRET = "shared-receipt-secret-of-the-move-task-tests"
PARTITIONS = 2
BOUND_S = 30.0
# How long a new queue may take to be split between the gateways (a rebalance or two), and
# how many queues are made for one that is.
SPLIT_WAIT_S = 5.0
ATTEMPTS = 5

eventually = partial(harness_eventually, timeout_s=BOUND_S)


@pytest.fixture(scope="module")
def kafka_bootstrap(own_kafka_bootstrap: str) -> str:
    return own_kafka_bootstrap


@pytest.fixture(scope="module")
def gateways(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[GatewayProcess]]:
    with gateway_pair(tmp_path_factory.mktemp, kafka_bootstrap, SECRET, PARTITIONS) as pair:
        yield pair


def home_of(gateways: list[GatewayProcess], bootstrap: str, topic: str) -> int | None:
    """Index of the gateway serving partition 0 of `topic` when each gateway serves one of
    its partitions (else None)."""
    ids = [gateway_id(g) for g in gateways]
    owners = owners_of(bootstrap, topic)
    served_by = sorted(ids.index(o.gateway) for o in owners.values() if o.gateway in ids)
    return ids.index(owners[0].gateway) if served_by == [0, 1] else None


def a_queue_split_between(
    gateways: list[GatewayProcess], client: Any, bootstrap: str, prefix: str, **create: Any
) -> tuple[str, str]:
    """(URL, topic) of a new queue each gateway serves one partition of.

    Which gateway serves a new queue's partitions is the group's choice, and it balances each
    gateway's total, not each queue: a queue subscribed by one gateway before the other may
    stay on the first when the second's share comes from another queue. Such a queue is left
    aside and another made.
    """
    for _ in range(ATTEMPTS):
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        url: str = client.create_queue(QueueName=name, **create)["QueueUrl"]
        topic = topic_of(bootstrap, name)
        deadline = time.monotonic() + SPLIT_WAIT_S
        while time.monotonic() < deadline:
            if home_of(gateways, bootstrap, topic) is not None:
                return url, topic
            time.sleep(0.1)
    raise AssertionError(f"no queue of {ATTEMPTS} split between the gateways")


def home_and_other(gateways: list[GatewayProcess], bootstrap: str, topic: str) -> tuple[int, int]:
    """(index of the gateway serving partition 0 of `topic`, index of the other)."""
    ids = [gateway_id(g) for g in gateways]
    home = ids.index(owners_of(bootstrap, topic)[0].gateway)
    return home, 1 - home


def records_per_partition(bootstrap: str, topic: str) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "test-move-task-records"})
    try:
        return [
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(PARTITIONS)
        ]
    finally:
        consumer.close()


def a_dead_letter_queue_on_both_gateways(
    gateways: list[GatewayProcess], clients: list[Any], bootstrap: str, bodies: list[str]
) -> tuple[str, str, str]:
    """A DLQ (each gateway serving one of its partitions) holding `bodies`, dead-lettered from
    a source queue with maxReceiveCount 1: (DLQ URL, its topic, source URL)."""
    a = clients[0]
    dlq, topic = a_queue_split_between(gateways, a, bootstrap, "dlq")
    source, _ = a_queue_split_between(
        gateways, a, bootstrap, "src", Attributes={"RedrivePolicy": redrive_to(dlq)}
    )
    # A standard send goes to a partition its gateway serves: through both, so that both
    # gateways dead-letter some, each to the DLQ partition it serves.
    for i, body in enumerate(bodies):
        clients[i % 2].send_message(QueueUrl=source, MessageBody=body)

    def all_dead_lettered() -> bool | None:
        for client in clients:  # the second receive of each passes maxReceiveCount 1
            client.receive_message(QueueUrl=source, MaxNumberOfMessages=10, VisibilityTimeout=0)
        return True if counts(a, dlq) == (len(bodies), 0) else None

    eventually(all_dead_lettered, f"{len(bodies)} messages in the DLQ")
    assert all(records_per_partition(bootstrap, topic)), "a DLQ partition got no message"
    return dlq, topic, source


def tasks_through(client: Any, dlq: str) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = client.list_message_move_tasks(
        SourceArn=arn_of(dlq), MaxResults=10
    ).get("Results", [])
    return results


def latest_once(client: Any, dlq: str, status: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        latest = tasks_through(client, dlq)[0]
        return latest if latest["Status"] == status else None

    return eventually(check, f"the task {status}")


def test_a_task_started_through_the_other_gateway_moves_both_partitions_back_to_the_source(
    gateways: list[GatewayProcess], kafka_bootstrap: str, protocol: str
) -> None:
    # Given ten messages dead-lettered onto both partitions of a DLQ, one per gateway
    clients = [client_for(protocol, g.endpoint) for g in gateways]
    bodies = [f"redrive-{i}" for i in range(10)]
    dlq, topic, source = a_dead_letter_queue_on_both_gateways(
        gateways, clients, kafka_bootstrap, bodies
    )
    home, other = home_and_other(gateways, kafka_bootstrap, topic)

    # When a task is started through the gateway that is not the DLQ's home
    handle = clients[other].start_message_move_task(SourceArn=arn_of(dlq))["TaskHandle"]
    task = latest_once(clients[other], dlq, "COMPLETED")

    # Then every message is back in the source once, and the DLQ is empty
    got = receive_all(clients, source, len(bodies))
    assert sorted(got) == sorted(bodies)
    assert all(len(handles) == 1 for handles in got.values())
    assert counts(clients[home], dlq) == counts(clients[other], dlq) == (0, 0)
    # And both gateways list the one task the home ran, the same
    assert handle
    assert task == {
        "Status": "COMPLETED",
        "SourceArn": arn_of(dlq),
        "ApproximateNumberOfMessagesMoved": 10,
        "ApproximateNumberOfMessagesToMove": 10,  # of both partitions
        "StartedTimestamp": task["StartedTimestamp"],
    }
    assert tasks_through(clients[home], dlq) == tasks_through(clients[other], dlq) == [task]


def test_a_running_task_is_listed_refused_a_twin_and_cancelled_through_the_other_gateway(
    gateways: list[GatewayProcess], kafka_bootstrap: str, protocol: str
) -> None:
    # Given a slow task (one message a second) over six messages on both DLQ partitions,
    # started through the home, that has moved at least one
    clients = [client_for(protocol, g.endpoint) for g in gateways]
    bodies = [f"slow-{i}" for i in range(6)]
    dlq, topic, source = a_dead_letter_queue_on_both_gateways(
        gateways, clients, kafka_bootstrap, bodies
    )
    home, other = home_and_other(gateways, kafka_bootstrap, topic)
    handle = clients[home].start_message_move_task(
        SourceArn=arn_of(dlq), MaxNumberOfMessagesPerSecond=1
    )["TaskHandle"]

    def moving() -> dict[str, Any] | None:
        latest = tasks_through(clients[other], dlq)[0]
        return latest if latest["ApproximateNumberOfMessagesMoved"] >= 1 else None

    running = eventually(moving, "a message moved")
    assert running["Status"] == "RUNNING"
    assert running["TaskHandle"] == handle
    assert running["ApproximateNumberOfMessagesToMove"] == 6

    # When another task is started through either gateway
    for client in (clients[other], clients[home]):
        with pytest.raises(ClientError) as excinfo:
            client.start_message_move_task(SourceArn=arn_of(dlq))
        # Then it is refused, the same through both
        assert error_of(excinfo) == (400, "InvalidParameterValue", ALREADY_RUNNING)

    # When the task is cancelled through the gateway that is not its home
    moved = clients[other].cancel_message_move_task(TaskHandle=handle)[
        "ApproximateNumberOfMessagesMoved"
    ]

    # Then it stops, listed the same through both, having moved some but not all
    assert moved >= 1
    cancelled = latest_once(clients[other], dlq, "CANCELLED")
    assert tasks_through(clients[home], dlq) == [cancelled]
    assert "TaskHandle" not in cancelled
    left, _ = counts(clients[other], dlq)
    assert 0 < left < 6
    assert left + cancelled["ApproximateNumberOfMessagesMoved"] == 6
    assert len(receive_all(clients, source, 6 - left)) == 6 - left
    # And it cannot be cancelled again, through either gateway
    for client in (clients[other], clients[home]):
        with pytest.raises(ClientError) as again:
            client.cancel_message_move_task(TaskHandle=handle)
        assert error_of(again)[:2] == (404, "ResourceNotFoundException")


def test_cancel_of_an_unknown_task_through_the_other_gateway_is_not_found(
    gateways: list[GatewayProcess], kafka_bootstrap: str, protocol: str
) -> None:
    # Given a DLQ, and a handle of no task of it
    clients = [client_for(protocol, g.endpoint) for g in gateways]
    name = f"dlq-{uuid.uuid4().hex[:12]}"
    dlq = clients[0].create_queue(QueueName=name)["QueueUrl"]
    clients[0].create_queue(
        QueueName=f"src-{uuid.uuid4().hex[:12]}", Attributes={"RedrivePolicy": redrive_to(dlq)}
    )
    _, other = home_and_other(gateways, kafka_bootstrap, topic_of(kafka_bootstrap, name))
    unknown = encode_handle(str(uuid.uuid4()), arn_of(dlq))

    def listed() -> list[dict[str, Any]] | None:
        try:  # once the catalog has brought the DLQ to the other gateway
            return tasks_through(clients[other], dlq)
        except ClientError:
            return None

    assert eventually(listed, "the DLQ known to the other gateway") == []

    # When it is cancelled through the gateway that is not the DLQ's home
    with pytest.raises(ClientError) as excinfo:
        clients[other].cancel_message_move_task(TaskHandle=unknown)

    # Then the home's answer comes back unchanged
    assert error_of(excinfo) == (404, "ResourceNotFoundException", "Task does not exist.")
