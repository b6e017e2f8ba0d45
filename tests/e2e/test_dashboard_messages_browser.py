"""The dashboard's message list in headless chromium, over a real gateway and broker: a DLQ
card opens its messages with their source queue, a button replays one to its source, and
looking receives nothing (dashboard/messages.py, static/messages.js)."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.credentials import Credentials

from dashboard.feed import Topics
from dashboard.messages import GatewayClient
from dashboard.server import DashboardServer
from tests.support.browser import find_chromium
from tests.support.dashboard_builders import (
    MINUTE_MS,
    create_topics,
    dlq_window,
    metric,
    produce,
    summary_when,
)
from tests.support.devtools import Page, browser_page
from tests.support.harness import ACCOUNT_ID, CREDENTIALS, GatewayProcess, free_port, json_client


@pytest.fixture(scope="module")
def chromium() -> str:
    found = find_chromium()
    if found is None:
        reason = "no chromium binary on PATH (scripts/install test installs Debian's as root)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return found


@pytest.fixture
def sqs(gateway: GatewayProcess) -> Any:
    return json_client(gateway.endpoint)


def dead_lettered(sqs: Any, bodies: list[str]) -> tuple[str, str]:
    """A source queue (maxReceiveCount 1) whose `bodies` went to its DLQ: (source, DLQ) names."""
    suffix = uuid.uuid4().hex[:10]
    dlq = sqs.create_queue(QueueName=f"page-dlq-{suffix}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]
    redrive = json.dumps({"deadLetterTargetArn": arn["QueueArn"], "maxReceiveCount": 1})
    source = sqs.create_queue(
        QueueName=f"page-src-{suffix}", Attributes={"RedrivePolicy": redrive}
    )["QueueUrl"]
    for body in bodies:
        sqs.send_message(QueueUrl=source, MessageBody=body)
    assert len(
        sqs.receive_message(QueueUrl=source, MaxNumberOfMessages=10, VisibilityTimeout=0)[
            "Messages"
        ]
    ) == len(bodies)
    assert "Messages" not in sqs.receive_message(QueueUrl=source, MaxNumberOfMessages=10)
    return source.rsplit("/", 1)[1], dlq.rsplit("/", 1)[1]


@pytest.fixture
def page(chromium: str) -> Iterator[Page]:
    with browser_page(chromium) as opened:
        yield opened


def test_a_dlq_card_opens_its_messages_and_replays_one_to_its_source(
    sqs: Any, gateway: GatewayProcess, kafka_bootstrap: str, page: Page
) -> None:
    # Given two messages dead-lettered, the DLQ's analytics on its topics, and a dashboard
    # that browses through the gateway
    source, dlq = dead_lettered(sqs, ["lost order 1", "lost order 2"])
    dlq_url = f"{gateway.endpoint}/{ACCOUNT_ID}/{dlq}"
    source_url = f"{gateway.endpoint}/{ACCOUNT_ID}/{source}"
    suffix = uuid.uuid4().hex[:10]
    topics = Topics(f"msg-metrics-{suffix}", f"msg-dlq-{suffix}", f"msg-events-{suffix}")
    create_topics(kafka_bootstrap, topics)
    minute = time.time_ns() // 1_000_000 // MINUTE_MS * MINUTE_MS
    produce(
        kafka_bootstrap,
        [
            (topics.metrics, source, metric(source, "NumberOfMessagesSent", minute, 2)),
            (topics.dlq_analytics, dlq, dlq_window(dlq, source, minute, 2, [1, 1], [0.1, 0.2])),
        ],
    )
    before = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["All"])["Attributes"]
    credentials = Credentials(
        CREDENTIALS["aws_access_key_id"], CREDENTIALS["aws_secret_access_key"]
    )
    client = GatewayClient(gateway.endpoint, "us-east-1", credentials)
    with DashboardServer(
        kafka_bootstrap, port=free_port(), topics=topics, gateway=client
    ) as server:
        summary_when(server, lambda s: bool(s["dlqs"]) and bool(s["queues"]), timeout_s=60)

        # When the DLQ card's link is followed and the first message replayed to its source
        page.goto(server.url)
        href = page.wait_for("(document.querySelector('.card.dlq a.open') || {}).href")
        assert page.evaluate("document.querySelectorAll('.card.queue a.open').length") == 1
        page.goto(href)
        assert page.wait_for("document.body.dataset.loaded") == "2"
        rows = page.evaluate(
            "[...document.querySelectorAll('#rows tr')].map(r => [...r.cells].map(c => c.textContent))"
        )
        retention = page.evaluate("document.getElementById('retention').textContent")
        page.evaluate("document.querySelector('button.replay').click()")
        replayed = page.wait_for("(document.querySelector('.replayed') || {}).textContent")

    # Then the page showed both with their source queue and state, and the reach of a replay
    assert sorted(row[4] for row in rows) == ["lost order 1", "lost order 2"]
    assert {row[5] for row in rows} == {source}
    assert {row[1] for row in rows} == {"VISIBLE"}
    assert all(row[6] == "Replay to source" for row in rows)
    assert "a replay can reach back to" in retention
    assert replayed == f"replayed to {source}"
    # and the message is back in its source queue, while the DLQ was not touched by looking
    deadline = time.monotonic() + 15
    back: list[dict[str, Any]] = []
    while not back and time.monotonic() < deadline:
        back = sqs.receive_message(
            QueueUrl=source_url, WaitTimeSeconds=1, AttributeNames=["All"]
        ).get("Messages", [])
    assert [m["Body"] for m in back] in (["lost order 1"], ["lost order 2"])
    assert "KqsReplayOfMessageId" in back[0]["Attributes"]
    after = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["All"])["Attributes"]
    counts = ("ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible")
    assert [after[c] for c in counts] == [before[c] for c in counts] == ["2", "0"]
