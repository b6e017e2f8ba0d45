"""FIFO queues' batches, purge and attributes as AWS answers them, through both protocols.

Sources per test: LocalStack's AWS-validated tests and snapshots
(`tests/aws/services/sqs/test_sqs.py`) and the SQS API reference; where a text is not
recorded anywhere, the test says so.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.support.fifo_support import arn_of, error_of, new_fifo_queue
from tests.support.harness import NewQueue


def entry(n: int, **fields: str) -> dict[str, str]:
    return {"Id": f"e{n}", "MessageBody": f"body-{n}", **fields}


def receive_bodies(sqs: Any, url: str) -> list[str]:
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    return [m["Body"] for m in messages]


# -- SendMessageBatch: a FIFO batch is refused whole ---------------------------------------------


def test_a_fifo_batch_with_an_entry_without_deduplication_id_fails_whole(sqs: Any) -> None:
    # test_send_batch_missing_deduplication_id_for_fifo_queue
    url = new_fifo_queue(sqs, "batch")
    entries = [
        entry(1, MessageGroupId="g", MessageDeduplicationId="d1"),
        entry(2, MessageGroupId="g"),
    ]
    with pytest.raises(ClientError) as excinfo:
        sqs.send_message_batch(QueueUrl=url, Entries=entries)
    assert error_of(excinfo) == (
        "InvalidParameterValue",
        "The queue should either have ContentBasedDeduplication enabled or "
        "MessageDeduplicationId provided explicitly",
        400,
    )
    assert receive_bodies(sqs, url) == []  # not even the valid entry was sent


def test_a_fifo_batch_with_an_entry_without_group_fails_whole(sqs: Any) -> None:
    # test_send_batch_missing_message_group_id_for_fifo_queue
    url = new_fifo_queue(sqs, "batch")
    entries = [
        entry(1, MessageGroupId="g", MessageDeduplicationId="d1"),
        entry(2, MessageDeduplicationId="d2"),
    ]
    with pytest.raises(ClientError) as excinfo:
        sqs.send_message_batch(QueueUrl=url, Entries=entries)
    assert error_of(excinfo) == (
        "InvalidParameterValue",
        "The request must contain the parameter MessageGroupId.",
        400,
    )
    assert receive_bodies(sqs, url) == []


def test_a_fifo_batch_relies_on_content_based_deduplication_when_the_queue_has_it(
    sqs: Any,
) -> None:
    url = new_fifo_queue(sqs, "batch", ContentBasedDeduplication="true")
    answer = sqs.send_message_batch(
        QueueUrl=url, Entries=[entry(1, MessageGroupId="g"), entry(2, MessageGroupId="g")]
    )
    assert [e["Id"] for e in answer["Successful"]] == ["e1", "e2"]
    assert receive_bodies(sqs, url) == ["body-1", "body-2"]


# -- PurgeQueue clears the deduplication window --------------------------------------------------


def test_a_send_after_a_purge_is_not_a_duplicate_of_one_before(sqs: Any) -> None:
    # Given a message sent with deduplication id d, then the queue purged
    url = new_fifo_queue(sqs, "purge")
    first = sqs.send_message(
        QueueUrl=url, MessageBody="before", MessageGroupId="g", MessageDeduplicationId="d"
    )
    sqs.purge_queue(QueueUrl=url)
    # When the same id is sent again
    again = sqs.send_message(
        QueueUrl=url, MessageBody="after", MessageGroupId="g", MessageDeduplicationId="d"
    )
    # Then it is a new message, and delivered
    assert again["MessageId"] != first["MessageId"]
    assert receive_bodies(sqs, url) == ["after"]


# -- SetQueueAttributes FifoQueue ----------------------------------------------------------------


def test_fifo_queue_true_on_a_fifo_queue_is_accepted(sqs: Any) -> None:
    url = new_fifo_queue(sqs, "set")
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"FifoQueue": "true"})
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["FifoQueue"])
    assert attributes["Attributes"] == {"FifoQueue": "true"}


def test_fifo_queue_false_on_a_fifo_queue_is_refused(sqs: Any) -> None:
    # LocalStack's and YDB's SQS answer this text, as AWS does
    url = new_fifo_queue(sqs, "set")
    with pytest.raises(ClientError) as excinfo:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"FifoQueue": "false"})
    assert error_of(excinfo) == (
        "InvalidAttributeValue",
        "Invalid value for the parameter FifoQueue. Reason: Modifying queue type is not supported.",
        400,
    )


@pytest.mark.parametrize("value", ["true", "false"])
def test_fifo_queue_on_a_standard_queue_is_an_unknown_attribute(
    sqs: Any, new_queue: NewQueue, value: str
) -> None:
    url = new_queue("set")
    with pytest.raises(ClientError) as excinfo:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"FifoQueue": value})
    assert error_of(excinfo) == ("InvalidAttributeName", "Unknown Attribute FifoQueue.", 400)


# -- high throughput switched on after creation --------------------------------------------------


def test_high_throughput_switched_on_later_reads_back_and_deduplicates_per_group(
    sqs: Any,
) -> None:
    # Given a FIFO queue in the default mode, sent id d in group a
    url = new_fifo_queue(sqs, "ht")
    first = sqs.send_message(
        QueueUrl=url, MessageBody="a-1", MessageGroupId="a", MessageDeduplicationId="d"
    )
    # When it is switched to high throughput
    sqs.set_queue_attributes(
        QueueUrl=url,
        Attributes={
            "DeduplicationScope": "messageGroup",
            "FifoThroughputLimit": "perMessageGroupId",
        },
    )
    names = ["DeduplicationScope", "FifoThroughputLimit"]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    assert attributes == {
        "DeduplicationScope": "messageGroup",
        "FifoThroughputLimit": "perMessageGroupId",
    }
    # Then a send is deduplicated by the scope in force when it is sent: id d again in
    # group a, twice, is one new message (the first send's entry was the queue's, not the
    # group's; no AWS recording settles this case), and id d in group b another
    again = [
        sqs.send_message(
            QueueUrl=url, MessageBody=body, MessageGroupId="a", MessageDeduplicationId="d"
        )
        for body in ("a-2", "a-3")
    ]
    other = sqs.send_message(
        QueueUrl=url, MessageBody="b-1", MessageGroupId="b", MessageDeduplicationId="d"
    )
    assert again[0]["MessageId"] == again[1]["MessageId"] != first["MessageId"]
    assert other["MessageId"] not in (first["MessageId"], again[0]["MessageId"])
    assert sorted(receive_bodies(sqs, url)) == ["a-1", "a-2", "b-1"]


# -- counts and dead-letter queues ---------------------------------------------------------------


def test_in_flight_fifo_messages_count_as_not_visible(sqs: Any) -> None:
    # Given three messages of one group and two of another, four received
    url = new_fifo_queue(sqs, "count", ContentBasedDeduplication="true")
    for body, group in [("a1", "a"), ("a2", "a"), ("a3", "a"), ("b1", "b"), ("b2", "b")]:
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId=group)
    taken = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=4)["Messages"]
    assert len(taken) == 4
    # Then four are in flight and one visible (waiting behind its group)
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    assert attributes == {
        "ApproximateNumberOfMessages": "1",
        "ApproximateNumberOfMessagesNotVisible": "4",
    }


@pytest.mark.parametrize("source_fifo", [True, False])
def test_set_queue_attributes_refuses_a_dead_letter_queue_of_the_other_type(
    sqs: Any, new_queue: NewQueue, source_fifo: bool
) -> None:
    source = new_fifo_queue(sqs, "src") if source_fifo else new_queue("src")
    dlq = new_queue("std-dlq") if source_fifo else new_fifo_queue(sqs, "fifo-dlq")
    policy = json.dumps({"deadLetterTargetArn": arn_of(dlq), "maxReceiveCount": 3})
    with pytest.raises(ClientError) as excinfo:
        sqs.set_queue_attributes(QueueUrl=source, Attributes={"RedrivePolicy": policy})
    assert error_of(excinfo) == (
        "InvalidParameterValue",
        f"Value {policy.replace(' ', '')} for parameter RedrivePolicy is invalid. Reason: "
        "Dead-letter queue must be same type of queue as the source..",
        400,
    )
