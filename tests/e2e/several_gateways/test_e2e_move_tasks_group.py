"""Message move tasks with two gateways sharing the queues' partitions (group mode), both
protocols, on this module's own broker.

A dead-letter queue's tasks run on its home gateway, the one serving its partition 0; the
other gateway forwards Start, List and Cancel there, and the home moves the messages of every
partition, holding and removing through their owners those it does not serve. Queues here
have two partitions, so each gateway serves one of the DLQ's. Every wait is bounded polling.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from gateway.sqs.move_tasks import encode_handle
from tests.support.group_mode import receive_all, topic_of
from tests.support.harness import GatewayProcess, client_for, gateway_pair
from tests.support.harness import visible_and_in_flight as counts
from tests.support.move_tasks import (
    ALREADY_RUNNING,
    PARTITIONS,
    SECRET,
    a_dead_letter_queue_on_both_gateways,
    arn_of,
    error_of,
    eventually,
    home_and_other,
    latest_once,
    redrive_to,
    tasks_through,
)


@pytest.fixture(scope="module")
def kafka_bootstrap(own_kafka_bootstrap: str) -> str:
    return own_kafka_bootstrap


@pytest.fixture(scope="module")
def gateways(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[GatewayProcess]]:
    with gateway_pair(tmp_path_factory.mktemp, kafka_bootstrap, SECRET, PARTITIONS) as pair:
        yield pair


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
