"""The jobs at seed 004's scale: the events of 10,000 queues, in real time.

A gateway serving seed 004's profile (100 users x 100 queues) publishes, per queue, a
`gauges` snapshot every 10 s and one event per request (a SendMessageBatch, ReceiveMessage or
DeleteMessageBatch of 10 stands for its 10 messages). `EventStream` produces exactly those
records (topology/event_format.py, the gateway's own builders) to `__kqs_events` at the
gateway's pace: every queue's gauges each 10 s and `requests_per_s` request events spread
over the queues, stamped with the current time. The jobs run beside it as `kqs analytics`
does; the batch lines then say how much state the aggregations hold (rows of open windows,
the state store's memory) and how long each batch took, and the dashboard is asked for its
50 busiest queues and for a search, timed.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Producer

from topology import event_format

ACCOUNT = "000000000000"
REGION = "us-east-1"
GAUGE_INTERVAL_S = 10.0


@dataclass
class EventStream:
    bootstrap: str
    queues: int
    requests_per_s: float
    produced: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def names(self) -> list[str]:
        users = max(1, self.queues // 100)
        per_user = self.queues // users
        return [f"user{u:03d}-queue{q:03d}" for u in range(users) for q in range(per_user)]

    def run(self) -> None:
        producer = Producer(
            {"bootstrap.servers": self.bootstrap, "linger.ms": 50, "compression.type": "lz4"}
        )
        names = self.names()
        next_gauges = time.monotonic()
        cursor = 0
        tick_s = 0.1
        owed = 0.0
        sequence = 0
        while not self._stop.is_set():
            began = time.monotonic()
            now_ms = int(time.time() * 1000)
            if began >= next_gauges:
                for name in names:
                    event = event_format.gauges(now_ms, ACCOUNT, name, 10, 0, 0, 5, region=REGION)
                    self._produce(producer, name, event)
                next_gauges += GAUGE_INTERVAL_S
            owed += self.requests_per_s * tick_s
            while owed >= 3:
                name = names[cursor % len(names)]
                cursor += 1
                ids = [f"m{sequence + i}" for i in range(10)]
                sequence += 10
                for event in (
                    event_format.sent(
                        now_ms, ACCOUNT, name, [(i, 1024) for i in ids], region=REGION
                    ),
                    event_format.received(
                        now_ms, ACCOUNT, name, [(i, 1) for i in ids], region=REGION
                    ),
                    event_format.deleted(now_ms, ACCOUNT, name, ids, region=REGION),
                ):
                    self._produce(producer, name, event)
                owed -= 3
            producer.poll(0)
            self._stop.wait(max(0.0, tick_s - (time.monotonic() - began)))
        producer.flush(30)

    def _produce(self, producer: Producer, name: str, event: dict[str, Any]) -> None:
        while True:
            try:
                producer.produce(
                    "__kqs_events", json.dumps(event).encode(), f"{ACCOUNT}/{name}".encode()
                )
                break
            except BufferError:
                producer.poll(0.1)
        self.produced += 1

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.run, name="event-stream", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self._stop.set()


def time_summary(url: str, query: str) -> dict[str, Any]:
    """One `/api/summary` answer: how long it took, its size, how many cards it held."""
    began = time.monotonic()
    with urllib.request.urlopen(f"{url}/api/summary{query}", timeout=120) as response:
        raw = response.read()
    took = time.monotonic() - began
    summary = json.loads(raw)
    return {
        "query": query or "(none)",
        "seconds": round(took, 2),
        "bytes": len(raw),
        "queues_shown": len(summary.get("queues", [])),
        "queue_count": summary.get("queue_count"),
    }
