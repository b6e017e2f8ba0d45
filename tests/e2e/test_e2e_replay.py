"""Message replay tasks end to end, through both protocols on real Kafka: messages deleted
long ago come back from the queue's log (gateway/sqs/replay/tasks.py)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.support.harness import GatewayProcess
from tests.support.replay import receive_all, replay_client, wait_until_ended


@pytest.fixture
def kqs(gateway: GatewayProcess, protocol: str) -> Any:
    return replay_client(protocol, gateway.endpoint)


def new_queue(kqs: Any, prefix: str, **attributes: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:12]}" + (".fifo" if "FifoQueue" in attributes else "")
    url: str = kqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    return url


def send_and_delete(kqs: Any, url: str, bodies: list[str]) -> list[dict[str, Any]]:
    """Send `bodies` (with a message attribute each), receive and delete them all; the
    send answers."""
    sent = [
        kqs.send_message(
            QueueUrl=url,
            MessageBody=body,
            MessageAttributes={"n": {"DataType": "Number", "StringValue": str(i)}},
        )
        for i, body in enumerate(bodies)
    ]
    receive_all(kqs, url, len(bodies))
    return sent


def test_deleted_messages_come_back_into_the_same_queue(kqs: Any) -> None:
    # Given a queue whose five messages were received and deleted
    url = new_queue(kqs, "replay-same")
    since_ms = int(time.time() * 1000) - 1000
    bodies = [f"body {i}" for i in range(5)]
    sent = send_and_delete(kqs, url, bodies)

    # When they are replayed from before the first was sent
    started = kqs.start_message_replay_task(QueueUrl=url, SinceTimestamp=since_ms)
    assert started["ApproximateNumberOfMessagesToReplay"] == 5
    task = wait_until_ended(kqs, url)

    # Then the task completed, and the five are back as new messages, same body, attributes
    # and MD5s, each naming its original
    assert task["Status"] == "COMPLETED"
    assert task["ApproximateNumberOfMessagesReplayed"] == 5
    back = receive_all(kqs, url, 5)
    by_body = {m["Body"]: m for m in back}
    assert sorted(by_body) == bodies
    for body, answer in zip(bodies, sent, strict=True):
        message = by_body[body]
        assert message["MessageId"] != answer["MessageId"]
        assert message["MD5OfBody"] == answer["MD5OfMessageBody"]
        assert message["MD5OfMessageAttributes"] == answer["MD5OfMessageAttributes"]
        assert message["Attributes"]["KqsReplayOfMessageId"] == answer["MessageId"]
        assert int(message["Attributes"]["KqsReplayOfSentTimestamp"]) >= since_ms
        assert message["Attributes"]["ApproximateReceiveCount"] == "1"


def test_deleted_messages_are_replayed_into_another_queue_up_to_until(kqs: Any) -> None:
    # Given a queue of deleted messages, and a later one sent after `until`
    source = new_queue(kqs, "replay-src")
    destination = new_queue(kqs, "replay-dst")
    since_ms = int(time.time() * 1000) - 1000
    send_and_delete(kqs, source, ["a", "b", "c"])
    time.sleep(0.05)
    until_ms = int(time.time() * 1000)
    time.sleep(0.05)
    send_and_delete(kqs, source, ["late"])

    # When the range is replayed into the other queue
    kqs.start_message_replay_task(
        QueueUrl=source,
        SinceTimestamp=since_ms,
        UntilTimestamp=until_ms,
        DestinationQueueUrl=destination,
    )
    task = wait_until_ended(kqs, source)

    # Then the destination holds those three, the source nothing
    assert task["Status"] == "COMPLETED", task
    assert task["DestinationArn"].endswith(destination.rsplit("/", 1)[1])
    assert sorted(m["Body"] for m in receive_all(kqs, destination, 3)) == ["a", "b", "c"]
    assert "Messages" not in kqs.receive_message(QueueUrl=source)


def test_a_fifo_replay_keeps_each_groups_order(kqs: Any) -> None:
    # Given a FIFO queue whose messages of two groups were all deleted
    url = new_queue(kqs, "replay-fifo", FifoQueue="true", ContentBasedDeduplication="true")
    since_ms = int(time.time() * 1000) - 1000
    for i in range(6):
        group = "g1" if i % 2 else "g2"
        kqs.send_message(QueueUrl=url, MessageBody=f"{group}-{i}", MessageGroupId=group)
    receive_all(kqs, url, 6)

    # When the queue is replayed into itself (the same bodies: content-based deduplication
    # would drop them, the replay's own deduplication ids do not)
    kqs.start_message_replay_task(QueueUrl=url, SinceTimestamp=since_ms)
    task = wait_until_ended(kqs, url)

    # Then each group's messages come back in their order
    assert task["Status"] == "COMPLETED", task
    back = [m["Body"] for m in receive_all(kqs, url, 6)]
    assert [b for b in back if b.startswith("g1")] == ["g1-1", "g1-3", "g1-5"]
    assert [b for b in back if b.startswith("g2")] == ["g2-0", "g2-2", "g2-4"]


def test_a_range_beyond_retention_is_refused_with_the_oldest_available_time(kqs: Any) -> None:
    # Given a queue keeping messages 60 s
    url = new_queue(kqs, "replay-old", MessageRetentionPeriod="60")
    now_ms = int(time.time() * 1000)

    # When a replay asks for the last two minutes
    with pytest.raises(ClientError) as refused:
        kqs.start_message_replay_task(QueueUrl=url, SinceTimestamp=now_ms - 120_000)

    # Then it is refused, saying how far back it can go
    error = refused.value.response["Error"]
    assert error["Code"] == "InvalidParameterValue"
    assert "oldest available time" in error["Message"]
    assert kqs.list_message_replay_tasks(QueueUrl=url).get("Tasks", []) == []


def test_a_cancelled_task_stops_and_says_how_many_it_replayed(kqs: Any) -> None:
    # Given a slow replay of 40 messages (5 a second)
    url = new_queue(kqs, "replay-cancel")
    since_ms = int(time.time() * 1000) - 1000
    kqs.send_message_batch(
        QueueUrl=url,
        Entries=[{"Id": str(i), "MessageBody": f"m{i}"} for i in range(10)],
    )
    for _ in range(3):
        kqs.send_message_batch(
            QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": "x"} for i in range(10)]
        )
    handle = kqs.start_message_replay_task(
        QueueUrl=url, SinceTimestamp=since_ms, MaxNumberOfMessagesPerSecond=5
    )["TaskHandle"]

    # When it is cancelled
    replayed = kqs.cancel_message_replay_task(TaskHandle=handle)[
        "ApproximateNumberOfMessagesReplayed"
    ]
    task = wait_until_ended(kqs, url)

    # Then it ends CANCELLED, well short of the 40, and cannot be cancelled again
    assert task["Status"] == "CANCELLED", task
    assert task["TaskHandle"] == handle
    assert replayed <= task["ApproximateNumberOfMessagesReplayed"] < 40
    with pytest.raises(ClientError) as again:
        kqs.cancel_message_replay_task(TaskHandle=handle)
    assert again.value.response["Error"]["Code"] == "ResourceNotFoundException"


def counts(kqs: Any, url: str) -> dict[str, str]:
    attributes: dict[str, str] = kqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])[
        "Attributes"
    ]
    return {k: v for k, v in attributes.items() if k.startswith("ApproximateNumberOfMessages")}


def test_peeking_shows_each_state_and_changes_nothing(kqs: Any) -> None:
    # Given a queue with a deleted, an in-flight, a delayed and two visible messages
    url = new_queue(kqs, "peek")
    for body in ("deleted", "in flight", "visible 1", "visible 2"):
        kqs.send_message(QueueUrl=url, MessageBody=body)
    kqs.send_message(QueueUrl=url, MessageBody="delayed", DelaySeconds=600)
    taken = kqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2, VisibilityTimeout=600)
    by_body = {m["Body"]: m for m in taken["Messages"]}
    assert len(by_body) == 2  # oldest first: "deleted" and "in flight" (one partition or two)
    for body in list(by_body):
        if body != "in flight":
            kqs.delete_message(QueueUrl=url, ReceiptHandle=by_body[body]["ReceiptHandle"])
    before = counts(kqs, url)

    # When the queue is browsed, twice, oldest first
    first = kqs.peek_messages(QueueUrl=url, MaxNumberOfMessages=10)
    second = kqs.peek_messages(QueueUrl=url, MaxNumberOfMessages=10)

    # Then every message is there with its state, and nothing changed by looking
    assert first["Messages"] == second["Messages"]
    states = {m["Body"]: m["Attributes"]["KqsStatus"] for m in first["Messages"]}
    assert states == {
        "deleted": "DELETED",
        "in flight": "IN_FLIGHT",
        "visible 1": "VISIBLE",
        "visible 2": "VISIBLE",
        "delayed": "DELAYED",
    }
    in_flight = next(m for m in first["Messages"] if m["Body"] == "in flight")
    assert in_flight["Attributes"]["ApproximateReceiveCount"] == "1"
    assert int(in_flight["Attributes"]["KqsVisibleAtTimestamp"]) > time.time() * 1000 + 500_000
    assert "ReceiptHandle" not in in_flight
    assert counts(kqs, url) == before
    assert first["MessageRetentionPeriod"] == 345600
    assert first["TopicRetentionMs"] == 345600 * 1000 + 3_600_000  # the period and a 1 h margin
    assert first["OldestAvailableTimestamp"] <= int(time.time() * 1000) - 345_000_000
    visible = kqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"])
    assert sorted(m["Body"] for m in visible["Messages"]) == ["visible 1", "visible 2"]
    assert {m["Attributes"]["ApproximateReceiveCount"] for m in visible["Messages"]} == {"1"}


def test_peeking_pages_newest_first_and_filters_by_status(kqs: Any) -> None:
    # Given seven messages, the first three deleted
    url = new_queue(kqs, "peek-pages")
    for i in range(7):
        kqs.send_message(QueueUrl=url, MessageBody=f"m{i}")
        time.sleep(0.002)  # distinct send times: the order below is theirs
    for message in kqs.receive_message(QueueUrl=url, MaxNumberOfMessages=3)["Messages"]:
        kqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])

    # When the visible ones are paged through, newest first, two at a time
    seen: list[str] = []
    token: dict[str, str] = {}
    while True:
        page = kqs.peek_messages(
            QueueUrl=url, MaxNumberOfMessages=2, Order="newest", Statuses=["VISIBLE"], **token
        )
        seen.extend(m["Body"] for m in page.get("Messages", []))  # Query: none, no element
        if "NextToken" not in page:
            break
        token = {"NextToken": page["NextToken"]}

    # Then each visible message came once, newest first
    assert seen == ["m6", "m5", "m4", "m3"]
