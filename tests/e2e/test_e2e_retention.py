"""MessageRetentionPeriod end to end: an expired message is never delivered and not counted.

It takes the shortest retention SQS allows, 60 s, plus a second; one protocol is enough, as
nothing here depends on the wire format.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from tests.support.harness import GatewayProcess, json_client

COUNTERS = [
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
]


def counts_of(sqs: Any, url: str) -> list[int]:
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=COUNTERS)["Attributes"]
    return [int(attributes[name]) for name in COUNTERS]


@pytest.mark.slow
def test_messages_older_than_the_retention_period_are_never_delivered_nor_counted(
    gateway: GatewayProcess,
) -> None:
    # Given a queue keeping messages 60 s, with one message in flight, one visible and one
    # delayed past its retention
    sqs = json_client(gateway.endpoint)
    name = f"retention-{uuid.uuid4().hex[:12]}"
    url = sqs.create_queue(QueueName=name, Attributes={"MessageRetentionPeriod": "60"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="in flight")
    assert sqs.receive_message(QueueUrl=url, VisibilityTimeout=300)["Messages"]
    sqs.send_message(QueueUrl=url, MessageBody="visible")
    sqs.send_message(QueueUrl=url, MessageBody="delayed", DelaySeconds=900)
    assert counts_of(sqs, url) == [1, 1, 1]

    # When the retention period has passed
    time.sleep(61)

    # Then nothing is counted and nothing can be received
    assert counts_of(sqs, url) == [0, 0, 0]
    assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)
