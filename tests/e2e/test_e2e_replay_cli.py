"""`kqs replay` and `kqs peek` against a running gateway: signed with the credentials of the
environment, progress while it runs, the count at the end."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from typing import Any

import pytest

from tests.support.harness import CREDENTIALS, REGION, GatewayProcess, json_client
from tests.support.replay import receive_all


def kqs(*args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": CREDENTIALS["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": CREDENTIALS["aws_secret_access_key"],
        "AWS_DEFAULT_REGION": REGION,
    }
    return subprocess.run(
        [sys.executable, "-m", "gateway.cli.entry", *args],  # as the `kqs` script starts
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


@pytest.fixture
def sqs(gateway: GatewayProcess) -> Any:
    return json_client(gateway.endpoint)


def test_kqs_replay_brings_deleted_messages_back_with_one_command(sqs: Any) -> None:
    # Given a queue whose three messages were deleted
    url = sqs.create_queue(QueueName=f"cli-{uuid.uuid4().hex[:12]}")["QueueUrl"]
    for body in ("one", "two", "three"):
        sqs.send_message(QueueUrl=url, MessageBody=body)
    receive_all(sqs, url, 3)

    # When `kqs replay` is run for the last minute (the endpoint: the queue URL's host)
    done = kqs("replay", url, "--since", "1m")

    # Then it printed its progress and the count, and the messages are back
    assert done.returncode == 0, done.stderr
    assert "3 messages in range" in done.stdout
    assert re.search(r"3/3 replayed \(\d+/s\)", done.stdout), done.stdout
    assert done.stdout.rstrip().endswith("completed: 3 messages replayed")
    assert sorted(m["Body"] for m in receive_all(sqs, url, 3)) == ["one", "three", "two"]
    listed = kqs("replay", url, "--list")
    assert listed.returncode == 0 and listed.stdout.startswith("COMPLETED  3/3 replayed")


def test_kqs_peek_shows_messages_and_how_far_back_a_replay_reaches(sqs: Any) -> None:
    # Given a queue with a deleted and a visible message
    url = sqs.create_queue(QueueName=f"cli-peek-{uuid.uuid4().hex[:12]}")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="gone")
    receive_all(sqs, url, 1)
    sqs.send_message(QueueUrl=url, MessageBody="still here")

    # When it is peeked at, all of it and the visible ones only
    everything = kqs("peek", url)
    visible = kqs("peek", url, "--status", "visible", "--endpoint-url", url.rsplit("/", 2)[0])

    # Then both show what they should, and the visible message was not received
    assert everything.returncode == 0, everything.stderr
    assert "a replay can reach back to" in everything.stdout
    assert "the topic keeps records 349200000 ms" in everything.stdout
    assert re.search(r"DELETED\s+- .* gone", everything.stdout), everything.stdout
    assert re.search(r"VISIBLE\s+0 .* still here", everything.stdout), everything.stdout
    assert everything.stdout.rstrip().endswith("2 messages")
    assert "gone" not in visible.stdout and "still here" in visible.stdout
    received = sqs.receive_message(QueueUrl=url, AttributeNames=["ApproximateReceiveCount"])
    assert received["Messages"][0]["Attributes"]["ApproximateReceiveCount"] == "1"


def test_kqs_replay_refuses_a_range_beyond_retention_and_cancels(sqs: Any) -> None:
    # Given a queue keeping messages a minute, and one holding 50
    short = sqs.create_queue(
        QueueName=f"cli-short-{uuid.uuid4().hex[:12]}", Attributes={"MessageRetentionPeriod": "60"}
    )["QueueUrl"]
    slow = sqs.create_queue(QueueName=f"cli-slow-{uuid.uuid4().hex[:12]}")["QueueUrl"]
    for start in range(0, 50, 10):
        sqs.send_message_batch(
            QueueUrl=slow,
            Entries=[{"Id": str(i), "MessageBody": f"m{start + i}"} for i in range(10)],
        )

    # When a replay of the last hour is asked of the first, and a slow one of the second is
    # started and cancelled
    refused = kqs("replay", short, "--since", "1h")
    started = kqs("replay", slow, "--since", "5m", "--rate", "2", "--no-wait")
    handle = started.stdout.split("handle ")[-1].strip()
    cancelled = kqs("replay", "--cancel", handle, "--endpoint-url", slow.rsplit("/", 2)[0])

    # Then the first says how far back it can go, and the second stops
    assert refused.returncode == 1
    assert "InvalidParameterValue" in refused.stderr
    assert "oldest available time" in refused.stderr
    assert started.returncode == 0, started.stderr
    assert cancelled.returncode == 0, cancelled.stderr
    assert cancelled.stdout.startswith("cancelled; ")
