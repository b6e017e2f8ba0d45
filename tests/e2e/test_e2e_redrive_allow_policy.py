"""A dead-letter queue's RedriveAllowPolicy, enforced end to end through both protocols: when a
RedrivePolicy is set, and again whenever a receive would move a message."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.support.harness import ACCOUNT_ID, REGION, NewQueue

NOT_ALLOWED = "Reason: Source queue is not allowed by the dead-letter queue's RedriveAllowPolicy."


def arn_of(url_or_name: str) -> str:
    return f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:{url_or_name.rsplit('/', 1)[-1]}"


def redrive_to(dlq: str, max_receive_count: int = 1) -> str:
    return json.dumps({"deadLetterTargetArn": arn_of(dlq), "maxReceiveCount": max_receive_count})


def allow(permission: str, *sources: str) -> str:
    policy: dict[str, Any] = {"redrivePermission": permission}
    if sources:
        policy["sourceQueueArns"] = [arn_of(s) for s in sources]
    return json.dumps(policy)


def refused(excinfo: pytest.ExceptionInfo[ClientError]) -> bool:
    error = excinfo.value.response["Error"]
    return bool(error["Code"] == "InvalidParameterValue" and NOT_ALLOWED in error["Message"])


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def test_a_deny_all_dead_letter_queue_cannot_be_named_at_create_or_set(
    sqs: Any, new_queue: NewQueue
) -> None:
    # Given a DLQ that allows no source queue, and a queue without a RedrivePolicy
    dlq = new_queue("dlq", RedriveAllowPolicy=allow("denyAll"))
    source = new_queue("src")

    # When a queue is created, or changed, to dead-letter into it
    with pytest.raises(ClientError) as at_create:
        new_queue("src", RedrivePolicy=redrive_to(dlq))
    with pytest.raises(ClientError) as at_set:
        sqs.set_queue_attributes(QueueUrl=source, Attributes={"RedrivePolicy": redrive_to(dlq)})

    # Then both are refused, and the queue keeps no RedrivePolicy
    assert refused(at_create)
    assert refused(at_set)
    attributes = sqs.get_queue_attributes(QueueUrl=source, AttributeNames=["All"])["Attributes"]
    assert "RedrivePolicy" not in attributes


def test_a_by_queue_dead_letter_queue_admits_only_the_listed_sources(
    sqs: Any, new_queue: NewQueue
) -> None:
    # Given a DLQ that allows one named queue
    listed = unique("listed")
    dlq = new_queue("dlq", RedriveAllowPolicy=allow("byQueue", listed))

    # When that queue and another one name it as their DLQ
    url = sqs.create_queue(QueueName=listed, Attributes={"RedrivePolicy": redrive_to(dlq)})
    with pytest.raises(ClientError) as other:
        new_queue("other", RedrivePolicy=redrive_to(dlq))

    # Then only the listed one may
    assert url["QueueUrl"].endswith(f"/{listed}")
    assert refused(other)


def test_an_allow_all_dead_letter_queue_admits_any_source(sqs: Any, new_queue: NewQueue) -> None:
    dlq = new_queue("dlq", RedriveAllowPolicy=allow("allowAll"))
    source = new_queue("src", RedrivePolicy=redrive_to(dlq))
    attributes = sqs.get_queue_attributes(QueueUrl=source, AttributeNames=["RedrivePolicy"])
    assert json.loads(attributes["Attributes"]["RedrivePolicy"])["deadLetterTargetArn"] == arn_of(
        dlq
    )


def test_no_message_moves_to_a_dead_letter_queue_that_stopped_allowing_the_source(
    sqs: Any, new_queue: NewQueue
) -> None:
    # Given a queue that dead-letters after one receive, whose DLQ then denies every source
    dlq = new_queue("dlq")
    source = new_queue("src", RedrivePolicy=redrive_to(dlq))
    sqs.set_queue_attributes(QueueUrl=dlq, Attributes={"RedriveAllowPolicy": allow("denyAll")})
    sqs.send_message(QueueUrl=source, MessageBody="stays")

    # When the message is received past maxReceiveCount
    counts = []
    for _ in range(3):
        messages = sqs.receive_message(
            QueueUrl=source, VisibilityTimeout=0, AttributeNames=["ApproximateReceiveCount"]
        )["Messages"]
        counts.append(messages[0]["Attributes"]["ApproximateReceiveCount"])

    # Then it stays in its queue and is delivered normally; the DLQ gets nothing
    assert counts == ["1", "2", "3"]
    assert "Messages" not in sqs.receive_message(QueueUrl=dlq)
