"""Message move tasks as the end-to-end tests drive them: errors, redrive policies, and a
dead-letter queue split between two group-mode gateways."""

from __future__ import annotations

import json
import time
import uuid
from functools import partial
from typing import Any

import pytest
from botocore.exceptions import ClientError
from confluent_kafka import Consumer, TopicPartition

from tests.support.group_mode import BOUND_S, gateway_id, owners_of, topic_of
from tests.support.harness import ACCOUNT_ID, REGION, GatewayProcess
from tests.support.harness import eventually as harness_eventually
from tests.support.harness import visible_and_in_flight as counts

ALREADY_RUNNING = (
    "There is already a task running. Only one active task is allowed for a source queue arn at "
    "a given time."
)


def arn_of(url: str) -> str:
    return f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:{url.rsplit('/', 1)[1]}"


def error_of(excinfo: pytest.ExceptionInfo[ClientError]) -> tuple[int, str, str]:
    response = excinfo.value.response
    return (
        response["ResponseMetadata"]["HTTPStatusCode"],
        response["Error"]["Code"],
        response["Error"]["Message"],
    )


def redrive_to(dlq: str, max_receive_count: int = 1) -> str:
    return json.dumps({"deadLetterTargetArn": arn_of(dlq), "maxReceiveCount": max_receive_count})


# -- two group-mode gateways ---------------------------------------------------------------------

SECRET = "shared-receipt-secret-of-the-move-task-tests"
PARTITIONS = 2
# How long a new queue may take to be split between the gateways (a rebalance or two), and
# how many queues are made for one that is.
SPLIT_WAIT_S = 5.0
ATTEMPTS = 5

eventually = partial(harness_eventually, timeout_s=BOUND_S)


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
