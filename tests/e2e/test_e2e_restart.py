"""Crash and restart of the gateway process: what was acknowledged is still there."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from gateway.common.config import Settings
from tests.support.harness import GatewayProcess, json_client, query_client

# How long a message is held young before its lease-store keys are written, and how often
# the gateway writes those due (`KQS_LEASE_YOUNG_MS`, `gateway/app.py`).
YOUNG_S = Settings().lease_young_ms / 1000 + 0.2


@pytest.fixture
def own_gateway(kafka_bootstrap: str, tmp_path: Path) -> Iterator[GatewayProcess]:
    """A gateway of this test alone, so it can be killed without disturbing others."""
    process = GatewayProcess(tmp_path / "gateway", kafka_bootstrap)
    process.start()
    yield process
    process.stop()


def _client(protocol: str, endpoint: str) -> Any:
    return json_client(endpoint) if protocol == "json" else query_client(endpoint)


def test_message_sent_before_sigkill_is_delivered_after_restart(
    own_gateway: GatewayProcess, protocol: str
) -> None:
    # Given an acknowledged send
    sqs = _client(protocol, own_gateway.endpoint)
    url = sqs.create_queue(QueueName=f"crash-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    sent = sqs.send_message(QueueUrl=url, MessageBody="survives a crash")
    # When the gateway is killed without any chance to flush, and started again
    own_gateway.kill()
    own_gateway.start()
    # Then the message is delivered
    sqs = _client(protocol, own_gateway.endpoint)
    messages = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"]
    assert [(m["MessageId"], m["Body"]) for m in messages] == [
        (sent["MessageId"], "survives a crash")
    ]


def test_deleted_message_stays_deleted_and_lease_survives_sigkill(
    own_gateway: GatewayProcess, protocol: str
) -> None:
    # Given one deleted message and one leased for 10 minutes
    sqs = _client(protocol, own_gateway.endpoint)
    url = sqs.create_queue(QueueName=f"leases-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="deleted")
    first = sqs.receive_message(QueueUrl=url)["Messages"][0]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"])
    sqs.send_message(QueueUrl=url, MessageBody="leased")
    leased = sqs.receive_message(QueueUrl=url, VisibilityTimeout=600)["Messages"][0]
    # (a lease on a message in its first second may go with a crash: see the next test)
    time.sleep(YOUNG_S + 0.5)
    # When the gateway crashes and comes back
    own_gateway.kill()
    own_gateway.start()
    sqs = _client(protocol, own_gateway.endpoint)
    # Then neither is delivered: one is gone, the other still in flight
    assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)
    # and the old receipt handle still deletes the leased one
    sqs.delete_message(QueueUrl=url, ReceiptHandle=leased["ReceiptHandle"])


def test_a_message_received_in_its_first_second_is_delivered_again_after_sigkill(
    own_gateway: GatewayProcess, protocol: str
) -> None:
    # Given a message deleted and one received with a long lease, both just sent (young:
    # held in memory, `lease_store/young.py`)
    sqs = _client(protocol, own_gateway.endpoint)
    url = sqs.create_queue(QueueName=f"young-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="deleted")
    first = sqs.receive_message(QueueUrl=url)["Messages"][0]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"])
    sent = sqs.send_message(QueueUrl=url, MessageBody="leased young")
    sqs.receive_message(QueueUrl=url, VisibilityTimeout=600)
    # When the gateway crashes at once and comes back
    own_gateway.kill()
    own_gateway.start()
    sqs = _client(protocol, own_gateway.endpoint)
    # Then the deleted message stays deleted, and the received one is delivered again (its
    # lease went with the crash: at-least-once), not lost
    messages = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"]
    assert [(m["MessageId"], m["Body"]) for m in messages] == [(sent["MessageId"], "leased young")]
    assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)


def test_catalog_survives_a_restart(own_gateway: GatewayProcess, protocol: str) -> None:
    # Given a queue with attributes, a policy and tags
    sqs = _client(protocol, own_gateway.endpoint)
    name = f"catalog-{uuid.uuid4().hex[:8]}"
    url = sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "77"})["QueueUrl"]
    policy = '{"Version":"2012-10-17","Statement":[]}'
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": policy, "DelaySeconds": "3"})
    sqs.tag_queue(QueueUrl=url, Tags={"team": "payments", "env": "test"})
    before = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    # When the gateway restarts (graceful this time)
    assert own_gateway.terminate() == 0
    own_gateway.start()
    sqs = _client(protocol, own_gateway.endpoint)
    # Then the queue is there with identical attributes, policy and tags
    assert sqs.get_queue_url(QueueName=name)["QueueUrl"] == url
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"] == before
    assert before["Policy"] == policy
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "payments", "env": "test"}
    # and CreateQueue with the same attributes is idempotent, with others it conflicts
    assert (
        sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "77"})["QueueUrl"] == url
    )
    with pytest.raises(ClientError) as excinfo:
        sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "78"})
    assert excinfo.value.response["Error"]["Code"] == "QueueAlreadyExists"
