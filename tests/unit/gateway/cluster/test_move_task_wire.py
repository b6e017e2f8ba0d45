"""What the internal channel carries for message move tasks, through JSON and back unchanged:
the messages an owner holds for a task, a task's summary for ListMessageMoveTasks, and the
home gateway's SQS errors."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.cluster.forwarding import (
    decode_error,
    decode_held,
    decode_received,
    encode_error,
    encode_held,
    encode_received,
)
from gateway.common.errors import InvalidParameterValue, ResourceNotFound, SqsError
from gateway.sqs.move_tasks import MoveTaskStatus, MoveTaskSummary, encode_handle
from lease_store.types import Delivery
from tests.support.builders import a_fact, a_message, an_in_flight_fact

SOURCE_ARN = "arn:aws:sqs:us-east-1:000000000000:orders-dlq"


def over_the_wire(payload: dict[str, Any]) -> dict[str, Any]:
    decoded: dict[str, Any] = json.loads(json.dumps(payload))
    return decoded


def test_a_held_message_comes_back_with_its_partition_offset_fact_and_message() -> None:
    # Given a message held on partition 3 of an owner
    delivery = Delivery(
        17,
        a_fact(visible_at_ms=1_000, receive_count=2, first_receive_ms=500),
        a_message("m-17", body=b"\x00binary body", message_group_id="g"),
    )
    # When it crosses the channel
    partition, back = decode_held(over_the_wire(encode_held(3, delivery)))
    # Then
    assert (partition, back) == (3, delivery)


def test_a_forwarded_receive_keeps_its_receipt_handle() -> None:
    delivery = Delivery(5, an_in_flight_fact(), a_message("m-5"))
    forwarded = decode_received(over_the_wire(encode_received(delivery, "handle-5")))
    assert (forwarded.delivery, forwarded.receipt_handle) == (delivery, "handle-5")


@pytest.mark.parametrize(
    "summary",
    [
        MoveTaskSummary(
            handle=encode_handle("0b6c2b8e-6a54-4bd7-9a3d-1d1a4b0a4f10", SOURCE_ARN),
            status=MoveTaskStatus.RUNNING,
            source_arn=SOURCE_ARN,
            destination_arn=None,
            max_per_second=None,
            moved=0,
            to_move=12,
            failure_reason=None,
            started_ms=1_700_000_000_000,
        ),
        MoveTaskSummary(
            handle=encode_handle("5f0f3c1e-2b8e-4f0a-8f57-5a3b6f2f9e21", SOURCE_ARN),
            status=MoveTaskStatus.FAILED,
            source_arn=SOURCE_ARN,
            destination_arn="arn:aws:sqs:us-east-1:000000000000:orders",
            max_per_second=7,
            moved=3,
            to_move=12,
            failure_reason="AWS.SimpleQueueService.NonExistentQueue",
            started_ms=1_700_000_000_001,
        ),
    ],
    ids=["running-without-options", "failed-with-every-member"],
)
def test_a_task_summary_from_the_home_gateway_is_the_one_it_listed(
    summary: MoveTaskSummary,
) -> None:
    assert MoveTaskSummary.decode(over_the_wire(summary.encode())) == summary


@pytest.mark.parametrize(
    "error",
    [
        InvalidParameterValue(
            "There is already a task running. Only one active task is allowed for a source "
            "queue arn at a given time."
        ),
        ResourceNotFound("Task does not exist."),
    ],
    ids=["already-running", "unknown-task"],
)
def test_an_error_of_the_home_gateway_is_raised_as_it_was_raised_there(error: SqsError) -> None:
    back = decode_error(over_the_wire(encode_error(error))["error"])
    assert type(back) is type(error)
    assert (back.code, back.http_status, back.message) == (
        error.code,
        error.http_status,
        error.message,
    )
