"""The AWS CLI, unchanged, against the gateway: the README's walkthrough and the control plane."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from tests.support.aws_cli import AWS, run_aws
from tests.support.harness import GatewayProcess


def aws(gateway: GatewayProcess, *args: str) -> Any:
    done = run_aws(gateway.endpoint, "sqs", *args)
    if done.returncode != 0:
        raise AssertionError(f"aws sqs {' '.join(args)} failed: {done.stderr}")
    return json.loads(done.stdout) if done.stdout.strip() else None


@pytest.fixture(scope="module", autouse=True)
def _cli_installed() -> None:
    assert AWS.exists(), f"the AWS CLI is installed with the test extra; not found at {AWS}"


def test_readme_walkthrough_create_send_receive_delete(gateway: GatewayProcess) -> None:
    # Given a queue made by the CLI
    name = f"orders-{uuid.uuid4().hex[:8]}"
    url = aws(gateway, "create-queue", "--queue-name", name)["QueueUrl"]
    assert url == f"{gateway.endpoint}/000000000000/{name}"
    # When a message goes through send, receive and delete
    sent = aws(gateway, "send-message", "--queue-url", url, "--message-body", "hi")
    received = aws(gateway, "receive-message", "--queue-url", url)["Messages"]
    aws(
        gateway,
        "delete-message",
        "--queue-url",
        url,
        "--receipt-handle",
        received[0]["ReceiptHandle"],
    )
    # Then the CLI saw the same message, and it is gone
    assert received[0]["MessageId"] == sent["MessageId"]
    assert received[0]["Body"] == "hi"
    assert aws(gateway, "receive-message", "--queue-url", url) is None


def test_control_plane_commands(gateway: GatewayProcess) -> None:
    name = f"cli-{uuid.uuid4().hex[:8]}"
    url = aws(
        gateway, "create-queue", "--queue-name", name, "--attributes", "VisibilityTimeout=40"
    )["QueueUrl"]
    assert aws(gateway, "get-queue-url", "--queue-name", name)["QueueUrl"] == url
    assert url in aws(gateway, "list-queues", "--queue-name-prefix", name)["QueueUrls"]
    aws(gateway, "set-queue-attributes", "--queue-url", url, "--attributes", "DelaySeconds=5")
    attributes = aws(
        gateway, "get-queue-attributes", "--queue-url", url, "--attribute-names", "All"
    )["Attributes"]
    assert attributes["VisibilityTimeout"] == "40"
    assert attributes["DelaySeconds"] == "5"
    aws(gateway, "tag-queue", "--queue-url", url, "--tags", "team=payments")
    assert aws(gateway, "list-queue-tags", "--queue-url", url)["Tags"] == {"team": "payments"}
    aws(gateway, "purge-queue", "--queue-url", url)
    aws(gateway, "delete-queue", "--queue-url", url)
    assert name not in json.dumps(aws(gateway, "list-queues", "--queue-name-prefix", name) or {})
