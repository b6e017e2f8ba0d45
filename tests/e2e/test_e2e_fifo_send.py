"""Sending to FIFO queues end to end, through both protocols, on real Kafka.

The send rules (MessageGroupId, MessageDeduplicationId or content-based deduplication, the
id character set, no per-message delay), SequenceNumber, and deduplication within five
minutes. Texts are AWS's: AWS users' reports of SendMessage errors (DelaySeconds,
MessageGroupId and MessageDeduplicationId validation), moto and LocalStack (missing group,
missing deduplication id).
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.support.fifo_support import error_of, new_fifo_queue
from tests.support.harness import NewQueue

NO_DEDUPLICATION = (
    "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId "
    "provided explicitly"
)


def invalid_id(name: str, value: str) -> str:
    return (
        f"Value {value} for parameter {name} is invalid. Reason: {name} can only include "
        "alphanumeric and punctuation characters. 1 to 128 in length."
    )


def count_of(sqs: Any, url: str) -> int:
    attributes = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"])


def test_send_answers_a_sequence_number_that_grows_within_the_group(sqs: Any) -> None:
    # Given a FIFO queue
    url = new_fifo_queue(sqs)
    # When three messages are sent to one group
    sent = [
        sqs.send_message(
            QueueUrl=url, MessageBody=f"m{i}", MessageGroupId="g", MessageDeduplicationId=f"d{i}"
        )
        for i in range(3)
    ]
    # Then each has its own id and a 20-digit sequence number, increasing
    numbers = [s["SequenceNumber"] for s in sent]
    assert all(len(n) == 20 and n.isdigit() for n in numbers)
    assert numbers == sorted(numbers) and len(set(numbers)) == 3
    assert len({s["MessageId"] for s in sent}) == 3
    assert sent[0]["MD5OfMessageBody"] == hashlib.md5(b"m0").hexdigest()
    assert count_of(sqs, url) == 3


def test_duplicate_within_the_window_is_answered_with_the_original(sqs: Any) -> None:
    # Given a message sent with a deduplication id
    url = new_fifo_queue(sqs)
    first = sqs.send_message(
        QueueUrl=url, MessageBody="once", MessageGroupId="g", MessageDeduplicationId="same"
    )
    # When the same id is sent again, with another body and group
    again = sqs.send_message(
        QueueUrl=url, MessageBody="twice", MessageGroupId="h", MessageDeduplicationId="same"
    )
    # Then the answer names the original, and only it is in the queue
    assert again["MessageId"] == first["MessageId"]
    assert again["SequenceNumber"] == first["SequenceNumber"]
    assert again["MD5OfMessageBody"] == hashlib.md5(b"twice").hexdigest()
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
    assert [m["Body"] for m in messages["Messages"]] == ["once"]
    assert count_of(sqs, url) == 0


def test_content_based_deduplication_uses_the_body(sqs: Any) -> None:
    # Given a queue with content-based deduplication
    url = new_fifo_queue(sqs, ContentBasedDeduplication="true")
    # When one body is sent twice and another once
    first = sqs.send_message(QueueUrl=url, MessageBody="same body", MessageGroupId="g")
    again = sqs.send_message(QueueUrl=url, MessageBody="same body", MessageGroupId="g")
    other = sqs.send_message(QueueUrl=url, MessageBody="other body", MessageGroupId="g")
    # Then the repeat is the original, and the queue holds two messages
    assert again["MessageId"] == first["MessageId"]
    assert other["MessageId"] != first["MessageId"]
    assert count_of(sqs, url) == 2
    # and the deduplication id is the body's SHA-256
    received = sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=1, AttributeNames=["MessageDeduplicationId"]
    )["Messages"][0]
    assert received["Attributes"] == {
        "MessageDeduplicationId": hashlib.sha256(b"same body").hexdigest()
    }


def test_message_group_scope_deduplicates_within_a_group_only(sqs: Any) -> None:
    url = new_fifo_queue(sqs, DeduplicationScope="messageGroup")
    a = sqs.send_message(
        QueueUrl=url, MessageBody="a", MessageGroupId="a", MessageDeduplicationId="d"
    )
    b = sqs.send_message(
        QueueUrl=url, MessageBody="b", MessageGroupId="b", MessageDeduplicationId="d"
    )
    a2 = sqs.send_message(
        QueueUrl=url, MessageBody="a2", MessageGroupId="a", MessageDeduplicationId="d"
    )
    assert b["MessageId"] != a["MessageId"]
    assert a2["MessageId"] == a["MessageId"]
    assert count_of(sqs, url) == 2


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        (
            {"MessageDeduplicationId": "d"},
            ("MissingParameter", "The request must contain the parameter MessageGroupId."),
        ),
        ({"MessageGroupId": "g"}, ("InvalidParameterValue", NO_DEDUPLICATION)),
        (
            {"MessageGroupId": "has space", "MessageDeduplicationId": "d"},
            ("InvalidParameterValue", invalid_id("MessageGroupId", "has space")),
        ),
        (
            {"MessageGroupId": "g" * 129, "MessageDeduplicationId": "d"},
            ("InvalidParameterValue", invalid_id("MessageGroupId", "g" * 129)),
        ),
        (
            {"MessageGroupId": "g", "MessageDeduplicationId": "é"},
            ("InvalidParameterValue", invalid_id("MessageDeduplicationId", "é")),
        ),
        (
            {"MessageGroupId": "g", "MessageDeduplicationId": "d", "DelaySeconds": 5},
            (
                "InvalidParameterValue",
                "Value 5 for parameter DelaySeconds is invalid. Reason: The request include "
                "parameter that is not valid for this queue type.",
            ),
        ),
    ],
)
def test_send_to_fifo_queue_is_refused_when_it_breaks_a_rule(
    sqs: Any, params: dict[str, Any], expected: tuple[str, str]
) -> None:
    url = new_fifo_queue(sqs, "refused")
    with pytest.raises(ClientError) as excinfo:
        sqs.send_message(QueueUrl=url, MessageBody="x", **params)
    assert error_of(excinfo) == (*expected, 400)
    assert count_of(sqs, url) == 0


def test_longest_ids_of_punctuation_are_accepted(sqs: Any) -> None:
    url = new_fifo_queue(sqs)
    punctuation = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
    sent = sqs.send_message(
        QueueUrl=url,
        MessageBody="x",
        MessageGroupId=(punctuation * 5)[:128],
        MessageDeduplicationId="a" * 128,
    )
    received = sqs.receive_message(QueueUrl=url, AttributeNames=["MessageGroupId"])["Messages"]
    assert received[0]["MessageId"] == sent["MessageId"]
    assert received[0]["Attributes"]["MessageGroupId"] == (punctuation * 5)[:128]


def test_queue_delay_applies_to_fifo_messages(sqs: Any) -> None:
    url = new_fifo_queue(sqs, DelaySeconds="60")
    sqs.send_message(
        QueueUrl=url,
        MessageBody="x",
        MessageGroupId="g",
        MessageDeduplicationId="d",
        DelaySeconds=0,
    )
    attributes = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesDelayed"]
    )["Attributes"]
    assert attributes == {"ApproximateNumberOfMessagesDelayed": "1"}


def test_standard_queue_refuses_a_deduplication_id(sqs: Any, new_queue: NewQueue) -> None:
    url = new_queue("std")
    with pytest.raises(ClientError) as excinfo:
        sqs.send_message(QueueUrl=url, MessageBody="x", MessageDeduplicationId="d1")
    assert error_of(excinfo) == (
        "InvalidParameterValue",
        "Value d1 for parameter MessageDeduplicationId is invalid. Reason: The request include "
        "parameter that is not valid for this queue type.",
        400,
    )


def test_send_batch_to_fifo_queue_answers_each_entry(sqs: Any) -> None:
    # Given a FIFO queue and a batch: two new messages, a repeat of the first, one refused
    # (an entry without a group would fail the whole batch: test_e2e_fifo_attributes.py)
    url = new_fifo_queue(sqs)
    entries = [
        {"Id": "a", "MessageBody": "a", "MessageGroupId": "g", "MessageDeduplicationId": "da"},
        {"Id": "b", "MessageBody": "b", "MessageGroupId": "g", "MessageDeduplicationId": "db"},
        {"Id": "a2", "MessageBody": "a", "MessageGroupId": "g", "MessageDeduplicationId": "da"},
        {"Id": "bad", "MessageBody": "c", "MessageGroupId": "g g", "MessageDeduplicationId": "dc"},
    ]
    # When sent
    response = sqs.send_message_batch(QueueUrl=url, Entries=entries)
    # Then the three good entries succeed with sequence numbers, the repeat as the original
    ok = {e["Id"]: e for e in response["Successful"]}
    assert sorted(ok) == ["a", "a2", "b"]
    assert ok["a2"]["MessageId"] == ok["a"]["MessageId"]
    assert ok["a2"]["SequenceNumber"] == ok["a"]["SequenceNumber"] < ok["b"]["SequenceNumber"]
    [failed] = response["Failed"]
    assert (failed["Id"], failed["Code"], failed["SenderFault"]) == (
        "bad",
        "InvalidParameterValue",
        True,
    )
    assert failed["Message"] == (
        "Value g g for parameter MessageGroupId is invalid. Reason: MessageGroupId can only "
        "include alphanumeric and punctuation characters. 1 to 128 in length."
    )
    # and the queue holds the two messages, in batch order
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert [m["Body"] for m in messages] == ["a", "b"]


def test_readme_fifo_example(sqs: Any) -> None:
    """The FIFO example README shows (`tests/unit/test_readme_snippets.py` keeps them identical)."""
    name = f"orders-{uuid.uuid4().hex[:8]}.fifo"
    # README: begin python-fifo
    url = sqs.create_queue(
        QueueName=name,  # e.g. "orders.fifo"
        Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"},
    )["QueueUrl"]
    for event in ("created", "paid", "shipped"):
        sqs.send_message(QueueUrl=url, MessageBody=f"order 42 {event}", MessageGroupId="order-42")
    # the same body again within 5 minutes: a duplicate, answered with the original's MessageId
    sqs.send_message(QueueUrl=url, MessageBody="order 42 paid", MessageGroupId="order-42")
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    # ["order 42 created", "order 42 paid", "order 42 shipped"]: in order, the duplicate dropped
    # README: end python-fifo
    assert [m["Body"] for m in messages] == [
        "order 42 created",
        "order 42 paid",
        "order 42 shipped",
    ]
