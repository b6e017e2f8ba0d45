"""The dashboard page in headless chromium, over 45 realistic minutes read from a real broker.

The page's DOM is dumped after its scripts ran (fetching `/api/summary`, drawing SVG), then
read back: a card per queue and per DLQ source, every chart with drawn points, and the figures
the summary holds. A screenshot is taken too (`scripts/screenshot-dashboard` regenerates the
one in docs/ the same way).
"""

from __future__ import annotations

import os
import struct
import time
import uuid
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from dashboard.feed import Topics
from dashboard.server import DashboardServer
from tests.support.browser import dump_dom, find_chromium, screenshot
from tests.support.dashboard_builders import (
    Record,
    create_topics,
    produce,
    sample_traffic,
    summary_when,
)
from tests.support.harness import free_port

QUEUE_CHARTS = {"depth", "rates", "empty", "age"}
DLQ_CHARTS = {"arrivals", "receive-count", "age-at-move", "attributes"}


@pytest.fixture(scope="module")
def chromium() -> str:
    found = find_chromium()
    if found is None:
        reason = "no chromium binary on PATH (scripts/install test installs Debian's as root)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return found


Sample = tuple[DashboardServer, dict[str, Any], list[Record]]


@pytest.fixture(scope="module")
def sample_dashboard(kafka_bootstrap: str) -> Iterator[Sample]:
    """The dashboard once it has read the whole sample, its summary then, and the sample."""
    suffix = uuid.uuid4().hex[:10]
    topics = Topics(f"page-metrics-{suffix}", f"page-dlq-{suffix}", f"page-events-{suffix}")
    create_topics(kafka_bootstrap, topics)
    records = sample_traffic(topics, time.time_ns() // 1_000_000)
    produce(kafka_bootstrap, records)
    with DashboardServer(kafka_bootstrap, port=free_port(), topics=topics) as server:
        summary = summary_when(
            server, lambda s: sum(s["feed"]["records"].values()) == len(records), timeout_s=90
        )
        yield server, summary, records


class _Page(HTMLParser):
    """Per card (queue or DLQ): its charts' drawn points, series paths and visible text."""

    def __init__(self) -> None:
        super().__init__()
        self.cards: dict[str, dict[str, Any]] = {}
        self.status = ""
        self._divs: list[str | None] = []  # the card each open <div> belongs to
        self._chart: str | None = None
        self._in_status = False

    def _card(self) -> dict[str, Any] | None:
        name = next((n for n in reversed(self._divs) if n is not None), None)
        return None if name is None else self.cards[name]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "div":
            name = None
            if "card" in classes:
                kind = "queue" if "queue" in classes else "dlq"
                name = f"{kind}:{a.get(f'data-{kind}')}"
                self.cards[name] = {"charts": {}, "paths": {}, "text": []}
            self._divs.append(name)
            if "chart" in classes and a.get("data-chart"):
                self._chart = a["data-chart"]
                card = self._card()
                assert card is not None
                card["charts"][self._chart] = int(a.get("data-points") or 0)
                card["paths"][self._chart] = 0
        elif tag == "path" and "series" in classes:
            card = self._card()
            if card is not None and self._chart is not None:
                card["paths"][self._chart] += 1
        self._in_status = a.get("id") == "status"

    def handle_endtag(self, tag: str) -> None:
        if tag == "div" and self._divs:
            self._divs.pop()
        self._in_status = False

    def handle_data(self, data: str) -> None:
        if self._in_status:
            self.status += data
        card = self._card()
        if card is not None and data.strip():
            card["text"].append(data.strip())


def _compact(v: int) -> str:
    """The page's number format (`compact` in dashboard.js), for the counts the test compares."""
    if v >= 1_000_000:
        return f"{v / 1_000_000:.1f}M"
    if v >= 10_000:
        return f"{v / 1000:.0f}k"
    if v >= 1000:
        return f"{v / 1000:.1f}k"
    return str(v)


def _figure(text: list[str], label: str) -> str:
    return text[text.index(label) + 1]


def test_the_page_draws_every_chart_with_data(chromium: str, sample_dashboard: Sample) -> None:
    # Given the dashboard over the sample's three queues and two DLQs
    server, summary, _ = sample_dashboard
    # When chromium loads the page and its scripts run
    page = _Page()
    page.feed(dump_dom(chromium, server.url))
    # Then there is a card per queue and per DLQ source, every chart drawn with data
    assert set(page.cards) == {
        "queue:emails",
        "queue:orders",
        "queue:payments",
        "dlq:orders-dlq",
        "dlq:payments-dlq",
    }
    for name, card in page.cards.items():
        expected = QUEUE_CHARTS if name.startswith("queue:") else DLQ_CHARTS
        assert set(card["charts"]) == expected, name
        for chart, points in card["charts"].items():
            assert points > 0 and card["paths"][chart] > 0, (name, chart, card)
    # ... 45 windows of sent / received / deleted lines, the depth as three stacked areas
    orders = page.cards["queue:orders"]
    assert orders["charts"]["rates"] == 3 * 45
    assert orders["paths"]["depth"] == 3
    # ... and the figures of the summary
    for queue in summary["queues"]:
        text = page.cards[f"queue:{queue['queue']}"]["text"]
        assert _figure(text, "Visible") == _compact(queue["current"]["visible"])
        assert _figure(text, "In flight") == _compact(queue["current"]["not_visible"])
        assert _figure(text, "Delayed") == _compact(queue["current"]["delayed"])
    for dlq in summary["dlqs"]:
        text = page.cards[f"dlq:{dlq['dlq']}"]["text"]
        assert f"{dlq['dlq']} ← {dlq['source_queue']}" in text
        assert _figure(text, "Arrivals") == _compact(dlq["total_arrivals"])
        assert "error=TimeoutError" in text
    assert "records" in page.status and "unreachable" not in page.status


TOTALS = {
    "Sent": "NumberOfMessagesSent",
    "Received": "NumberOfMessagesReceived",
    "Deleted": "NumberOfMessagesDeleted",
    "Moved to DLQ": "NumberOfMessagesMovedToDLQ",
}


def test_each_card_shows_the_totals_of_the_known_workload(
    chromium: str, sample_dashboard: Sample
) -> None:
    # Given the dashboard over 45 minutes of known records (one per queue, metric and minute)
    server, _, records = sample_dashboard
    sums: dict[tuple[str, str], float] = {}
    arrivals: dict[str, int] = {}
    for _, _, value in records:
        if "metric" in value:
            key = (value["queue"], value["metric"])
            sums[key] = sums.get(key, 0.0) + value["sum"]
        elif "dlq" in value:
            arrivals[value["dlq"]] = arrivals.get(value["dlq"], 0) + value["arrivals"]
    # When chromium loads the page
    page = _Page()
    page.feed(dump_dom(chromium, server.url))
    # Then each queue card shows, over the range shown, what was sent, received, deleted and
    # moved to a DLQ, equal to the sample's sums
    for queue in ("orders", "payments", "emails"):
        text = page.cards[f"queue:{queue}"]["text"]
        assert any(t.startswith("Totals since ") for t in text), text
        shown = {label: _figure(text, label) for label in TOTALS}
        assert shown == {
            label: _compact(round(sums[(queue, metric)])) for label, metric in TOTALS.items()
        }, queue
    assert sums[("orders", "NumberOfMessagesMovedToDLQ")] > 0
    # and each DLQ card its arrivals
    for dlq, total in arrivals.items():
        assert _figure(page.cards[f"dlq:{dlq}"]["text"], "Arrivals") == _compact(total)


def test_a_screenshot_of_the_page_is_taken(
    chromium: str, sample_dashboard: Sample, tmp_path: Path
) -> None:
    server, _, _ = sample_dashboard
    path = tmp_path / "dashboard.png"
    screenshot(chromium, server.url, path, width=1400, height=1400)
    png = path.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert (width, height) == (1400, 1400)
    # A page of charts, not an empty or error page (those compress to a few kB).
    assert len(png) > 60_000
