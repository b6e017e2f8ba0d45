"""What the Spark analytics must output for a set of `__kqs_events`, computed in plain Python.

An independent re-statement of `spark_streaming/transforms.py`'s rules (docs/architecture/
analytics.md), so a test can check Spark's outputs against the events that were really in
the topic, whatever a crash or a restart lost or repeated upstream of it:

* a count event (sent, received, ...) is one sample of value `count` (default 1) of its
  metric; a DLQ move counts NumberOfMessagesMovedToDLQ on the source queue;
* a `sent` event is one SentMessageSize sample per message: `size`, or each of `sizes`;
* a `gauges` snapshot is one sample of each Approximate* metric;
* per (queue, metric, 1-minute window of `ts`): sum, minimum, maximum and sample count;
* `moved_to_dlq` per (DLQ, source queue, window): the arrivals (sum of `count`).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, TopicPartition

WINDOW_MS = 60_000
COUNT_METRICS = {
    "sent": "NumberOfMessagesSent",
    "received": "NumberOfMessagesReceived",
    "deleted": "NumberOfMessagesDeleted",
    "empty_receive": "NumberOfEmptyReceives",
    "moved_to_dlq": "NumberOfMessagesMovedToDLQ",
    "expired": "NumberOfMessagesExpired",
    "purged": "NumberOfMessagesPurged",
}
GAUGE_METRICS = {
    "visible": "ApproximateNumberOfMessagesVisible",
    "not_visible": "ApproximateNumberOfMessagesNotVisible",
    "delayed": "ApproximateNumberOfMessagesDelayed",
    "oldest_age_s": "ApproximateAgeOfOldestMessage",
}
REQUIRED = ("type", "ts", "account", "queue")

# (queue, metric, window_start ms) and (dlq, source queue, window_start ms)
MetricKey = tuple[str, str, int]
DlqKey = tuple[str, str, int]


@dataclass
class Stats:
    """CloudWatch's statistics of one window's samples (the average is sum / sample_count)."""

    sum: float = 0.0
    minimum: float = float("inf")
    maximum: float = float("-inf")
    sample_count: int = 0

    def add(self, value: float) -> None:
        self.sum += value
        self.minimum = min(self.minimum, value)
        self.maximum = max(self.maximum, value)
        self.sample_count += 1

    def as_tuple(self) -> tuple[float, float, float, int]:
        return (self.sum, self.minimum, self.maximum, self.sample_count)


def window_of(ts_ms: int) -> int:
    return ts_ms - ts_ms % WINDOW_MS


def _samples(event: dict[str, Any]) -> Iterable[tuple[str, str, float]]:
    """(queue, metric, value) of each CloudWatch data point the event stands for."""
    kind, queue = event["type"], event["queue"]
    if kind in COUNT_METRICS:
        if kind == "moved_to_dlq":
            queue = event.get("source_queue") or queue
        count = event.get("count")
        yield queue, COUNT_METRICS[kind], float(1 if count is None else count)
    if kind == "sent":
        if event.get("size") is not None:
            yield queue, "SentMessageSize", float(event["size"])
        for size in event.get("sizes") or ():
            yield queue, "SentMessageSize", float(size)
    if kind == "gauges":
        for field, metric in GAUGE_METRICS.items():
            if event.get(field) is not None:
                yield queue, metric, float(event[field])


def expected_metrics(events: Iterable[dict[str, Any]]) -> dict[MetricKey, Stats]:
    windows: dict[MetricKey, Stats] = {}
    for event in events:
        if event.get("v") != 1 or any(event.get(f) is None for f in REQUIRED):
            continue
        start = window_of(event["ts"])
        for queue, metric, value in _samples(event):
            windows.setdefault((queue, metric, start), Stats()).add(value)
    return windows


def expected_dlq_arrivals(events: Iterable[dict[str, Any]]) -> dict[DlqKey, int]:
    arrivals: dict[DlqKey, int] = {}
    for event in events:
        if event.get("v") != 1 or event.get("type") != "moved_to_dlq":
            continue
        key = (event["queue"], event.get("source_queue") or "", window_of(event["ts"]))
        count = event.get("count")
        arrivals[key] = arrivals.get(key, 0) + (1 if count is None else int(count))
    return arrivals


def read_topic(bootstrap: str, topic: str, timeout_s: float = 60.0) -> list[dict[str, Any]]:
    """Every record value (JSON) of `topic`, partition by partition, up to its current end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"oracle-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
        }
    )
    values: list[dict[str, Any]] = []
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        for partition in sorted(partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), 10)
            if high <= low:
                continue
            consumer.assign([TopicPartition(topic, partition, low)])
            offset, deadline = low, time.monotonic() + timeout_s
            while offset < high:
                assert time.monotonic() < deadline, f"{topic} not readable"
                msg = consumer.poll(1.0)
                if msg is None:
                    continue
                assert msg.error() is None, msg.error()
                offset = (msg.offset() or 0) + 1
                value = msg.value()
                if value is not None:
                    values.append(json.loads(value))
    finally:
        consumer.close()
    return values


def latest_per_window(records: Iterable[dict[str, Any]], *key: str) -> dict[Any, dict[str, Any]]:
    """Update mode re-emits a window whenever it changes: a reader keeps the last record."""
    last: dict[Any, dict[str, Any]] = {}
    for record in records:
        last[(*(record[k] for k in key), record["window_start"])] = record
    return last
