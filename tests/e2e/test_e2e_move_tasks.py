"""Message move tasks (DLQ redrive) end to end, through both protocols on real Kafka:
StartMessageMoveTask, ListMessageMoveTasks and CancelMessageMoveTask, and tasks that outlive
a restart of their gateway."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from gateway.sqs.move_tasks import decode_handle, encode_handle
from tests.support.harness import ACCOUNT_ID, REGION, GatewayProcess, NewQueue, client_for
from tests.support.move_tasks import ALREADY_RUNNING, arn_of, error_of, redrive_to
from topology.names import MOVE_TASKS_TOPIC
from topology.topic_tail import read_to_end

NOT_A_DLQ = "Source queue must be configured as a Dead Letter Queue."


def visible_count(sqs: Any, url: str) -> int:
    attributes = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"])


def dead_letter(sqs: Any, source: str, bodies: list[str], **send: Any) -> list[str]:
    """Send `bodies` to a queue with maxReceiveCount 1 and receive them into its DLQ.

    Returns the ids the messages were sent with.
    """
    ids = [sqs.send_message(QueueUrl=source, MessageBody=b, **send)["MessageId"] for b in bodies]
    first = sqs.receive_message(QueueUrl=source, MaxNumberOfMessages=10, VisibilityTimeout=0)
    assert len(first["Messages"]) == len(bodies)
    # The second receive would pass maxReceiveCount 1: every message goes to the DLQ instead.
    assert "Messages" not in sqs.receive_message(QueueUrl=source, MaxNumberOfMessages=10)
    return ids


def drain(sqs: Any, url: str, expected: int, timeout_s: float = 10.0) -> list[dict[str, Any]]:
    """Receive and delete until `expected` messages came, then check that nothing else does."""
    got: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < expected and time.monotonic() < deadline:
        response = sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=10,
            WaitTimeSeconds=1,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        for message in response.get("Messages", []):
            got.append(message)
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert len(got) == expected, got
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    return got


def tasks_of(sqs: Any, dlq: str, **kwargs: Any) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = sqs.list_message_move_tasks(
        SourceArn=arn_of(dlq), **kwargs
    ).get("Results", [])
    return results


def wait_for(
    sqs: Any, dlq: str, done: Callable[[dict[str, Any]], bool], timeout_s: float = 20.0
) -> dict[str, Any]:
    """The most recent task of `dlq` once `done` holds for it."""
    deadline = time.monotonic() + timeout_s
    while True:
        latest = tasks_of(sqs, dlq)[0]
        if done(latest) or time.monotonic() > deadline:
            return latest
        time.sleep(0.1)


def finished(task: dict[str, Any]) -> bool:
    return task["Status"] in ("COMPLETED", "CANCELLED", "FAILED")


# -- moving ---------------------------------------------------------------------------------


def test_messages_from_two_source_queues_go_back_each_to_its_own_source(
    sqs: Any, new_queue: NewQueue
) -> None:
    # Given a DLQ holding messages dead-lettered from two different source queues
    dlq = new_queue("dlq")
    source_a = new_queue("src-a", RedrivePolicy=redrive_to(dlq))
    source_b = new_queue("src-b", RedrivePolicy=redrive_to(dlq))
    attributes = {"kind": {"DataType": "String", "StringValue": "order"}}
    old_ids = dead_letter(sqs, source_a, ["a1", "a2"], MessageAttributes=attributes)
    old_ids += dead_letter(sqs, source_b, ["b1"])
    assert visible_count(sqs, dlq) == 3
    started_ms = int(time.time() * 1000)

    # When a move task without a destination runs to its end
    handle = sqs.start_message_move_task(SourceArn=arn_of(dlq))["TaskHandle"]
    task = wait_for(sqs, dlq, finished)

    # Then each message is back in the queue it came from, as a new message with the same
    # body and attributes and no dead-letter source
    assert handle
    back_a = drain(sqs, source_a, 2)
    back_b = drain(sqs, source_b, 1)
    assert sorted(m["Body"] for m in back_a) == ["a1", "a2"]
    assert [m["Body"] for m in back_b] == ["b1"]
    for message in back_a:
        assert message["MessageAttributes"] == attributes
        assert "DeadLetterQueueSourceArn" not in message["Attributes"]
        assert message["Attributes"]["ApproximateReceiveCount"] == "1"
        assert int(message["Attributes"]["SentTimestamp"]) >= started_ms - 1000
    assert not {m["MessageId"] for m in back_a + back_b} & set(old_ids)
    assert visible_count(sqs, dlq) == 0
    # And the task lists as completed, without a handle or a destination
    assert task == {
        "Status": "COMPLETED",
        "SourceArn": arn_of(dlq),
        "ApproximateNumberOfMessagesMoved": 3,
        "ApproximateNumberOfMessagesToMove": 3,
        "StartedTimestamp": task["StartedTimestamp"],
    }
    assert abs(task["StartedTimestamp"] - started_ms) < 10_000


def test_an_explicit_destination_gets_every_message_at_the_given_rate(
    sqs: Any, new_queue: NewQueue
) -> None:
    # Given three dead-lettered messages and a third queue
    dlq = new_queue("dlq")
    source = new_queue("src", RedrivePolicy=redrive_to(dlq))
    destination = new_queue("dest")
    dead_letter(sqs, source, ["m1", "m2", "m3"])

    # When they are moved to that queue at two messages a second
    started = time.monotonic()
    sqs.start_message_move_task(
        SourceArn=arn_of(dlq), DestinationArn=arn_of(destination), MaxNumberOfMessagesPerSecond=2
    )
    task = wait_for(sqs, dlq, finished)
    elapsed_s = time.monotonic() - started

    # Then the destination has them all, the source none, and the rate was kept
    assert sorted(m["Body"] for m in drain(sqs, destination, 3)) == ["m1", "m2", "m3"]
    assert "Messages" not in sqs.receive_message(QueueUrl=source)
    assert elapsed_s >= 0.9  # 3 messages at 2/s: two at once, the third half a second later
    assert task["Status"] == "COMPLETED"
    assert task["DestinationArn"] == arn_of(destination)
    assert task["MaxNumberOfMessagesPerSecond"] == 2
    assert task["ApproximateNumberOfMessagesMoved"] == 3


def test_a_task_on_an_empty_dead_letter_queue_completes_at_once(
    sqs: Any, new_queue: NewQueue
) -> None:
    dlq = new_queue("dlq")
    new_queue("src", RedrivePolicy=redrive_to(dlq))

    sqs.start_message_move_task(SourceArn=arn_of(dlq))
    task = wait_for(sqs, dlq, finished, timeout_s=5)

    assert task["Status"] == "COMPLETED"
    assert task["ApproximateNumberOfMessagesToMove"] == 0
    assert task["ApproximateNumberOfMessagesMoved"] == 0


# -- cancel and list ------------------------------------------------------------------------


def test_cancel_stops_a_running_task_and_a_new_task_may_then_start(
    sqs: Any, new_queue: NewQueue
) -> None:
    # Given a slow task (one message a second) that has moved at least one of six messages
    dlq = new_queue("dlq")
    source = new_queue("src", RedrivePolicy=redrive_to(dlq))
    dead_letter(sqs, source, [f"m{i}" for i in range(6)])
    handle = sqs.start_message_move_task(SourceArn=arn_of(dlq), MaxNumberOfMessagesPerSecond=1)[
        "TaskHandle"
    ]
    running = wait_for(sqs, dlq, lambda t: t["ApproximateNumberOfMessagesMoved"] >= 1)
    assert running["Status"] == "RUNNING"
    assert running["TaskHandle"] == handle
    assert running["ApproximateNumberOfMessagesToMove"] == 6

    # When it is cancelled
    moved = sqs.cancel_message_move_task(TaskHandle=handle)["ApproximateNumberOfMessagesMoved"]

    # Then it stops, having moved some but not all of them, and cannot be cancelled again
    assert moved >= 1
    cancelled = wait_for(sqs, dlq, lambda t: t["Status"] == "CANCELLED")
    assert cancelled["Status"] == "CANCELLED"
    assert "TaskHandle" not in cancelled
    left = visible_count(sqs, dlq)
    assert 0 < left <= 5
    assert left + cancelled["ApproximateNumberOfMessagesMoved"] == 6
    with pytest.raises(ClientError) as excinfo:
        sqs.cancel_message_move_task(TaskHandle=handle)
    assert error_of(excinfo)[:2] == (404, "ResourceNotFoundException")
    # And a new task moves the rest
    sqs.start_message_move_task(SourceArn=arn_of(dlq))
    assert wait_for(sqs, dlq, finished)["Status"] == "COMPLETED"
    assert len(drain(sqs, source, 6)) == 6


def test_list_gives_the_most_recent_task_first_and_one_by_default(
    sqs: Any, new_queue: NewQueue
) -> None:
    # Given two finished tasks of one DLQ, and a DLQ without any
    dlq = new_queue("dlq")
    new_queue("src", RedrivePolicy=redrive_to(dlq))
    other = new_queue("other-dlq")
    new_queue("src", RedrivePolicy=redrive_to(other))
    destination = new_queue("dest")
    sqs.start_message_move_task(SourceArn=arn_of(dlq))
    wait_for(sqs, dlq, finished)
    sqs.start_message_move_task(SourceArn=arn_of(dlq), DestinationArn=arn_of(destination))
    wait_for(sqs, dlq, finished)

    # When they are listed
    default = tasks_of(sqs, dlq)
    both = tasks_of(sqs, dlq, MaxResults=10)

    # Then
    assert [t.get("DestinationArn") for t in default] == [arn_of(destination)]
    assert [t.get("DestinationArn") for t in both] == [arn_of(destination), None]
    assert both[0]["StartedTimestamp"] >= both[1]["StartedTimestamp"]
    assert tasks_of(sqs, other) == []


@pytest.mark.parametrize("max_results", [0, 11])
def test_list_max_results_outside_1_to_10_is_refused(
    sqs: Any, new_queue: NewQueue, max_results: int
) -> None:
    dlq = new_queue("dlq")
    with pytest.raises(ClientError) as excinfo:
        tasks_of(sqs, dlq, MaxResults=max_results)
    assert error_of(excinfo)[:2] == (400, "InvalidParameterValue")


# -- errors ---------------------------------------------------------------------------------


def test_a_source_that_is_no_queue_s_dead_letter_queue_is_refused(
    sqs: Any, new_queue: NewQueue
) -> None:
    plain = new_queue("plain")
    with pytest.raises(ClientError) as excinfo:
        sqs.start_message_move_task(SourceArn=arn_of(plain))
    assert error_of(excinfo) == (400, "InvalidParameterValue", NOT_A_DLQ)


def test_a_second_task_while_one_is_active_is_refused(sqs: Any, new_queue: NewQueue) -> None:
    # Given a running task (one message a second, three messages)
    dlq = new_queue("dlq")
    source = new_queue("src", RedrivePolicy=redrive_to(dlq))
    dead_letter(sqs, source, ["m1", "m2", "m3"])
    handle = sqs.start_message_move_task(SourceArn=arn_of(dlq), MaxNumberOfMessagesPerSecond=1)[
        "TaskHandle"
    ]

    # When another is started for the same DLQ
    with pytest.raises(ClientError) as excinfo:
        sqs.start_message_move_task(SourceArn=arn_of(dlq))

    # Then it is refused
    assert error_of(excinfo) == (400, "InvalidParameterValue", ALREADY_RUNNING)
    sqs.cancel_message_move_task(TaskHandle=handle)


@pytest.mark.parametrize("rate", [0, 501])
def test_a_rate_outside_1_to_500_is_refused(sqs: Any, new_queue: NewQueue, rate: int) -> None:
    dlq = new_queue("dlq")
    new_queue("src", RedrivePolicy=redrive_to(dlq))
    with pytest.raises(ClientError) as excinfo:
        sqs.start_message_move_task(SourceArn=arn_of(dlq), MaxNumberOfMessagesPerSecond=rate)
    status, code, message = error_of(excinfo)
    assert (status, code) == (400, "InvalidParameterValue")
    assert "MaxNumberOfMessagesPerSecond" in message
    assert tasks_of(sqs, dlq) == []


def test_missing_source_or_destination_queues_are_not_found(sqs: Any, new_queue: NewQueue) -> None:
    dlq = new_queue("dlq")
    new_queue("src", RedrivePolicy=redrive_to(dlq))
    missing = f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:no-such-queue-{uuid.uuid4().hex}"

    with pytest.raises(ClientError) as no_source:
        sqs.start_message_move_task(SourceArn=missing)
    with pytest.raises(ClientError) as no_destination:
        sqs.start_message_move_task(SourceArn=arn_of(dlq), DestinationArn=missing)
    with pytest.raises(ClientError) as no_list:
        sqs.list_message_move_tasks(SourceArn=missing)

    for excinfo, name in [(no_source, "SourceArn"), (no_destination, "DestinationArn")]:
        assert error_of(excinfo) == (
            404,
            "ResourceNotFoundException",
            f"The resource that you specified for the {name} parameter doesn't exist.",
        )
    assert error_of(no_list)[:2] == (404, "ResourceNotFoundException")


def test_cancel_with_an_unknown_handle_is_not_found(sqs: Any, new_queue: NewQueue) -> None:
    dlq = new_queue("dlq")
    unknown = encode_handle(str(uuid.uuid4()), arn_of(dlq))
    with pytest.raises(ClientError) as excinfo:
        sqs.cancel_message_move_task(TaskHandle=unknown)
    assert error_of(excinfo) == (404, "ResourceNotFoundException", "Task does not exist.")


def test_cancel_with_a_malformed_handle_is_refused(sqs: Any) -> None:
    with pytest.raises(ClientError) as excinfo:
        sqs.cancel_message_move_task(TaskHandle="not-a-task-handle")
    assert error_of(excinfo) == (
        400,
        "InvalidParameterValue",
        "Value for parameter TaskHandle is invalid.",
    )


# -- outliving the gateway ------------------------------------------------------------------


@pytest.fixture
def own_gateway(kafka_bootstrap: str, tmp_path: Path) -> Iterator[GatewayProcess]:
    """A gateway of the test alone, so it can be restarted without disturbing others."""
    gateway = GatewayProcess(tmp_path / "gateway", kafka_bootstrap)
    gateway.start()
    yield gateway
    gateway.stop()


def a_slow_task(sqs: Any, bodies: list[str], rate: int) -> tuple[str, str, str]:
    """A DLQ holding `bodies` and a task moving them back at `rate` a second that has moved
    at least one: (DLQ URL, source URL, task handle)."""
    dlq = sqs.create_queue(QueueName=f"dlq-{uuid.uuid4().hex[:12]}")["QueueUrl"]
    source = sqs.create_queue(
        QueueName=f"src-{uuid.uuid4().hex[:12]}", Attributes={"RedrivePolicy": redrive_to(dlq)}
    )["QueueUrl"]
    dead_letter(sqs, source, bodies)
    handle = sqs.start_message_move_task(SourceArn=arn_of(dlq), MaxNumberOfMessagesPerSecond=rate)[
        "TaskHandle"
    ]
    wait_for(sqs, dlq, lambda t: t["ApproximateNumberOfMessagesMoved"] >= 1)
    return dlq, source, handle


def restarted(gateway: GatewayProcess, protocol: str) -> Any:
    """Stop the gateway (SIGTERM), start it again; a client of it."""
    assert gateway.terminate() == 0
    gateway.start()
    return client_for(protocol, gateway.endpoint)


def test_a_running_task_runs_on_after_the_gateway_restarts(
    own_gateway: GatewayProcess, protocol: str
) -> None:
    # Given a slow task (two messages a second) that has moved some of ten messages
    sqs = client_for(protocol, own_gateway.endpoint)
    bodies = [f"m{i}" for i in range(10)]
    dlq, source, handle = a_slow_task(sqs, bodies, rate=2)

    # When the gateway stops (SIGTERM) and starts again
    sqs = restarted(own_gateway, protocol)

    # Then the task is listed with its handle, runs on and completes, and every message is
    # back in its source queue exactly once
    listed = tasks_of(sqs, dlq)[0]
    assert listed["TaskHandle"] == handle or listed["Status"] == "COMPLETED"
    assert 1 <= listed["ApproximateNumberOfMessagesMoved"] <= 10
    done = wait_for(sqs, dlq, finished, timeout_s=30)
    assert done["Status"] == "COMPLETED", done
    assert done["ApproximateNumberOfMessagesMoved"] == 10
    assert done["ApproximateNumberOfMessagesToMove"] == 10
    assert sorted(m["Body"] for m in drain(sqs, source, 10)) == sorted(bodies)
    assert visible_count(sqs, dlq) == 0


def test_a_cancel_asked_before_a_restart_holds_after_it(
    own_gateway: GatewayProcess, protocol: str
) -> None:
    # Given a slow task (one message a second), cancelled
    sqs = client_for(protocol, own_gateway.endpoint)
    dlq, source, handle = a_slow_task(sqs, [f"m{i}" for i in range(6)], rate=1)
    sqs.cancel_message_move_task(TaskHandle=handle)
    cancelled = wait_for(sqs, dlq, finished)
    assert cancelled["Status"] == "CANCELLED"

    # When the gateway restarts
    sqs = restarted(own_gateway, protocol)

    # Then the task is still listed as cancelled, nothing more is moved, and a new task may
    # start
    assert tasks_of(sqs, dlq)[0] == cancelled
    time.sleep(1.5)  # a task wrongly run on would move one message a second
    assert visible_count(sqs, dlq) == 6 - cancelled["ApproximateNumberOfMessagesMoved"]
    sqs.start_message_move_task(SourceArn=arn_of(dlq))
    assert wait_for(sqs, dlq, finished)["Status"] == "COMPLETED"
    assert len(drain(sqs, source, 6)) == 6


# -- a deleted source queue ------------------------------------------------------------------


def logged_tasks(kafka_bootstrap: str) -> dict[str, bytes | None]:
    """The latest record of each task in `__kqs_move_tasks` (None: tombstoned)."""
    latest: dict[str, bytes | None] = {}

    def keep(records: list[tuple[int, bytes, bytes | None]]) -> None:
        for _, key, value in records:
            latest[key.decode()] = value

    read_to_end(kafka_bootstrap, MOVE_TASKS_TOPIC, keep)
    return latest


def test_deleting_a_source_queue_ends_its_tasks_and_forgets_them_in_the_log(
    sqs: Any, kafka_bootstrap: str
) -> None:
    # Given a DLQ with a finished task and a running one (one message a second)
    dlq, _, cancelled = a_slow_task(sqs, [f"m{i}" for i in range(6)], rate=1)
    sqs.cancel_message_move_task(TaskHandle=cancelled)
    assert wait_for(sqs, dlq, finished)["Status"] == "CANCELLED"
    running = sqs.start_message_move_task(SourceArn=arn_of(dlq), MaxNumberOfMessagesPerSecond=1)[
        "TaskHandle"
    ]
    task_ids = {handle_task_id(cancelled), handle_task_id(running)}
    assert all(logged_tasks(kafka_bootstrap).get(t) for t in task_ids)

    # When the DLQ is deleted
    sqs.delete_queue(QueueUrl=dlq)

    # Then both tasks' records are tombstoned: none is left in the log
    deadline = time.monotonic() + 15
    while any(logged_tasks(kafka_bootstrap).get(t) for t in task_ids):
        assert time.monotonic() < deadline, "move task records of a deleted queue remain"
        time.sleep(0.5)


def handle_task_id(handle: str) -> str:
    decoded = decode_handle(handle)
    assert decoded is not None, handle
    return decoded[0]
