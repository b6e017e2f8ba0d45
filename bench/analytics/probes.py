"""What the analytics benchmark watches while the load runs, each on a thread of its own.

* `Position`: how far the Spark jobs are in `__kqs_events`: the topic's end offsets, and the
  offsets of the newest batch the `metrics-kafka` query committed (its checkpoint's
  `offsets/<id>` for the highest `commits/<id>`), so lag = end - committed, in events.
* `MetricsTail`: `__kqs_metrics` as it arrives: the latest record per window of one queue,
  so the queue's counted NumberOfMessagesSent / Deleted at every arrival.
* `DashboardPoll`: the dashboard's `/api/summary` once a second: the queue's totals.
* `send_to_count_delays`: from when each message's send was acknowledged and when the count
  first reached it, the delay of each message.
"""

from __future__ import annotations

import bisect
import json
import threading
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

EVENTS_TOPIC = "__kqs_events"
METRICS_TOPIC = "__kqs_metrics"


def committed_offsets(checkpoint: Path) -> int | None:
    """Sum over partitions of `__kqs_events` offsets of the newest committed batch."""
    commits = [int(p.name) for p in (checkpoint / "commits").glob("[0-9]*") if p.name.isdigit()]
    if not commits:
        return None
    try:
        lines = (checkpoint / "offsets" / str(max(commits))).read_text().splitlines()
    except OSError:
        return None
    # v1, then the batch metadata, then one JSON object per source: {topic: {partition: offset}}
    offsets = json.loads(lines[-1]).get(EVENTS_TOPIC, {})
    return int(sum(offsets.values()))


@dataclass
class Sample:
    t: float  # epoch seconds
    events_end: int
    committed: int | None

    @property
    def lag(self) -> int | None:
        return None if self.committed is None else self.events_end - self.committed


@dataclass
class Position:
    bootstrap: str
    checkpoint: Path
    interval_s: float = 1.0
    samples: list[Sample] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def _end(self, consumer: Consumer) -> int:
        meta = consumer.list_topics(EVENTS_TOPIC, timeout=10).topics[EVENTS_TOPIC]
        total = 0
        for partition in meta.partitions:
            _low, high = consumer.get_watermark_offsets(
                TopicPartition(EVENTS_TOPIC, partition), timeout=10
            )
            total += high
        return total

    def run(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "bench-position"})
        try:
            while not self._stop.wait(self.interval_s):
                try:
                    end = self._end(consumer)
                except Exception:  # noqa: BLE001 - a slow metadata answer: next sample
                    continue
                self.samples.append(Sample(time.time(), end, committed_offsets(self.checkpoint)))
        finally:
            consumer.close()

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.run, name="position", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self._stop.set()


@dataclass
class MetricsTail:
    """The queue's NumberOfMessagesSent / Deleted totals (latest record per window) as each
    `__kqs_metrics` record arrives: (arrival epoch s, sent, deleted)."""

    bootstrap: str
    queue: str
    seen: list[tuple[float, int, int]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"bench-{uuid.uuid4().hex}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        consumer.assign([TopicPartition(METRICS_TOPIC, 0, 0)])
        windows: dict[tuple[str, int], float] = {}
        try:
            while not self._stop.is_set():
                msg = consumer.poll(0.5)
                if msg is None or msg.error() is not None:
                    continue
                record = json.loads(msg.value() or b"{}")
                if record.get("queue") != self.queue:
                    continue
                metric = record.get("metric")
                if metric in ("NumberOfMessagesSent", "NumberOfMessagesDeleted"):
                    windows[(metric, record["window_start"])] = record["sum"]
                    sent = sum(v for (m, _), v in windows.items() if m == "NumberOfMessagesSent")
                    deleted = sum(
                        v for (m, _), v in windows.items() if m == "NumberOfMessagesDeleted"
                    )
                    self.seen.append((time.time(), int(sent), int(deleted)))
        finally:
            consumer.close()

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.run, name="metrics-tail", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self._stop.set()


@dataclass
class DashboardPoll:
    """`/api/summary` every `interval_s`: (epoch s, sent, deleted, seconds the answer took)."""

    url: str
    queue: str
    interval_s: float = 1.0
    seen: list[tuple[float, int, int, float]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self._stop.wait(self.interval_s):
            began = time.time()
            try:
                with urllib.request.urlopen(f"{self.url}/api/summary", timeout=30) as response:
                    summary: dict[str, Any] = json.loads(response.read())
            except OSError:
                continue
            took = time.time() - began
            for queue in summary.get("queues", []):
                if queue.get("queue") == self.queue:
                    totals = queue.get("totals") or {}
                    self.seen.append(
                        (
                            time.time(),
                            int(totals.get("sent", 0)),
                            int(totals.get("deleted", 0)),
                            took,
                        )
                    )

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.run, name="dashboard-poll", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self._stop.set()


def send_to_count_delays(
    acked: list[tuple[float, int]], counted: list[tuple[float, int]]
) -> tuple[list[float], int]:
    """Per message, seconds from its acknowledged send to the first observation whose count
    covers it. `acked`: (epoch s, messages) per acknowledged send, in time order; `counted`:
    (epoch s, total counted) observations in time order. Returns the delays and how many
    messages were never covered."""
    times: list[float] = []
    for t, n in acked:
        times.extend([t] * n)
    delays: list[float] = []
    covered = 0
    for t_obs, total in counted:
        total = min(total, len(times))
        while covered < total:
            delays.append(max(0.0, t_obs - times[covered]))
            covered += 1
    return delays, len(times) - covered


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * q))], 2)


def lag_series(samples: list[Sample], began: float, every_s: float = 10.0) -> list[dict[str, Any]]:
    """Lag (events) every `every_s` seconds after `began`, from the nearest earlier sample."""
    out: list[dict[str, Any]] = []
    times = [s.t for s in samples]
    t = began
    while samples and t <= samples[-1].t:
        index = bisect.bisect_right(times, t) - 1
        if index >= 0:
            sample = samples[index]
            out.append(
                {"t_s": round(t - began), "events_end": sample.events_end, "lag": sample.lag}
            )
        t += every_s
    return out
