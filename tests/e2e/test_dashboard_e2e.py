"""The dashboard beside a real `kqs serve`: the gateway's own gauge samples show a queue's depth.

No Spark job is needed for the current depth: the gateway publishes a `gauges` event per queue
to `__kqs_events` every 10 s, and the dashboard reads it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from dashboard.server import DashboardServer
from tests.support.dashboard_builders import summary_when
from tests.support.harness import GatewayProcess, NewQueue, free_port


@pytest.fixture
def dashboard(kafka_bootstrap: str, gateway: GatewayProcess) -> Iterator[DashboardServer]:
    with DashboardServer(kafka_bootstrap, port=free_port()) as server:
        yield server


@pytest.mark.parametrize("protocol", ["json"], indirect=True)
def test_a_queue_s_depth_reaches_the_dashboard_from_the_gateway_s_gauges(
    sqs: Any, new_queue: NewQueue, dashboard: DashboardServer
) -> None:
    # Given a queue with three messages sent and one of them received
    url = new_queue("dash")
    name = url.rsplit("/", 1)[1]
    for body in ("a", "b", "c"):
        sqs.send_message(QueueUrl=url, MessageBody=body)
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, VisibilityTimeout=600)
    assert len(received["Messages"]) == 1
    sent_at_ms = time.time_ns() // 1_000_000

    # When the gateway's next gauge samples are read
    def depth_shown(summary: dict[str, Any]) -> bool:
        return any(
            q["queue"] == name
            and q["current"] is not None
            and q["current"]["as_of_ms"] >= sent_at_ms
            for q in summary["queues"]
        )

    summary = summary_when(dashboard, depth_shown, timeout_s=90)

    # Then the dashboard shows two visible and one in flight, as GetQueueAttributes does
    (queue,) = [q for q in summary["queues"] if q["queue"] == name]
    current = queue["current"]
    assert (current["source"], current["visible"], current["not_visible"], current["delayed"]) == (
        "gauges",
        2,
        1,
        0,
    )
    assert queue["depth"][-1]["visible"] == 2
