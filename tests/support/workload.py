"""A known SQS workload and the exact events (and CloudWatch-style counts) it must produce.

For accuracy tests of everything downstream of `__kqs_events`: drive `Workload(N, M, K, E, D)`
through any SQS client, then compare what was published (or what the Spark jobs computed)
with `WorkloadResult.expected`. Three fresh queues are used:

* `main`: E empty receives first (the queue is empty), then N sends (one SendMessage, the
  rest in SendMessageBatch calls of up to 10), M of them received (VisibilityTimeout 600, so
  none comes back), K of those deleted (DeleteMessageBatch).
* `source`, whose RedrivePolicy sends to `dlq` after maxReceiveCount 1: D sends, D received
  (then made visible again with ChangeMessageVisibilityBatch 0), then one more
  ReceiveMessage that moves all D to `dlq` and returns nothing (one empty receive).
* `dlq`: the D `moved_to_dlq` events, naming `source`.

Every receive is a short poll; a call that returns fewer messages than asked (possible with
several partitions) is repeated, and any call that returns nothing is counted, so the
expected numbers stay exact whatever the partitioning.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tests.support.harness import ACCOUNT_ID, REGION

MAX_BATCH = 10


@dataclass(frozen=True)
class Workload:
    sends: int  # N, to `main`
    receives: int  # M <= N
    deletes: int  # K <= M
    empty_receives: int  # E, on `main` before any send
    dead_lettered: int  # D, through `source` into `dlq`

    def __post_init__(self) -> None:
        if not 0 <= self.deletes <= self.receives <= self.sends:
            raise ValueError("need 0 <= deletes <= receives <= sends")


@dataclass
class WorkloadResult:
    main: str  # queue names
    source: str
    dlq: str
    # queue name -> event type -> how many messages (sum of `count`) the events stand for
    expected: dict[str, Counter[str]] = field(default_factory=dict)
    # queue name -> SentMessageSize of each message sent to it, by message id
    sizes: dict[str, dict[str, int]] = field(default_factory=dict)
    moved_ids: set[str] = field(default_factory=set)


def body_of(i: int) -> str:
    return f"workload message {i:06d} " + "x" * (i % 7)


def run_workload(sqs: Any, workload: Workload, prefix: str = "wl") -> WorkloadResult:
    """Drive `workload` through the SQS client `sqs`; returns what it must have produced."""
    tag = uuid.uuid4().hex[:10]
    main, source, dlq = f"{prefix}-main-{tag}", f"{prefix}-src-{tag}", f"{prefix}-dlq-{tag}"
    main_url = sqs.create_queue(QueueName=main)["QueueUrl"]
    dlq_url = sqs.create_queue(QueueName=dlq)["QueueUrl"]
    redrive = {
        "deadLetterTargetArn": f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:{dlq}",
        "maxReceiveCount": 1,
    }
    source_url = sqs.create_queue(
        QueueName=source, Attributes={"RedrivePolicy": json.dumps(redrive)}
    )["QueueUrl"]
    result = WorkloadResult(main, source, dlq)
    result.expected = {main: Counter(), source: Counter(), dlq: Counter()}

    # E empty receives on the empty queue
    for _ in range(workload.empty_receives):
        assert "Messages" not in sqs.receive_message(QueueUrl=main_url, WaitTimeSeconds=0)
    result.expected[main]["empty_receive"] += workload.empty_receives

    # N sends
    result.sizes[main] = _send(sqs, main_url, workload.sends)
    result.expected[main]["sent"] += workload.sends

    # M receives, K deletes
    received, empty = _receive(sqs, main_url, workload.receives, visibility_s=600)
    result.expected[main]["received"] += workload.receives
    result.expected[main]["empty_receive"] += empty
    handles = [m["ReceiptHandle"] for m in received[: workload.deletes]]
    for start in range(0, len(handles), MAX_BATCH):
        chunk = handles[start : start + MAX_BATCH]
        answer = sqs.delete_message_batch(
            QueueUrl=main_url,
            Entries=[{"Id": f"d{i}", "ReceiptHandle": h} for i, h in enumerate(chunk)],
        )
        assert len(answer["Successful"]) == len(chunk), answer
    result.expected[main]["deleted"] += workload.deletes

    # D dead-lettered: received once, then moved by the next receive
    if workload.dead_lettered:
        result.sizes[source] = _send(sqs, source_url, workload.dead_lettered)
        result.expected[source]["sent"] += workload.dead_lettered
        leased, empty = _receive(sqs, source_url, workload.dead_lettered, visibility_s=600)
        result.expected[source]["received"] += workload.dead_lettered
        result.expected[source]["empty_receive"] += empty
        for start in range(0, len(leased), MAX_BATCH):
            chunk = leased[start : start + MAX_BATCH]
            answer = sqs.change_message_visibility_batch(
                QueueUrl=source_url,
                Entries=[
                    {"Id": f"v{i}", "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
                    for i, m in enumerate(chunk)
                ],
            )
            assert len(answer["Successful"]) == len(chunk), answer
        assert "Messages" not in sqs.receive_message(QueueUrl=source_url, WaitTimeSeconds=0)
        result.expected[source]["empty_receive"] += 1
        result.expected[dlq]["moved_to_dlq"] += workload.dead_lettered
        result.moved_ids = set(result.sizes[source])
        attributes = sqs.get_queue_attributes(
            QueueUrl=dlq_url, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
        assert int(attributes["ApproximateNumberOfMessages"]) == workload.dead_lettered
    for counts in result.expected.values():
        for kind in [k for k, v in counts.items() if v == 0]:
            del counts[kind]
    return result


def _send(sqs: Any, url: str, count: int) -> dict[str, int]:
    """Send `count` messages (one alone, the rest in batches); their sizes by message id."""
    sizes: dict[str, int] = {}
    if count == 0:
        return sizes
    body = body_of(0)
    sizes[sqs.send_message(QueueUrl=url, MessageBody=body)["MessageId"]] = len(body.encode())
    for start in range(1, count, MAX_BATCH):
        bodies = {f"e{i}": body_of(i) for i in range(start, min(count, start + MAX_BATCH))}
        answer = sqs.send_message_batch(
            QueueUrl=url, Entries=[{"Id": k, "MessageBody": v} for k, v in bodies.items()]
        )
        assert not answer.get("Failed"), answer
        for entry in answer["Successful"]:
            sizes[entry["MessageId"]] = len(bodies[entry["Id"]].encode())
    return sizes


def _receive(sqs: Any, url: str, count: int, visibility_s: int) -> tuple[list[dict[str, Any]], int]:
    """Receive exactly `count` distinct messages; also returns how many calls came back empty."""
    received: dict[str, dict[str, Any]] = {}
    empty = 0
    while len(received) < count:
        assert empty < 100, "messages never became receivable"
        got = sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=min(MAX_BATCH, count - len(received)),
            VisibilityTimeout=visibility_s,
            WaitTimeSeconds=0,
        ).get("Messages", [])
        empty += not got
        for message in got:
            assert message["MessageId"] not in received, "a message was received twice"
            received[message["MessageId"]] = message
    return list(received.values()), empty
