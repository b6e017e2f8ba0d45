"""Receiving from FIFO queues end to end, through both protocols, on real Kafka.

Strict order within a message group; nothing later from a group while one of its messages is
in flight; a receive takes a group's messages together; the FIFO system attributes;
ReceiveRequestAttemptId; dead-letter moves into a FIFO dead-letter queue in order.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.support.fifo_support import arn_of, error_of, new_fifo_queue


def send_all(sqs: Any, url: str, *bodies: str) -> dict[str, dict[str, Any]]:
    """Send each body to the group named by its first letter; returns the answers by body."""
    return {
        body: sqs.send_message(
            QueueUrl=url, MessageBody=body, MessageGroupId=body[0], MessageDeduplicationId=body
        )
        for body in bodies
    }


def receive(sqs: Any, url: str, max_messages: int = 10, **kwargs: Any) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=max_messages, **kwargs
    ).get("Messages", [])
    return messages


def bodies(messages: list[dict[str, Any]]) -> list[str]:
    return [m["Body"] for m in messages]


def test_nothing_later_from_a_group_while_its_message_is_in_flight(sqs: Any) -> None:
    # Given two groups, interleaved
    url = new_fifo_queue(sqs)
    send_all(sqs, url, "a1", "a2", "b1", "a3")
    # When the first message is received
    [head] = receive(sqs, url, 1)
    # Then the others of its group wait, while the other group's come
    assert head["Body"] == "a1"
    assert bodies(receive(sqs, url)) == ["b1"]
    assert receive(sqs, url) == []
    # until the head is deleted: then the rest of its group comes, in order
    sqs.delete_message(QueueUrl=url, ReceiptHandle=head["ReceiptHandle"])
    assert bodies(receive(sqs, url)) == ["a2", "a3"]


def test_a_receive_takes_a_groups_messages_together_in_order(sqs: Any) -> None:
    url = new_fifo_queue(sqs)
    send_all(sqs, url, "a1", "b1", "a2", "b2", "a3")
    assert bodies(receive(sqs, url, 4)) == ["a1", "a2", "a3", "b1"]


def test_a_group_comes_back_in_order_when_the_lease_ends(sqs: Any) -> None:
    # Given a group's head received with a one-second lease
    url = new_fifo_queue(sqs)
    send_all(sqs, url, "a1", "a2")
    assert bodies(receive(sqs, url, 1, VisibilityTimeout=1)) == ["a1"]
    assert receive(sqs, url) == []
    # When the lease ends
    time.sleep(1.2)
    again = receive(sqs, url, AttributeNames=["ApproximateReceiveCount"])
    # Then the head comes again, before the rest of its group
    assert [(m["Body"], m["Attributes"]["ApproximateReceiveCount"]) for m in again] == [
        ("a1", "2"),
        ("a2", "1"),
    ]


def test_visibility_zero_on_the_head_frees_its_group(sqs: Any) -> None:
    url = new_fifo_queue(sqs)
    send_all(sqs, url, "a1", "a2")
    [head] = receive(sqs, url, 1, VisibilityTimeout=600)
    sqs.change_message_visibility(
        QueueUrl=url, ReceiptHandle=head["ReceiptHandle"], VisibilityTimeout=0
    )
    assert bodies(receive(sqs, url)) == ["a1", "a2"]


def test_fifo_system_attributes_are_returned_when_asked_for(sqs: Any) -> None:
    # Given a FIFO message
    url = new_fifo_queue(sqs)
    sent = sqs.send_message(
        QueueUrl=url, MessageBody="x", MessageGroupId="grp", MessageDeduplicationId="dd"
    )
    # When received with All, then (visible again) with two names
    [every] = receive(sqs, url, AttributeNames=["All"], VisibilityTimeout=0)
    [named] = receive(sqs, url, AttributeNames=["SequenceNumber", "MessageGroupId"])
    # Then the FIFO attributes are there, the sequence number the send's
    assert {k: every["Attributes"][k] for k in ("MessageGroupId", "MessageDeduplicationId")} == {
        "MessageGroupId": "grp",
        "MessageDeduplicationId": "dd",
    }
    assert every["Attributes"]["SequenceNumber"] == sent["SequenceNumber"]
    assert {"SenderId", "SentTimestamp", "ApproximateReceiveCount"} <= set(every["Attributes"])
    assert named["Attributes"] == {
        "SequenceNumber": sent["SequenceNumber"],
        "MessageGroupId": "grp",
    }


def test_a_retried_receive_with_the_same_attempt_id_gets_the_same_messages(sqs: Any) -> None:
    # Given two messages of a group received with an attempt id
    url = new_fifo_queue(sqs)
    send_all(sqs, url, "a1", "a2")
    first = receive(sqs, url, ReceiveRequestAttemptId="attempt-1")
    # When the receive is retried with the same id, and tried with another
    retried = receive(sqs, url, ReceiveRequestAttemptId="attempt-1")
    other = receive(sqs, url, ReceiveRequestAttemptId="attempt-2")
    # Then the retry gets the same messages and receipt handles; the other, nothing (locked)
    assert bodies(first) == ["a1", "a2"]
    assert [(m["MessageId"], m["ReceiptHandle"]) for m in retried] == [
        (m["MessageId"], m["ReceiptHandle"]) for m in first
    ]
    assert other == []
    # and once they are deleted, the same id receives anew
    for message in first:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    send_all(sqs, url, "a3")
    assert bodies(receive(sqs, url, ReceiveRequestAttemptId="attempt-1")) == ["a3"]


def test_a_retried_receive_starts_the_visibility_timeout_again(sqs: Any) -> None:
    # Given a message received with an attempt id and a 2-second visibility timeout
    url = new_fifo_queue(sqs)
    send_all(sqs, url, "a1")
    began = time.monotonic()
    assert bodies(receive(sqs, url, VisibilityTimeout=2, ReceiveRequestAttemptId="r")) == ["a1"]
    # When the receive is retried 1.5 s later
    time.sleep(max(0.0, 1.5 - (time.monotonic() - began)))
    assert bodies(receive(sqs, url, VisibilityTimeout=2, ReceiveRequestAttemptId="r")) == ["a1"]
    # Then the message is still out of sight 2.5 s after the first receive, visible by 4 s
    time.sleep(max(0.0, 2.5 - (time.monotonic() - began)))
    assert receive(sqs, url) == []
    time.sleep(max(0.0, 4.0 - (time.monotonic() - began)))
    assert bodies(receive(sqs, url)) == ["a1"]


def test_receive_request_attempt_id_is_validated(sqs: Any) -> None:
    url = new_fifo_queue(sqs)
    with pytest.raises(ClientError) as excinfo:
        receive(sqs, url, ReceiveRequestAttemptId="has space")
    assert error_of(excinfo) == (
        "InvalidParameterValue",
        "Value has space for parameter ReceiveRequestAttemptId is invalid. Reason: "
        "ReceiveRequestAttemptId can only include alphanumeric and punctuation characters. "
        "1 to 128 in length.",
        400,
    )


def test_max_receive_count_moves_a_group_to_the_fifo_dead_letter_queue_in_order(
    sqs: Any,
) -> None:
    # Given a FIFO queue whose messages move to a FIFO DLQ after one receive
    dlq = new_fifo_queue(sqs, "dlq")
    policy = json.dumps({"deadLetterTargetArn": arn_of(dlq), "maxReceiveCount": 1})
    url = new_fifo_queue(sqs, "src", RedrivePolicy=policy)
    sent = send_all(sqs, url, "a1", "a2", "a3", "b1")
    # When every message was received once and its lease ended
    assert bodies(receive(sqs, url, VisibilityTimeout=1)) == ["a1", "a2", "a3", "b1"]
    time.sleep(1.2)
    assert receive(sqs, url, WaitTimeSeconds=1) == []
    # Then the DLQ holds them, each group in its order, with ids, groups and source kept
    moved = receive(sqs, dlq, AttributeNames=["All"], WaitTimeSeconds=2)
    assert bodies([m for m in moved if m["Body"][0] == "a"]) == ["a1", "a2", "a3"]
    assert sorted(bodies(moved)) == ["a1", "a2", "a3", "b1"]
    for message in moved:
        assert message["MessageId"] == sent[message["Body"]]["MessageId"]
        assert message["Attributes"]["MessageGroupId"] == message["Body"][0]
        assert message["Attributes"]["DeadLetterQueueSourceArn"] == arn_of(url)


def test_long_poll_wakes_when_the_group_is_freed(sqs: Any) -> None:
    # Given a group's head in flight and the next message waiting
    url = new_fifo_queue(sqs)
    send_all(sqs, url, "a1", "a2")
    [head] = receive(sqs, url, 1, VisibilityTimeout=600)
    timer = threading.Timer(
        1.0,
        lambda: sqs.delete_message(QueueUrl=url, ReceiptHandle=head["ReceiptHandle"]),
    )
    # When a long poll waits and the head is deleted meanwhile
    started = time.monotonic()
    timer.start()
    try:
        waited = receive(sqs, url, WaitTimeSeconds=10)
    finally:
        timer.join()
    # Then it returns the next message soon after the delete
    assert bodies(waited) == ["a2"]
    assert time.monotonic() - started < 5


def test_purge_empties_a_fifo_queue(sqs: Any) -> None:
    url = new_fifo_queue(sqs)
    send_all(sqs, url, "a1", "b1")
    receive(sqs, url, 1)
    sqs.purge_queue(QueueUrl=url)
    assert receive(sqs, url) == []
    send_all(sqs, url, "a2")
    assert bodies(receive(sqs, url)) == ["a2"]


def test_a_move_task_redrives_a_fifo_dead_letter_queue_back_in_group_order(sqs: Any) -> None:
    # Given a FIFO source whose messages went to its FIFO DLQ after one receive
    dlq = new_fifo_queue(sqs, "dlq")
    policy = json.dumps({"deadLetterTargetArn": arn_of(dlq), "maxReceiveCount": 1})
    url = new_fifo_queue(sqs, "src", RedrivePolicy=policy)
    send_all(sqs, url, "a1", "a2", "b1", "a3")
    assert len(receive(sqs, url, VisibilityTimeout=1)) == 4
    time.sleep(1.2)
    assert receive(sqs, url, WaitTimeSeconds=1) == []
    # When a move task without destination runs to its end
    sqs.start_message_move_task(SourceArn=arn_of(dlq))
    deadline = time.monotonic() + 20
    status = ""
    while status != "COMPLETED" and time.monotonic() < deadline:
        time.sleep(0.2)
        status = sqs.list_message_move_tasks(SourceArn=arn_of(dlq))["Results"][0]["Status"]
    # Then the source has them back, each group in its order, groups kept
    back = receive(sqs, url, AttributeNames=["MessageGroupId"], WaitTimeSeconds=2)
    assert status == "COMPLETED"
    assert bodies(back) == ["a1", "a2", "a3", "b1"]
    assert [m["Attributes"]["MessageGroupId"] for m in back] == ["a", "a", "a", "b"]


def test_an_expired_receipt_handle_neither_deletes_nor_changes_visibility(sqs: Any) -> None:
    # Given a message received with a one-second lease, which ended, then received again
    url = new_fifo_queue(sqs)
    send_all(sqs, url, "a1")
    [first] = receive(sqs, url, VisibilityTimeout=1)
    time.sleep(1.2)
    # When the first handle deletes it, its lease being over
    with pytest.raises(ClientError) as expired:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"])
    # Then AWS's answer for an expired handle; and the same after another receive took it
    message = (
        f"Value {first['ReceiptHandle']} for parameter ReceiptHandle is invalid. Reason: The "
        "receipt handle has expired."
    )
    assert error_of(expired) == ("InvalidParameterValue", message, 400)
    [second] = receive(sqs, url, VisibilityTimeout=60)
    with pytest.raises(ClientError) as superseded:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"])
    assert error_of(superseded) == ("InvalidParameterValue", message, 400)
    # and it cannot change the visibility either
    with pytest.raises(ClientError) as changed:
        sqs.change_message_visibility(
            QueueUrl=url, ReceiptHandle=first["ReceiptHandle"], VisibilityTimeout=0
        )
    assert error_of(changed) == ("InvalidParameterValue", message, 400)
    # and the current handle deletes it, twice without error
    sqs.delete_message(QueueUrl=url, ReceiptHandle=second["ReceiptHandle"])
    sqs.delete_message(QueueUrl=url, ReceiptHandle=second["ReceiptHandle"])
    assert receive(sqs, url) == []


def test_a_move_task_leaves_a_group_another_consumer_holds(sqs: Any) -> None:
    # Given a FIFO DLQ holding groups a and b, and a consumer of the DLQ holding a's head
    dlq = new_fifo_queue(sqs, "dlq")
    policy = json.dumps({"deadLetterTargetArn": arn_of(dlq), "maxReceiveCount": 1})
    url = new_fifo_queue(sqs, "src", RedrivePolicy=policy)
    send_all(sqs, url, "a1", "a2", "b1")
    assert len(receive(sqs, url, VisibilityTimeout=1)) == 3
    time.sleep(1.2)
    assert receive(sqs, url, WaitTimeSeconds=1) == []
    assert bodies(receive(sqs, dlq, 1, VisibilityTimeout=600, WaitTimeSeconds=2)) == ["a1"]
    # When a move task redrives the DLQ
    sqs.start_message_move_task(SourceArn=arn_of(dlq))
    deadline = time.monotonic() + 20
    status = ""
    while status != "COMPLETED" and time.monotonic() < deadline:
        time.sleep(0.2)
        status = sqs.list_message_move_tasks(SourceArn=arn_of(dlq))["Results"][0]["Status"]
    # Then only group b went back; a2 stays behind a1 in the DLQ
    assert status == "COMPLETED"
    assert bodies(receive(sqs, url, WaitTimeSeconds=2)) == ["b1"]
    counts = sqs.get_queue_attributes(
        QueueUrl=dlq,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    assert counts == {
        "ApproximateNumberOfMessages": "1",
        "ApproximateNumberOfMessagesNotVisible": "1",
    }
