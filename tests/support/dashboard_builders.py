"""Records in the analytics topics' fixed schemas, and a realistic hour of them.

`metric`, `dlq_window` and `gauges` build one record value each (as dicts, JSON-encoded by
`encode`); `sample_traffic` builds 45 minutes of three queues and two dead-letter queues, for
the browser test and for `scripts/screenshot-dashboard`. `produce` writes records to Kafka;
`summary_when` polls a dashboard's `/api/summary` as the page does.
"""

from __future__ import annotations

import json
import math
import random
import time
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported, not in __all__
    AdminClient,
    NewTopic,
)

from dashboard.feed import Topics
from dashboard.server import DashboardServer

ACCOUNT = "000000000000"
MINUTE_MS = 60_000

Record = tuple[str, str, dict[str, Any]]  # (topic, key, value)


def stats(
    total: float, count: int, minimum: float | None = None, maximum: float | None = None
) -> dict[str, Any]:
    average = total / count if count else 0.0
    return {
        "sum": total,
        "average": average,
        "minimum": average if minimum is None else minimum,
        "maximum": average if maximum is None else maximum,
        "sample_count": count,
    }


def metric(
    queue: str,
    name: str,
    window_start_ms: int,
    total: float,
    count: int = 1,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    account: str = ACCOUNT,
) -> dict[str, Any]:
    return {
        "v": 1,
        "account": account,
        "queue": queue,
        "metric": name,
        "window_start": window_start_ms,
        "window_end": window_start_ms + MINUTE_MS,
        **stats(total, count, minimum, maximum),
    }


def dlq_window(
    dlq: str,
    source_queue: str,
    window_start_ms: int,
    arrivals: int,
    receive_counts: list[int],
    ages_s: list[float],
    top_attributes: Iterable[tuple[str, str, int]] = (),
    account: str = ACCOUNT,
    attribute_counts: Iterable[tuple[str, str, int]] | None = None,
) -> dict[str, Any]:
    """A `__kqs_dlq_analytics` value; `attribute_counts` None leaves the field out, as records
    written before Spark carried every value's count did."""
    counts = (
        {}
        if attribute_counts is None
        else {
            "attribute_counts": [
                {"name": name, "value": value, "count": count}
                for name, value, count in attribute_counts
            ]
        }
    )
    return {
        "v": 1,
        "account": account,
        "dlq": dlq,
        "source_queue": source_queue,
        "window_start": window_start_ms,
        "window_end": window_start_ms + MINUTE_MS,
        "arrivals": arrivals,
        "receive_count": stats(
            sum(receive_counts), len(receive_counts), min(receive_counts), max(receive_counts)
        ),
        "age_at_move_s": stats(sum(ages_s), len(ages_s), min(ages_s), max(ages_s)),
        "top_attributes": [
            {"name": name, "value": value, "count": count} for name, value, count in top_attributes
        ],
        **counts,
    }


def gauges(
    queue: str,
    ts_ms: int,
    visible: int,
    not_visible: int,
    delayed: int,
    oldest_age_s: float,
    account: str = ACCOUNT,
) -> dict[str, Any]:
    return {
        "v": 1,
        "type": "gauges",
        "ts": ts_ms,
        "account": account,
        "queue": queue,
        "count": 1,
        "visible": visible,
        "not_visible": not_visible,
        "delayed": delayed,
        "oldest_age_s": oldest_age_s,
    }


def create_topics(bootstrap: str, topics: Topics, partitions: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [topics.metrics, topics.dlq_analytics, topics.events]
    futures = admin.create_topics([NewTopic(name, partitions, 1) for name in names])
    for future in futures.values():
        future.result(timeout=30)


def produce(bootstrap: str, records: Iterable[Record]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for topic, key, value in records:
        producer.produce(topic, key=key, value=json.dumps(value).encode())
        producer.poll(0)
    assert producer.flush(30) == 0, "records not delivered"


# -- reading the dashboard back -----------------------------------------------------------------


def get(url: str) -> tuple[int, str, bytes]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, response.headers["Content-Type"], response.read()


def summary_when(
    server: DashboardServer, ready: Callable[[dict[str, Any]], bool], timeout_s: float = 60
) -> dict[str, Any]:
    """Poll `/api/summary` as the page does until `ready` holds (the feed reads in the back)."""
    deadline = time.monotonic() + timeout_s
    while True:
        _, _, body = get(f"{server.url}api/summary")
        summary: dict[str, Any] = json.loads(body)
        if ready(summary):
            return summary
        if time.monotonic() > deadline:
            raise AssertionError(f"summary never got there: {json.dumps(summary)[:2000]}")
        time.sleep(0.2)


# -- a realistic 45 minutes ------------------------------------------------------------------


@dataclass
class _QueueState:
    visible: float
    in_flight: float
    delayed: float
    oldest_age_s: float


def _queue_minutes(
    topics: Topics,
    queue: str,
    starts: list[int],
    current_fraction: float,
    rng: random.Random,
    *,
    rate: float,
    capacity: float,
    delayed_share: float,
    empty_per_min: float,
    dlq_per_min: float,
) -> tuple[list[Record], _QueueState]:
    """One queue's windows: steady load, and a burst its consumers (`capacity` x `rate`) drain late."""
    records: list[Record] = []
    key = f"{ACCOUNT}/{queue}"
    backlog = rate * 20
    state = _QueueState(0, 0, 0, 0)
    for i, start in enumerate(starts):
        phase = i / max(len(starts) - 1, 1)
        # The current window has only run `current_fraction` of its minute.
        share = current_fraction if i == len(starts) - 1 else 1.0
        burst = 0.4 < phase < 0.6
        load = (1.0 + 0.15 * math.sin(phase * 9.0)) * (2.2 if burst else 1.0)
        sent = round(rate * 60 * load * rng.uniform(0.93, 1.07) * share)
        can_take = rate * 60 * capacity * rng.uniform(0.95, 1.05) * share
        received = round(min(can_take, backlog * 0.6 + sent))
        deleted = round(received * rng.uniform(0.96, 0.99))
        moved = round(dlq_per_min * rng.uniform(0.2, 1.6) * (2.5 if burst else 1) * share)
        backlog = max(rate * 10, backlog + sent - deleted - moved)
        in_flight = min(rate * 60 * 0.05 * load * rng.uniform(0.8, 1.2), backlog * 0.4)
        delayed = min(rate * 60 * delayed_share * load * rng.uniform(0.8, 1.2), backlog * 0.3)
        visible = max(0.0, backlog - in_flight - delayed)
        oldest = 3 + backlog / (rate * capacity) * rng.uniform(0.85, 1.1)
        state = _QueueState(visible, in_flight, delayed, oldest)
        empty = round(empty_per_min * rng.uniform(0.6, 1.4) * (0.1 if burst else 1) * share)
        sizes = [rng.uniform(300, 2400) for _ in range(8)]
        counts = {
            "NumberOfMessagesSent": sent,
            "NumberOfMessagesReceived": received,
            "NumberOfMessagesDeleted": deleted,
            "NumberOfEmptyReceives": empty,
            "NumberOfMessagesMovedToDLQ": moved,
            "NumberOfMessagesExpired": 0,
        }
        for name, total in counts.items():
            records.append((topics.metrics, key, metric(queue, name, start, total, max(total, 1))))
        mean_size = sum(sizes) / len(sizes)
        records.append(
            (
                topics.metrics,
                key,
                metric(
                    queue,
                    "SentMessageSize",
                    start,
                    mean_size * sent,
                    max(sent, 1),
                    minimum=min(sizes),
                    maximum=max(sizes),
                ),
            )
        )
        for name, value in (
            ("ApproximateNumberOfMessagesVisible", visible),
            ("ApproximateNumberOfMessagesNotVisible", in_flight),
            ("ApproximateNumberOfMessagesDelayed", delayed),
        ):
            records.append((topics.metrics, key, metric(queue, name, start, value * 6, 6)))
        records.append(
            (
                topics.metrics,
                key,
                metric(
                    queue, "ApproximateAgeOfOldestMessage", start, oldest * 6, 6, maximum=oldest
                ),
            )
        )
    return records, state


def sample_traffic(topics: Topics, now_ms: int, minutes: int = 45, seed: int = 7) -> list[Record]:
    """Three queues and two DLQs over the last `minutes` minutes, ending with the current one."""
    rng = random.Random(seed)
    current = now_ms - now_ms % MINUTE_MS
    current_fraction = max((now_ms - current) / MINUTE_MS, 0.05)
    starts = [current - (minutes - 1 - i) * MINUTE_MS for i in range(minutes)]
    records: list[Record] = []
    states: dict[str, _QueueState] = {}
    for queue, rate, capacity, delayed_share, empty_per_min, dlq_per_min in (
        ("orders", 38.0, 1.6, 0.01, 12, 3),
        ("payments", 9.0, 1.4, 0.3, 30, 1),
        ("emails", 1.5, 4.0, 0.0, 220, 0),
    ):
        queue_records, states[queue] = _queue_minutes(
            topics, queue, starts, current_fraction, rng, rate=rate, capacity=capacity,
            delayed_share=delayed_share, empty_per_min=empty_per_min, dlq_per_min=dlq_per_min,
        )  # fmt: skip
        records += queue_records
    for dlq, source, per_min, max_receives in (
        ("orders-dlq", "orders", 3, 5),
        ("payments-dlq", "payments", 1, 3),
    ):
        for i, start in enumerate(starts):
            phase = i / max(len(starts) - 1, 1)
            arrivals = round(per_min * rng.uniform(0.2, 1.6) * (2.5 if 0.45 < phase < 0.7 else 1))
            if arrivals == 0:
                continue
            ages = [rng.uniform(40, 900) for _ in range(arrivals)]
            errors = [("error", "TimeoutError"), ("error", "ValidationError"), ("tenant", "acme")]
            top = [(n, v, max(1, round(arrivals * rng.uniform(0.1, 0.9)))) for n, v in errors]
            records.append(
                (
                    topics.dlq_analytics,
                    f"{ACCOUNT}/{dlq}",
                    dlq_window(dlq, source, start, arrivals, [max_receives] * arrivals, ages, top),
                )
            )
    # The gateway's gauge samples of the last two minutes, every 10 s, around the latest state.
    for queue, state in states.items():
        for k in range(12):
            wobble = 1 + 0.05 * math.sin(k / 2)
            records.append(
                (
                    topics.events,
                    f"{ACCOUNT}/{queue}",
                    gauges(
                        queue,
                        now_ms - (11 - k) * 10_000,
                        round(state.visible * wobble),
                        round(state.in_flight * wobble),
                        round(state.delayed * wobble),
                        round(state.oldest_age_s * wobble, 1),
                    ),
                )
            )
    return records
