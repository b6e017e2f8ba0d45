"""FIFO message groups as AWS serves them, end to end through both protocols on real Kafka.

Each test replays a sequence AWS answered in LocalStack's AWS-validated tests
(`tests/aws/services/sqs/test_sqs.py`; the names are given per test): a group is available
while its oldest undeleted message is visible and gives its messages up to the first one in
flight; a receive then goes on to the next group; groups are served in the order they became
available, so one returning from flight queues behind those already waiting.
"""

from __future__ import annotations

import time
from typing import Any

from tests.support.fifo_support import new_fifo_queue


def send(sqs: Any, url: str, *bodies: str) -> None:
    """Send `g<k>-m<n>` bodies to group `g<k>`, in order (content-based deduplication)."""
    for body in bodies:
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId=body.split("-")[0])


def receive(sqs: Any, url: str, max_messages: int, **kwargs: Any) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=max_messages, **kwargs
    ).get("Messages", [])
    return messages


def bodies(messages: list[dict[str, Any]]) -> list[str]:
    return [m["Body"] for m in messages]


def a_queue(sqs: Any, visibility_s: int = 30) -> str:
    return new_fifo_queue(
        sqs, "groups", ContentBasedDeduplication="true", VisibilityTimeout=str(visibility_s)
    )


def test_visibility_zero_receives_leave_groups_available_and_send_them_to_the_back(
    sqs: Any,
) -> None:
    # test_fifo_receive_message_with_zero_visibility_timeout
    url = a_queue(sqs)
    send(sqs, url, "g1-m1", "g2-m1", "g2-m2", "g3-m1", "g1-m2")
    first = receive(sqs, url, 3, VisibilityTimeout=0)
    second = receive(sqs, url, 10, VisibilityTimeout=0)
    assert bodies(first) == ["g1-m1", "g1-m2", "g2-m1"]
    assert bodies(second) == ["g3-m1", "g1-m1", "g1-m2", "g2-m1", "g2-m2"]


def test_groups_returning_from_flight_queue_behind_groups_already_waiting(sqs: Any) -> None:
    # test_fifo_receive_message_visibility_timeout_shared_in_group
    url = a_queue(sqs, visibility_s=1)
    send(sqs, url, "g1-m1", "g1-m2", "g1-m3", "g1-m4", "g2-m1", "g3-m1")
    assert bodies(receive(sqs, url, 2)) == ["g1-m1", "g1-m2"]
    # the whole of g1 waits behind its in-flight messages: the next receive is g2's
    assert bodies(receive(sqs, url, 1)) == ["g2-m1"]
    time.sleep(1.5)
    again = receive(sqs, url, 10, VisibilityTimeout=0)
    assert bodies(again) == ["g3-m1", "g1-m1", "g1-m2", "g1-m3", "g1-m4", "g2-m1"]


def test_ending_one_lease_makes_that_message_and_its_group_available(sqs: Any) -> None:
    # test_fifo_message_group_visibility_after_terminate_visibility_timeout
    url = a_queue(sqs)
    send(sqs, url, "g1-m1", "g1-m2", "g2-m1")
    taken = receive(sqs, url, 2)
    assert bodies(taken) == ["g1-m1", "g1-m2"]
    sqs.change_message_visibility(
        QueueUrl=url, ReceiptHandle=taken[0]["ReceiptHandle"], VisibilityTimeout=0
    )
    assert bodies(receive(sqs, url, 3, WaitTimeSeconds=2)) == ["g2-m1", "g1-m1"]


def test_shortening_one_lease_makes_that_message_and_its_group_available(sqs: Any) -> None:
    # test_fifo_message_group_visibility_after_change_message_visibility
    url = a_queue(sqs)
    send(sqs, url, "g1-m1", "g1-m2", "g2-m1")
    taken = receive(sqs, url, 2)
    sqs.change_message_visibility(
        QueueUrl=url, ReceiptHandle=taken[0]["ReceiptHandle"], VisibilityTimeout=1
    )
    time.sleep(1.5)
    # g1-m2 keeps its 30 s lease
    assert bodies(receive(sqs, url, 3)) == ["g2-m1", "g1-m1"]


def test_extending_one_lease_hides_that_message_and_the_later_ones_only(sqs: Any) -> None:
    url = a_queue(sqs)
    send(sqs, url, "g1-m1", "g1-m2", "g1-m3")
    taken = receive(sqs, url, 3, VisibilityTimeout=1)
    assert bodies(taken) == ["g1-m1", "g1-m2", "g1-m3"]
    sqs.change_message_visibility(
        QueueUrl=url, ReceiptHandle=taken[1]["ReceiptHandle"], VisibilityTimeout=60
    )
    time.sleep(1.5)
    # g1-m1 (before the extended one) is available again; g1-m3 (after it) is not
    assert bodies(receive(sqs, url, 10)) == ["g1-m1"]


def test_a_group_whose_received_messages_were_deleted_keeps_its_place_from_its_next_send(
    sqs: Any,
) -> None:
    # test_fifo_message_group_visibility_after_delete (the second g1-m2 is a duplicate)
    url = a_queue(sqs)
    send(sqs, url, "g1-m1", "g2-m1", "g1-m2", "g2-m2", "g1-m2", "g1-m3", "g1-m4", "g3-m1")
    taken = receive(sqs, url, 2)
    assert bodies(taken) == ["g1-m1", "g1-m2"]
    for message in taken:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert bodies(receive(sqs, url, 10)) == ["g2-m1", "g2-m2", "g1-m3", "g1-m4", "g3-m1"]


def test_a_group_with_a_message_still_in_flight_stays_unavailable(sqs: Any) -> None:
    # test_fifo_message_group_visibility_after_partial_delete
    url = a_queue(sqs)
    send(sqs, url, "g1-m1", "g2-m1", "g1-m2", "g2-m2", "g1-m2", "g1-m3", "g1-m4", "g3-m1")
    taken = receive(sqs, url, 2)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=taken[0]["ReceiptHandle"])
    assert bodies(receive(sqs, url, 10)) == ["g2-m1", "g2-m2", "g3-m1"]


def test_a_receive_takes_a_group_whole_before_an_interleaved_one(sqs: Any) -> None:
    # test_fifo_receive_message_group_id_ordering
    url = a_queue(sqs)
    send(sqs, url, "g1-m1", "g2-m1", "g1-m2", "g1-m3")
    assert bodies(receive(sqs, url, 10)) == ["g1-m1", "g1-m2", "g1-m3", "g2-m1"]


def test_a_group_comes_back_in_order_after_its_timeout(sqs: Any) -> None:
    # test_fifo_messages_in_order_after_timeout
    url = a_queue(sqs, visibility_s=1)
    send(sqs, url, "g1-m0", "g1-m1", "g1-m2")
    assert bodies(receive(sqs, url, 10)) == ["g1-m0", "g1-m1", "g1-m2"]
    time.sleep(1.5)
    assert bodies(receive(sqs, url, 10)) == ["g1-m0", "g1-m1", "g1-m2"]
