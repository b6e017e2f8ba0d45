"""Clients with KQS's replay and browse actions (gateway/cli/sqs_model.py), in both protocols,
and the waits the replay tests share."""

from __future__ import annotations

import collections
import time
from collections.abc import Mapping
from typing import Any

from botocore.config import Config

from gateway.cli.sqs_model import kqs_session
from tests.support.group_mode import topic_of
from tests.support.harness import CREDENTIALS, REGION, _query_model_dir
from topology.log_reader import LogReader
from topology.record_format import ReplayOrigin

_CONFIG = Config(retries={"max_attempts": 1}, read_timeout=60)


def replay_client(
    protocol: str,
    endpoint: str,
    credentials: Mapping[str, str] = CREDENTIALS,
    region: str = REGION,
) -> Any:
    """A botocore SQS client speaking `protocol` ("json" or "query") that also has
    StartMessageReplayTask, ListMessageReplayTasks, CancelMessageReplayTask, PeekMessages."""
    extra = (str(_query_model_dir()),) if protocol == "query" else ()
    client = kqs_session(extra).create_client(
        "sqs", endpoint_url=endpoint, region_name=region, config=_CONFIG, **credentials
    )
    assert client.meta.service_model.protocol == protocol
    return client


def latest_task(sqs: Any, url: str) -> dict[str, Any]:
    tasks: list[dict[str, Any]] = sqs.list_message_replay_tasks(QueueUrl=url)["Tasks"]
    return tasks[0]


def wait_until_ended(sqs: Any, url: str, timeout_s: float = 30.0) -> dict[str, Any]:
    """The queue's latest replay task once it is no longer RUNNING."""
    deadline = time.monotonic() + timeout_s
    while True:
        task = latest_task(sqs, url)
        if task["Status"] not in ("RUNNING", "CANCELLING"):
            return task
        if time.monotonic() > deadline:
            raise AssertionError(f"replay task still {task['Status']} after {timeout_s} s: {task}")
        time.sleep(0.1)


def receive_all(sqs: Any, url: str, expected: int, timeout_s: float = 15.0) -> list[dict[str, Any]]:
    """Receive and delete until `expected` messages came (then nothing more is there)."""
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


def replayed_origins(bootstrap: str, queue_name: str) -> collections.Counter[tuple[int, int]]:
    """How often each source record (partition, offset) was replayed into the queue."""
    topic = topic_of(bootstrap, queue_name)
    reader = LogReader(bootstrap)
    try:
        bounds = reader.bounds(topic, reader.partition_count(topic))
        reader.open(
            topic,
            {p: low for p, (low, _) in enumerate(bounds)},
            dict(enumerate(h for _, h in bounds)),
        )
        found: collections.Counter[tuple[int, int]] = collections.Counter()
        while not reader.done:
            for logged in reader.read(1000):
                origin = ReplayOrigin.decode(logged.message.replay_of)
                assert origin is not None
                found[(origin.partition, origin.offset)] += 1
        return found
    finally:
        reader.close()
