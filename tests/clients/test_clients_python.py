"""Python SQS libraries against `kqs serve` on a real broker.

* Celery with kombu's SQS transport: a real worker process executes tasks sent through KQS;
* aiobotocore (asyncio): single and batch round trips with attributes;
* amazon-sqs-extended-client: a 2 MiB body through the real S3 server (versitygw).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import boto3
from aiobotocore.session import get_session

from tests.support.attribute_md5 import attributes_md5
from tests.support.celery_app import make_app
from tests.support.clients_support import REPO, bucket_keys, new_bucket, s3_client
from tests.support.harness import GatewayProcess, json_client

EMPTY = {
    "ApproximateNumberOfMessages": "0",
    "ApproximateNumberOfMessagesNotVisible": "0",
    "ApproximateNumberOfMessagesDelayed": "0",
}
ATTRIBUTES: dict[str, dict[str, Any]] = {
    "kind": {"DataType": "String", "StringValue": "order"},
    "count": {"DataType": "Number", "StringValue": "42"},
    "blob": {"DataType": "Binary", "BinaryValue": bytes([0, 1, 2, 255])},
}


def queue_counts(gateway: GatewayProcess, url: str) -> dict[str, str]:
    attributes: dict[str, str] = json_client(gateway.endpoint).get_queue_attributes(
        QueueUrl=url, AttributeNames=list(EMPTY)
    )["Attributes"]
    return attributes


def wait_for(check: Any, timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


# -- Celery -----------------------------------------------------------------------------------


def test_celery_worker_runs_tasks_sent_through_kqs(gateway: GatewayProcess, tmp_path: Path) -> None:
    prefix = f"celery-{uuid.uuid4().hex[:8]}-"
    results = tmp_path / "results.jsonl"
    host_port = urlsplit(gateway.endpoint).netloc
    env = {
        **os.environ,
        "KQS_CELERY_ENDPOINT": host_port,
        "KQS_CELERY_PREFIX": prefix,
        "KQS_CELERY_RESULTS": str(results),
    }
    app = make_app(host_port, prefix)
    # Sent before the worker starts: kombu creates the queue "<prefix>tasks" on first use.
    for i in range(20):
        app.send_task("kqs.add", args=(i, 100), kwargs={"note": f"n{i}"})
    app.send_task("kqs.flaky", args=("k1",))
    sqs = json_client(gateway.endpoint)
    url = sqs.get_queue_url(QueueName=f"{prefix}tasks")["QueueUrl"]
    wait_for(
        lambda: queue_counts(gateway, url)["ApproximateNumberOfMessages"] == "21",
        30,
        "the 21 task messages to be counted",
    )

    log_path = tmp_path / "worker.log"
    with log_path.open("wb") as log:
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "tests.support.celery_app",
                "worker",
                "--pool=solo",
                "--without-heartbeat",
                "--without-gossip",
                "--without-mingle",
                "--loglevel=INFO",
            ],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:

        def records() -> list[dict[str, Any]]:
            if not results.exists():
                return []
            lines = results.read_text(encoding="utf-8").splitlines()
            return [json.loads(line) for line in lines]

        def finished() -> list[dict[str, Any]]:
            done = records()
            added = [r for r in done if r["task"] == "add"]
            flaky_done = [r for r in done if r["task"] == "flaky" and r["outcome"] == "done"]
            return done if len(added) >= 20 and flaky_done else []

        try:
            done = wait_for(finished, 90, "the worker to run every task")
        except AssertionError:
            raise AssertionError(log_path.read_text(errors="replace")[-4000:]) from None
        adds = sorted((r for r in done if r["task"] == "add"), key=lambda r: r["args"][0])
        assert [r["args"] for r in adds] == [[i, 100] for i in range(20)]
        assert [r["result"] for r in adds] == [i + 100 for i in range(20)]
        assert [r["note"] for r in adds] == [f"n{i}" for i in range(20)]
        flaky = [r for r in done if r["task"] == "flaky"]
        assert flaky == [
            {"task": "flaky", "key": "k1", "retries": 0, "outcome": "retry"},
            {"task": "flaky", "key": "k1", "retries": 1, "outcome": "done"},
        ]
        # Every task message was acknowledged, i.e. deleted from the queue.
        wait_for(lambda: queue_counts(gateway, url) == EMPTY, 30, "the queue to drain")
        time.sleep(1.5)  # nothing is run twice after a late redelivery
        assert len(records()) == len(done) == 22
    finally:
        worker.terminate()
        worker.wait(timeout=30)


# -- aiobotocore ------------------------------------------------------------------------------


async def test_aiobotocore_round_trip(gateway: GatewayProcess) -> None:
    # README: begin python-asyncio
    session = get_session()
    async with session.create_client(
        "sqs",
        endpoint_url=gateway.endpoint,  # e.g. "http://127.0.0.1:9324"
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    ) as sqs:
        # README: end python-asyncio
        url = (await sqs.create_queue(QueueName=f"aio-{uuid.uuid4().hex[:10]}"))["QueueUrl"]
        sent = await sqs.send_message(
            QueueUrl=url, MessageBody="async ✓", MessageAttributes=ATTRIBUTES
        )
        assert sent["MD5OfMessageBody"] == hashlib.md5("async ✓".encode()).hexdigest()
        assert sent["MD5OfMessageAttributes"] == attributes_md5(ATTRIBUTES)
        received = await sqs.receive_message(
            QueueUrl=url,
            WaitTimeSeconds=10,
            MessageAttributeNames=["All"],
            MessageSystemAttributeNames=["ApproximateReceiveCount"],
        )
        [message] = received["Messages"]
        assert message["MessageId"] == sent["MessageId"]
        assert message["Body"] == "async ✓"
        assert message["MessageAttributes"] == ATTRIBUTES
        assert message["MD5OfMessageAttributes"] == attributes_md5(ATTRIBUTES)
        assert message["Attributes"] == {"ApproximateReceiveCount": "1"}
        await sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])

        batch = await sqs.send_message_batch(
            QueueUrl=url,
            Entries=[
                {
                    "Id": f"e{i}",
                    "MessageBody": f"batch-{i}",
                    "MessageAttributes": {"index": {"DataType": "Number", "StringValue": str(i)}},
                }
                for i in range(10)
            ],
        )
        assert sorted(e["Id"] for e in batch["Successful"]) == sorted(f"e{i}" for i in range(10))
        assert batch.get("Failed", []) == []
        got: dict[str, str] = {}
        handles: list[str] = []
        deadline = time.monotonic() + 60
        while len(got) < 10 and time.monotonic() < deadline:
            response = await sqs.receive_message(
                QueueUrl=url,
                MaxNumberOfMessages=10,
                WaitTimeSeconds=5,
                MessageAttributeNames=["index"],
            )
            for m in response.get("Messages", []):
                got[m["Body"]] = m["MessageAttributes"]["index"]["StringValue"]
                handles.append(m["ReceiptHandle"])
        assert got == {f"batch-{i}": str(i) for i in range(10)}
        assert len(handles) == 10
        deleted = await sqs.delete_message_batch(
            QueueUrl=url,
            Entries=[{"Id": f"d{i}", "ReceiptHandle": h} for i, h in enumerate(handles)],
        )
        assert len(deleted["Successful"]) == 10
        assert deleted.get("Failed", []) == []
        counts = await sqs.get_queue_attributes(QueueUrl=url, AttributeNames=list(EMPTY))
        assert counts["Attributes"] == EMPTY


# -- amazon-sqs-extended-client ---------------------------------------------------------------


def extended_session_class() -> Any:
    """`SQSExtendedClientSession`, without the rest of the process paying for it.

    Importing `sqs_extended_client` replaces `boto3.Session` (and the default session) with
    its own class, process-wide, so every later boto3 SQS client would route its calls through
    the library's hooks (an empty body would fail in the client, not on the server). The
    test suite shares one process: put boto3 back as it was.
    """
    saved = (boto3.session.Session, boto3.Session, boto3.DEFAULT_SESSION)
    try:
        from sqs_extended_client.client import SQSExtendedClientSession
    finally:
        boto3.session.Session, boto3.Session, boto3.DEFAULT_SESSION = saved
    return SQSExtendedClientSession


def test_python_extended_client_with_s3(gateway: GatewayProcess, s3_endpoint: str) -> None:
    SQSExtendedClientSession = extended_session_class()
    assert boto3.session.Session is not SQSExtendedClientSession
    bucket = new_bucket(s3_endpoint, "kqs-python")
    # README: begin python-extended-client
    sqs = SQSExtendedClientSession(
        aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1"
    ).client("sqs", endpoint_url=gateway.endpoint)
    sqs.s3_client = boto3.session.Session().client(
        "s3",
        endpoint_url=s3_endpoint,  # your S3 (or S3-compatible) endpoint
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )
    sqs.large_payload_support = bucket  # bodies over 256 KiB go to this bucket
    sqs.delete_payload_from_s3 = True  # and are removed with their message
    # README: end python-extended-client
    url = sqs.create_queue(QueueName=f"pyext-{uuid.uuid4().hex[:10]}")["QueueUrl"]
    body = "".join(f"{i:08d}|" for i in range(2 * 1024 * 1024 // 9 + 1))[: 2 * 1024 * 1024]
    attributes = {"kind": {"DataType": "String", "StringValue": "large"}}
    sqs.send_message(QueueUrl=url, MessageBody=body, MessageAttributes=attributes)
    [key] = bucket_keys(s3_endpoint, bucket)
    stored = s3_client(s3_endpoint).get_object(Bucket=bucket, Key=key)["Body"].read()
    assert stored == body.encode()

    # The queue holds a pointer to the object, peeked at without taking the message.
    plain = json_client(gateway.endpoint)
    [raw] = plain.receive_message(
        QueueUrl=url, WaitTimeSeconds=10, VisibilityTimeout=0, MessageAttributeNames=["All"]
    )["Messages"]
    assert json.loads(raw["Body"]) == [
        "software.amazon.payloadoffloading.PayloadS3Pointer",
        {"s3BucketName": bucket, "s3Key": key},
    ]
    assert raw["MessageAttributes"] == {
        **attributes,
        "ExtendedPayloadSize": {"DataType": "Number", "StringValue": str(len(body))},
    }

    [message] = sqs.receive_message(
        QueueUrl=url, WaitTimeSeconds=10, MessageAttributeNames=["All"]
    )["Messages"]
    assert len(message["Body"]) == len(body)
    assert message["Body"] == body
    assert message["MessageAttributes"]["kind"] == attributes["kind"]
    # The library hands out "-..s3BucketName..-<bucket>-..s3BucketName..--..s3Key..-<key>
    # -..s3Key..-<handle>" and, on delete, takes the text after the last "-" as <handle>.
    issued = message["ReceiptHandle"].rsplit("-..s3Key..-", 1)[1]
    # KQS issues standard base64 handles, as SQS does: no "-" for the library to split on.
    assert "-" not in issued
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert bucket_keys(s3_endpoint, bucket) == []
    assert queue_counts(gateway, url) == EMPTY
