"""The dashboard server on a real broker: records in the fixed schemas in, `/api/summary` out.

Each test reads topics of its own (`Topics`), created after the dashboard started, so the
feed's discovery of new topics is exercised and nothing else in the session interferes.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest

from dashboard.feed import Topics
from dashboard.server import DashboardServer
from tests.support.dashboard_builders import (
    ACCOUNT,
    MINUTE_MS,
    create_topics,
    dlq_window,
    gauges,
    get,
    metric,
    produce,
    summary_when,
)
from tests.support.harness import free_port


@pytest.fixture
def topics() -> Topics:
    suffix = uuid.uuid4().hex[:10]
    return Topics(
        metrics=f"test-metrics-{suffix}",
        dlq_analytics=f"test-dlq-{suffix}",
        events=f"test-events-{suffix}",
    )


@pytest.fixture
def dashboard(kafka_bootstrap: str, topics: Topics) -> Iterator[DashboardServer]:
    with DashboardServer(kafka_bootstrap, port=free_port(), topics=topics) as server:
        yield server


def test_the_page_and_its_scripts_are_served(dashboard: DashboardServer) -> None:
    status, content_type, page = get(dashboard.url)
    assert (status, content_type) == (200, "text/html")
    assert b'<script src="/static/dashboard.js">' in page
    for path, kind in (("static/dashboard.js", "javascript"), ("static/dashboard.css", "css")):
        status, content_type, body = get(f"{dashboard.url}{path}")
        assert status == 200 and kind in content_type and len(body) > 500


def test_summary_shows_queue_metrics_dlq_windows_and_gauges_from_kafka(
    kafka_bootstrap: str, topics: Topics, dashboard: DashboardServer
) -> None:
    # Given the topics appearing after the dashboard started, and two complete minutes of a
    # queue, the second re-emitted with a higher count (update mode), a DLQ window and gauges
    create_topics(kafka_bootstrap, topics)
    now_ms = time.time_ns() // 1_000_000
    t0 = now_ms - now_ms % MINUTE_MS - 3 * MINUTE_MS
    key = f"{ACCOUNT}/orders"
    produce(
        kafka_bootstrap,
        [
            (topics.metrics, key, metric("orders", "NumberOfMessagesSent", t0, 120)),
            (topics.metrics, key, metric("orders", "NumberOfMessagesSent", t0 + MINUTE_MS, 30)),
            (topics.metrics, key, metric("orders", "NumberOfMessagesSent", t0 + MINUTE_MS, 90)),
            (topics.metrics, key, metric("orders", "NumberOfMessagesReceived", t0, 60)),
            (topics.metrics, key, metric("orders", "NumberOfEmptyReceives", t0, 6)),
            (
                topics.metrics,
                key,
                metric("orders", "ApproximateNumberOfMessagesVisible", t0, 240, 6, maximum=50),
            ),
            (
                topics.dlq_analytics,
                f"{ACCOUNT}/orders-dlq",
                dlq_window(
                    "orders-dlq",
                    "orders",
                    t0,
                    2,
                    [5, 5],
                    [30.0, 90.0],
                    [("error", "Timeout", 2)],
                ),
            ),
            (
                topics.events,
                key,
                {"v": 1, "type": "sent", "ts": now_ms, "account": ACCOUNT, "queue": "orders"},
            ),
            (topics.events, key, gauges("orders", now_ms, 17, 4, 2, 33.5)),
        ],
    )

    # When the page polls the summary
    summary = summary_when(
        dashboard,
        lambda s: (
            s["feed"]["records"] == {topics.metrics: 6, topics.dlq_analytics: 1, topics.events: 1}
        ),
    )

    # Then the queue's windows, rates, depth and the DLQ's analytics are there
    (queue,) = summary["queues"]
    assert (queue["account"], queue["queue"]) == (ACCOUNT, "orders")
    first, second = queue["series"]
    assert (first["t"], first["sent"], first["sent_per_s"]) == (t0, 120, 2.0)
    assert (second["sent"], second["sent_per_s"]) == (90, 1.5)  # the re-emitted window won
    assert (first["received_per_s"], first["empty_receives"], first["visible"]) == (1.0, 6, 40)
    assert queue["totals"]["sent"] == 210
    assert queue["current"] == {
        "as_of_ms": now_ms,
        "source": "gauges",
        "visible": 17,
        "not_visible": 4,
        "delayed": 2,
        "oldest_age_s": 33.5,
    }
    (dlq,) = summary["dlqs"]
    assert (dlq["dlq"], dlq["source_queue"], dlq["total_arrivals"]) == ("orders-dlq", "orders", 2)
    assert dlq["series"][0]["age_at_move_avg_s"] == 60.0
    assert dlq["top_attributes"] == [{"name": "error", "value": "Timeout", "count": 2}]
    assert summary["feed"]["error"] is None
    assert summary["feed"]["partitions"] == 6


def test_records_arriving_later_reach_the_summary(
    kafka_bootstrap: str, topics: Topics, dashboard: DashboardServer
) -> None:
    # Given a dashboard already showing one window
    create_topics(kafka_bootstrap, topics)
    now_ms = time.time_ns() // 1_000_000
    t0 = now_ms - now_ms % MINUTE_MS - 2 * MINUTE_MS
    key = f"{ACCOUNT}/live"
    produce(kafka_bootstrap, [(topics.metrics, key, metric("live", "NumberOfMessagesSent", t0, 6))])
    summary_when(dashboard, lambda s: len(s["queues"]) == 1)

    # When Spark emits the next window
    produce(
        kafka_bootstrap,
        [(topics.metrics, key, metric("live", "NumberOfMessagesSent", t0 + MINUTE_MS, 12))],
    )

    # Then the next poll of the page has it too
    summary = summary_when(dashboard, lambda s: len(s["queues"][0]["series"]) == 2)
    assert [p["sent"] for p in summary["queues"][0]["series"]] == [6, 12]


def test_a_port_in_use_fails_at_start(kafka_bootstrap: str, dashboard: DashboardServer) -> None:
    port = int(dashboard.url.rsplit(":", 1)[1].rstrip("/"))
    with pytest.raises(OSError):
        DashboardServer(kafka_bootstrap, port=port).start()


def test_kqs_dashboard_on_a_port_in_use_exits_1_saying_why(
    kafka_bootstrap: str, dashboard: DashboardServer
) -> None:
    port = dashboard.url.rsplit(":", 1)[1].rstrip("/")
    result = subprocess.run(
        [sys.executable, "-m", "gateway.cli.main", "dashboard", "--port", port]
        + ["--kafka-bootstrap", kafka_bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert f"kqs dashboard: cannot listen on 127.0.0.1:{port}" in result.stderr
