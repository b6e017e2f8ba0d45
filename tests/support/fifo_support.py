"""Helpers shared by the FIFO end-to-end tests (`test_e2e_fifo*.py`)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.support.harness import ACCOUNT_ID, REGION


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def error_of(excinfo: pytest.ExceptionInfo[ClientError]) -> tuple[str, str, int]:
    """(code, message, HTTP status) of a refused request."""
    response = excinfo.value.response
    return (
        response["Error"]["Code"],
        response["Error"]["Message"],
        response["ResponseMetadata"]["HTTPStatusCode"],
    )


def arn_of(url: str) -> str:
    return f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:{url.rsplit('/', 1)[1]}"


def new_fifo_queue(sqs: Any, prefix: str = "fifo", **attributes: str) -> str:
    """Create a FIFO queue with a unique name; returns its URL."""
    url: str = sqs.create_queue(
        QueueName=f"{unique(prefix)}.fifo", Attributes={"FifoQueue": "true", **attributes}
    )["QueueUrl"]
    return url
