"""Analytics events as the end-to-end tests read them back: the gateway's buffer emptied, then
`__kqs_events` read with a plain consumer."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from tests.support.harness import ACCOUNT_ID
from tests.support.prometheus_text import Exposition, scrape
from topology.consuming import watermarks
from topology.names import EVENTS_TOPIC
from topology.producer import coordinates

Event = dict[str, Any]
WAIT_S = 60.0  # upper bound for asynchronous things to happen; never a measured duration


def name_of(url: str) -> str:
    return url.rsplit("/", 1)[1]


def events_published(endpoint: str) -> Exposition:
    """Scrape until the gateway's event buffer is empty: every event so far is in Kafka."""
    deadline = time.monotonic() + WAIT_S
    while True:
        metrics = scrape(endpoint)
        if metrics.value("kqs_events_buffered") == 0:
            return metrics
        assert time.monotonic() < deadline, "events still buffered"
        time.sleep(0.05)


def read_events(bootstrap: str, queue_url: str) -> list[Event]:
    """Every `__kqs_events` record keyed by this queue, in order, up to the current end."""
    key = f"{ACCOUNT_ID}/{name_of(queue_url)}".encode()
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-events-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
        }
    )
    events: list[Event] = []
    try:
        partitions = consumer.list_topics(EVENTS_TOPIC, timeout=10).topics[EVENTS_TOPIC].partitions
        for partition in sorted(partitions):
            low, high = watermarks(consumer, TopicPartition(EVENTS_TOPIC, partition), 10)
            if high <= low:
                continue
            consumer.assign([TopicPartition(EVENTS_TOPIC, partition, low)])
            offset = low
            deadline = time.monotonic() + WAIT_S
            while offset < high:
                assert time.monotonic() < deadline, "events topic not readable"
                msg = consumer.poll(1.0)
                if msg is None:
                    continue
                assert msg.error() is None, msg.error()
                offset = coordinates(msg)[2] + 1
                value = msg.value()
                if msg.key() == key and value is not None:
                    events.append(json.loads(value))
    finally:
        consumer.close()
    return events
