"""Fair standard queues (AWS, July 2025) end to end, through both protocols, on real Kafka.

A standard queue accepts MessageGroupId; when one group floods the queue, the others' messages
are not kept waiting behind its backlog. The test measures a quiet group's dwell time (receives
and seconds from its send until it is received) alone, behind a flooding group, and, for
contrast, behind the same flood sent without group ids (plain offset order).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.support.fifo_support import error_of
from tests.support.harness import NewQueue

FLOOD = 300


def flood(sqs: Any, url: str, group: str | None) -> None:
    for start in range(0, FLOOD, 10):
        entries: list[dict[str, Any]] = [
            {"Id": f"n{i}", "MessageBody": f"noisy {i}"} for i in range(start, start + 10)
        ]
        if group is not None:
            for entry in entries:
                entry["MessageGroupId"] = group
        response = sqs.send_message_batch(QueueUrl=url, Entries=entries)
        assert len(response["Successful"]) == 10


def dwell(sqs: Any, url: str, quiet: dict[str, Any]) -> tuple[int, float]:
    """Receive (10 at a time, deleting) until the quiet message comes: (receives, seconds)."""
    sent_at = time.monotonic()
    sqs.send_message(QueueUrl=url, **quiet)
    receives = 0
    while time.monotonic() - sent_at < 60:
        receives += 1
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
        entries = [
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
            for i, m in enumerate(messages.get("Messages", []))
        ]
        if entries:
            sqs.delete_message_batch(QueueUrl=url, Entries=entries)
        if any(m["Body"] == "quiet" for m in messages.get("Messages", [])):
            return receives, time.monotonic() - sent_at
    raise AssertionError("the quiet message never came")


def test_a_flooding_group_does_not_hold_back_a_quiet_groups_message(
    sqs: Any, new_queue: NewQueue
) -> None:
    quiet = {"MessageBody": "quiet", "MessageGroupId": "quiet-tenant"}
    # Given: the quiet group alone; behind a flooding group; behind the same flood sent
    # without groups (and the quiet message without one either: plain offset order)
    alone = dwell(sqs, new_queue("fair-alone"), quiet)
    fair_url = new_queue("fair-flood")
    flood(sqs, fair_url, "noisy-tenant")
    behind_group = dwell(sqs, fair_url, quiet)
    plain_url = new_queue("plain-flood")
    flood(sqs, plain_url, None)
    behind_plain = dwell(sqs, plain_url, {"MessageBody": "quiet"})
    print(  # noqa: T201 - the figures are the point
        f"quiet group's dwell (receives, s): alone {alone[0]}, {alone[1]:.2f}; behind a "
        f"{FLOOD}-message flooding group {behind_group[0]}, {behind_group[1]:.2f}; behind the "
        f"same flood without groups {behind_plain[0]}, {behind_plain[1]:.2f}"
    )
    # Then behind the flooding group it comes in the first receive, as when alone; without
    # groups it waits for the whole flood
    assert alone[0] == behind_group[0] == 1
    assert behind_plain[0] >= FLOOD // 10


def test_message_group_id_on_a_standard_queue_follows_the_fifo_rules(
    sqs: Any, new_queue: NewQueue
) -> None:
    url = new_queue("fair-bad")
    with pytest.raises(ClientError) as excinfo:
        sqs.send_message(QueueUrl=url, MessageBody="x", MessageGroupId="has space")
    assert error_of(excinfo) == (
        "InvalidParameterValue",
        "Value has space for parameter MessageGroupId is invalid. Reason: MessageGroupId can "
        "only include alphanumeric and punctuation characters. 1 to 128 in length.",
        400,
    )
