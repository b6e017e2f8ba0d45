"""The Kafka broker goes away under a running gateway, and comes back.

Own broker (stopped and started by the test) and own gateway. While the broker is down,
calls that need Kafka fail within a bounded time with a retryable 5xx SQS error in both
protocols, and what the lease store already holds is still served. Once the broker is back
(same data directory, same ports) the gateway recovers by itself: nothing acknowledged
before the outage is lost and new sends work again.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.support.harness import NO_RETRIES, GatewayProcess, free_port, json_client, query_client
from topology.embedded import broker

# A failing call must give up within this bound (the producer's delivery timeout is 15 s,
# admin requests time out after 10 s).
FAIL_WITHIN_S = 20.0


def _report(line: str) -> None:
    print(line)  # noqa: T201 - the measured times are reported, not only asserted


@dataclass
class _Outcome:
    name: str
    seconds: float = 0.0
    status: int | None = None
    code: str | None = None
    result: Any = None
    error: str | None = None  # anything but a ClientError


def _timed(name: str, call: Callable[[], Any]) -> _Outcome:
    outcome = _Outcome(name)
    began = time.monotonic()
    try:
        outcome.result = call()
        outcome.status = 200
    except ClientError as exc:
        outcome.status = exc.response["ResponseMetadata"]["HTTPStatusCode"]
        outcome.code = exc.response["Error"]["Code"]
    except Exception as exc:  # noqa: BLE001 - reported by the assertions
        outcome.error = f"{type(exc).__name__}: {exc}"
    outcome.seconds = time.monotonic() - began
    return outcome


def _concurrently(calls: dict[str, Callable[[], Any]]) -> dict[str, _Outcome]:
    outcomes: dict[str, _Outcome] = {}

    def run(name: str, call: Callable[[], Any]) -> None:
        outcomes[name] = _timed(name, call)

    threads = [threading.Thread(target=run, args=item) for item in calls.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=90)
    return outcomes


@pytest.mark.slow
def test_broker_outage_fails_fast_and_recovers(kafka_dir: Path, tmp_path: Path) -> None:
    port, controller_port = free_port(), free_port()
    info = broker.start(kafka_dir, port=port, controller_port=controller_port)
    gateway = GatewayProcess(tmp_path / "gateway", info.bootstrap)
    gateway.start()
    try:
        sqs_json = json_client(gateway.endpoint, NO_RETRIES)
        sqs_query = query_client(gateway.endpoint, NO_RETRIES)
        url = sqs_json.create_queue(QueueName=f"outage-{uuid.uuid4().hex[:8]}")["QueueUrl"]
        # Given acknowledged messages: two kept for after the outage, two to take during it
        before = {
            sqs_json.send_message(QueueUrl=url, MessageBody=f"before-{i}")["MessageId"]
            for i in range(4)
        }

        # When the broker stops
        stopped = time.monotonic()
        assert broker.stop(kafka_dir)
        _report(f"broker stopped in {time.monotonic() - stopped:.1f} s")

        # Then receives are served from the lease store, in both protocols
        received = [
            client.receive_message(QueueUrl=url, VisibilityTimeout=600)["Messages"][0]
            for client in (sqs_json, sqs_query)
        ]
        taken = {m["MessageId"] for m in received}
        assert len(taken) == 2 and taken <= before
        # and what needs Kafka fails within the bound, with a retryable 5xx error: sends and
        # queue creations; deletes succeed (their durable record is the lease store's synced
        # WAL; the changelog record follows once Kafka is back)
        outcomes = _concurrently(
            {
                "SendMessage (json)": lambda: sqs_json.send_message(
                    QueueUrl=url, MessageBody="during"
                ),
                "SendMessage (query)": lambda: sqs_query.send_message(
                    QueueUrl=url, MessageBody="during"
                ),
                "CreateQueue (json)": lambda: sqs_json.create_queue(
                    QueueName=f"during-{uuid.uuid4().hex[:8]}"
                ),
                "CreateQueue (query)": lambda: sqs_query.create_queue(
                    QueueName=f"during-{uuid.uuid4().hex[:8]}"
                ),
                "DeleteMessage (json)": lambda: sqs_json.delete_message(
                    QueueUrl=url, ReceiptHandle=received[0]["ReceiptHandle"]
                ),
                "DeleteMessage (query)": lambda: sqs_query.delete_message(
                    QueueUrl=url, ReceiptHandle=received[1]["ReceiptHandle"]
                ),
            }
        )
        for outcome in outcomes.values():
            _report(
                f"{outcome.name} during the outage: HTTP {outcome.status} {outcome.code} "
                f"after {outcome.seconds:.1f} s"
            )
        for outcome in outcomes.values():
            assert outcome.error is None, outcome
            if outcome.name.startswith("DeleteMessage"):
                assert outcome.status == 200, outcome
            else:
                assert outcome.status == 503 and outcome.code == "ServiceUnavailable", outcome
            assert outcome.seconds <= FAIL_WITHIN_S, outcome
        # and the deletes took effect: nothing is in flight any more
        counts = sqs_query.get_queue_attributes(
            QueueUrl=url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        assert counts == {
            "ApproximateNumberOfMessages": "2",
            "ApproximateNumberOfMessagesNotVisible": "0",
        }

        # When the broker starts again, on the same data directory and ports
        restarted = time.monotonic()
        broker.start(kafka_dir, port=port, controller_port=controller_port)
        _report(f"broker restarted in {time.monotonic() - restarted:.1f} s")

        # Then the gateway recovers by itself: a send succeeds (retried while it reconnects)
        recovered = time.monotonic()
        attempts = 0
        while True:
            attempts += 1
            outcome = _timed(
                "send", lambda: sqs_json.send_message(QueueUrl=url, MessageBody="after")
            )
            if outcome.status == 200:
                break
            assert time.monotonic() - recovered < 60, (
                f"no send succeeded after the outage: {outcome}"
            )
            time.sleep(0.5)
        after_id = outcome.result["MessageId"]
        _report(
            f"first successful send {time.monotonic() - recovered:.1f} s after the broker was "
            f"back ({attempts} attempt(s))"
        )
        # and is receivable, and so are the messages acknowledged before the outage
        expected = (before - taken) | {after_id}
        seen: set[str] = set()
        receive_deadline = time.monotonic() + 30
        while not expected <= seen and time.monotonic() < receive_deadline:
            response = sqs_query.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600, WaitTimeSeconds=2
            )
            seen.update(m["MessageId"] for m in response.get("Messages", []))
        assert seen == expected  # the taken ones, deleted during the outage, never come back
        # and deleting them again succeeds (an already deleted message)
        for client, message in zip((sqs_json, sqs_query), received, strict=True):
            client.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        # and queues can be created again
        sqs_json.create_queue(QueueName=f"after-{uuid.uuid4().hex[:8]}")
    finally:
        gateway.stop()
