"""Reads the analytics topics on a background thread into a `DashboardModel`.

One confluent-kafka consumer, manually assigned every partition of `__kqs_metrics`,
`__kqs_dlq_analytics` and `__kqs_events`, starting at the first record of the last hour
(the last ten minutes for the raw events: only their gauge samples are kept, and the topic
carries one record per request). Nothing is committed: each dashboard reads for itself.

The topics may not exist yet when the dashboard starts (the Spark jobs create theirs when they
first write), so the thread looks for them again every few seconds and assigns partitions as
they appear; the page meanwhile shows whatever has arrived.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from dashboard.model import DashboardModel
from dashboard.records import decode_dlq, decode_gauges, decode_metric
from topology.client_properties import connection
from topology.consuming import poll_batch
from topology.names import DASHBOARD_GROUP, DLQ_ANALYTICS_TOPIC, EVENTS_TOPIC, METRICS_TOPIC

log = logging.getLogger("kqs.dashboard")

LOOKBACK_MS = 60 * 60 * 1000
EVENTS_LOOKBACK_MS = 10 * 60 * 1000
# How often `summary` forgets what is older than LOOKBACK_MS (see `Feed.summary`).
PRUNE_EVERY_MS = 10_000
# Look for topics often until all three exist, then now and then for added partitions.
DISCOVER_EVERY_S = 3.0
REDISCOVER_EVERY_S = 30.0


def _fold_metric(model: DashboardModel, value: bytes | str | None) -> bool:
    record = decode_metric(value)
    if record is not None:
        model.apply_metric(record)
    return record is not None


def _fold_dlq(model: DashboardModel, value: bytes | str | None) -> bool:
    record = decode_dlq(value)
    if record is not None:
        model.apply_dlq(record)
    return record is not None


def _fold_gauges(model: DashboardModel, value: bytes | str | None) -> bool:
    record = decode_gauges(value)
    if record is not None:
        model.apply_gauges(record)
    return record is not None


# Decodes a record value and folds it into the model; False for a record that is skipped.
Fold = Callable[[DashboardModel, bytes | str | None], bool]


@dataclass(frozen=True, slots=True)
class Topics:
    """The topics read; other names only in tests, which use topics of their own."""

    metrics: str = METRICS_TOPIC
    dlq_analytics: str = DLQ_ANALYTICS_TOPIC
    events: str = EVENTS_TOPIC

    def readers(self) -> dict[str, tuple[Fold, int]]:
        """Per topic: how to fold its records, and how far back (ms) to start reading."""
        return {
            self.metrics: (_fold_metric, LOOKBACK_MS),
            self.dlq_analytics: (_fold_dlq, LOOKBACK_MS),
            self.events: (_fold_gauges, EVENTS_LOOKBACK_MS),
        }


DEFAULT_TOPICS = Topics()


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class FeedStatus:
    records: dict[str, int]
    last_record_ms: int | None = None
    partitions: int = 0
    error: str | None = None


class Feed:
    """The model plus the thread that keeps it current; `summary()` is safe from any thread."""

    def __init__(
        self, bootstrap: str, topics: Topics = DEFAULT_TOPICS, clock: Callable[[], int] = _now_ms
    ) -> None:
        self.bootstrap = bootstrap
        self._readers = topics.readers()
        self._clock = clock
        self._model = DashboardModel()
        self._status = FeedStatus(records={topic: 0 for topic in self._readers})
        self._lock = threading.Lock()
        self._pruned_ms = 0
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kqs-dashboard-feed", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=15)

    def summary(self, limit: int | None = None, search: str = "") -> dict[str, Any]:
        """The model's summary (see `DashboardModel.summary`) and the feed's status."""
        now_ms = self._clock()
        with self._lock:
            # Pruning walks every window of every queue (seconds with 10,000 queues): the
            # windows are minutes long, so once every PRUNE_EVERY_MS is soon enough.
            if now_ms - self._pruned_ms >= PRUNE_EVERY_MS:
                self._model.prune(now_ms - LOOKBACK_MS)
                self._pruned_ms = now_ms
            summary = self._model.summary(now_ms, limit, search)
            summary["feed"] = {
                "bootstrap": self.bootstrap,
                "records": dict(self._status.records),
                "last_record_ms": self._status.last_record_ms,
                "partitions": self._status.partitions,
                "error": self._status.error,
            }
        return summary

    # -- the consumer thread --------------------------------------------------------------

    def _run(self) -> None:
        consumer = Consumer(
            {
                **connection(self.bootstrap),
                "group.id": DASHBOARD_GROUP,
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "fetch.wait.max.ms": 200,
            }
        )
        assigned: set[tuple[str, int]] = set()
        next_discovery = 0.0
        try:
            while not self._stopping.is_set():
                try:
                    if time.monotonic() >= next_discovery:
                        self._discover(consumer, assigned)
                        complete = {topic for topic, _ in assigned} == set(self._readers)
                        next_discovery = time.monotonic() + (
                            REDISCOVER_EVERY_S if complete else DISCOVER_EVERY_S
                        )
                    if not assigned:
                        self._stopping.wait(0.5)
                        continue
                    self._fold(poll_batch(consumer, 0.5))
                except Exception as exc:
                    # A dead thread would leave the page frozen on old figures: show the
                    # failure on the page and go on.
                    log.exception("dashboard feed failed; retrying")
                    with self._lock:
                        self._status.error = f"{type(exc).__name__}: {exc}"
                    self._stopping.wait(1.0)
        finally:
            consumer.close()

    def _discover(self, consumer: Consumer, assigned: set[tuple[str, int]]) -> None:
        try:
            starts = self._start_offsets(consumer, assigned)
            if not starts:
                return
            consumer.incremental_assign(starts)
        except KafkaException as exc:
            log.warning("cannot read the analytics topics yet", extra={"error": str(exc)})
            with self._lock:
                self._status.error = str(exc)
            return
        assigned.update((tp.topic, tp.partition) for tp in starts)
        log.info(
            "reading analytics partitions",
            extra={"partitions": sorted(f"{t}/{p}" for t, p in assigned)},
        )
        with self._lock:
            self._status.partitions = len(assigned)
            self._status.error = None

    def _start_offsets(
        self, consumer: Consumer, assigned: set[tuple[str, int]]
    ) -> list[TopicPartition]:
        """Where each partition not assigned yet starts: its first record of the lookback."""
        # All topics' metadata: asking for one topic by name would let a broker with
        # `auto.create.topics.enable` create it.
        topics = consumer.list_topics(timeout=3).topics
        wanted = [
            TopicPartition(topic, partition, self._clock() - lookback_ms)
            for topic, (_, lookback_ms) in self._readers.items()
            if topic in topics and topics[topic].error is None
            for partition in topics[topic].partitions
            if (topic, partition) not in assigned
        ]
        if not wanted:
            return []
        # The ends first: a partition with no record that recent starts at the end it had
        # before the lookup, so a record written meanwhile is read, not skipped (which
        # OFFSET_END, resolved at the first fetch, would do).
        ends = {
            (tp.topic, tp.partition): consumer.get_watermark_offsets(
                TopicPartition(tp.topic, tp.partition), timeout=5, cached=False
            )[1]
            for tp in wanted
        }
        starts: list[TopicPartition] = []
        for tp in consumer.offsets_for_times(wanted, timeout=10):
            if tp.error is not None:
                continue  # e.g. a new topic's leader still being elected: the next round
            offset = tp.offset if tp.offset >= 0 else ends[(tp.topic, tp.partition)]
            starts.append(TopicPartition(tp.topic, tp.partition, offset))
        return starts

    def _fold(self, batch: list[Message]) -> None:
        if not batch:
            return
        with self._lock:
            for msg in batch:
                error = msg.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        log.warning("analytics read failed", extra={"error": str(error)})
                        self._status.error = str(error)
                    continue
                topic = msg.topic()
                if topic is None or not self._readers[topic][0](self._model, msg.value()):
                    continue
                self._status.records[topic] += 1
                self._status.last_record_ms = self._clock()
