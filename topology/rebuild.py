"""Reads `__kqs_leases` and the queue topics into a `LeaseRebuild` (blocking; run off the loop).

Order: the log bounds of every partition to rebuild, then the whole changelog to its end,
then each queue partition from its log start to the end measured first. Records appended
after that end are left to the ingest consumer, which resumes after it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from lease_store.keys import PartitionKey
from lease_store.kv import KeyValueStore
from lease_store.rebuild import LeaseRebuild, PartitionPlan, RebuildStats
from lease_store.records import LeaseFact, StoredMessage
from topology.changelog import parse_key, purge_watermark
from topology.client_log import LIBRDKAFKA
from topology.client_properties import connection
from topology.consuming import as_bytes, decode_queue_record, poll_batch, watermarks
from topology.names import LEASES_TOPIC
from topology.producer import coordinates

log = logging.getLogger("kqs.rebuild")

_PROGRESS_EVERY = 100_000


class RebuildStopped(Exception):
    """The rebuild was asked to stop (`stop` set); what it wrote so far is incomplete."""


@dataclass(frozen=True, slots=True)
class RebuildTarget:
    pk: PartitionKey
    topic: str
    retention_ms: int


def rebuild_leases(
    bootstrap: str,
    kv: KeyValueStore,
    targets: list[RebuildTarget],
    now_ms: int,
    timeout_s: float = 30.0,
    stop: threading.Event | None = None,
) -> RebuildStats:
    """Rebuild `targets` into `kv`. With `stop`, checked before every poll (at most a second
    apart while Kafka answers), the rebuild ends early by raising `RebuildStopped`: a gateway
    shutting down must not have this thread writing into a lease store it is closing."""
    began = time.monotonic()
    stopping = stop or threading.Event()
    consumer = Consumer(
        {
            **connection(bootstrap),
            "group.id": "kqs-lease-rebuild",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "logger": LIBRDKAFKA,
        }
    )
    try:
        bounds = {
            t.pk: watermarks(consumer, TopicPartition(t.topic, t.pk.partition), timeout_s)
            for t in targets
        }
        rebuild = LeaseRebuild(
            kv, [PartitionPlan(t.pk, t.retention_ms, bounds[t.pk][0]) for t in targets], now_ms
        )
        stats = rebuild.stats

        def on_changelog(messages: list[Message]) -> None:
            before = stats.changelog_records
            for msg in messages:
                apply_changelog_record(rebuild, as_bytes(msg.key()) or b"", as_bytes(msg.value()))
            if stats.changelog_records // _PROGRESS_EVERY > before // _PROGRESS_EVERY:
                log.info("lease rebuild: changelog", extra={"records": stats.changelog_records})

        low, high = watermarks(consumer, TopicPartition(LEASES_TOPIC, 0), timeout_s)
        _read(
            consumer,
            TopicPartition(LEASES_TOPIC, 0, low),
            high,
            on_changelog,
            timeout_s,
            stopping,
        )
        log.info("lease rebuild: changelog read", extra={"records": stats.changelog_records})
        _replay_queue_topics(consumer, rebuild, targets, bounds, timeout_s, stopping)
    finally:
        consumer.close()
    log.info(
        "lease store rebuilt",
        extra={
            "partitions": stats.partitions,
            "changelog_records": stats.changelog_records,
            "queue_records": stats.queue_records,
            "live_messages": stats.live_messages,
            "superseded_records": stats.superseded,
            "elapsed_s": round(time.monotonic() - began, 3),
        },
    )
    return stats


def apply_changelog_record(rebuild: LeaseRebuild, raw_key: bytes, raw: bytes | None) -> None:
    """One `__kqs_leases` record, read in log order (`topology/changelog.py` for the keys)."""
    key = parse_key(raw_key)
    if key is None:
        return  # a key this version does not know
    if key.note is not None:
        rebuild.apply_note(key.pk, *key.note, raw)
    elif key.offset is None:
        if raw is not None:
            rebuild.apply_purge_watermark(key.pk, purge_watermark(raw))
    else:
        fact = LeaseFact.decode(raw) if raw is not None else None
        rebuild.apply_change(key.pk, key.offset, fact, key.epoch)


def _replay_queue_topics(
    consumer: Consumer,
    rebuild: LeaseRebuild,
    targets: list[RebuildTarget],
    bounds: dict[PartitionKey, tuple[int, int]],
    timeout_s: float,
    stop: threading.Event,
) -> None:
    """Replay every queue partition up to its measured end, all partitions at once.

    One assignment for all of them: assigning partitions one after another cost a fetch
    start-up (about half a second) each, minutes for a gateway with hundreds of queues.
    """
    stats = rebuild.stats
    by_coordinates = {(t.topic, t.pk.partition): t for t in targets}
    pending: dict[tuple[str, int], RebuildTarget] = {}
    done = 0
    for target in targets:
        low, high = bounds[target.pk]
        if low >= high:
            rebuild.finish(target.pk, high)
            done += 1
        else:
            pending[(target.topic, target.pk.partition)] = target
    log.info("lease rebuild: empty partitions done", extra={"done": done, "of": len(targets)})
    if not pending:
        return
    consumer.assign(
        [TopicPartition(topic, p, bounds[t.pk][0]) for (topic, p), t in pending.items()]
    )
    try:
        last_progress = time.monotonic()
        while pending:
            _check(stop)
            messages = poll_batch(consumer, 1.0)
            if messages:
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > timeout_s:
                raise TimeoutError(
                    f"replaying queue topics stalled; {len(pending)} partitions left"
                )
            batches: dict[tuple[str, int], list[tuple[int, StoredMessage]]] = {}
            for msg in messages:
                error = msg.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(error)
                    continue
                topic, partition, offset = coordinates(msg)
                reading = pending.get((topic, partition))
                if reading is None or offset >= bounds[reading.pk][1]:
                    continue  # finished already, or appended after the measured end
                batches.setdefault((topic, partition), []).append(decode_queue_record(msg))
            before = stats.queue_records
            for key, records in batches.items():
                target = by_coordinates[key]
                rebuild.replay(target.pk, records)
                end = bounds[target.pk][1]
                if records[-1][0] >= end - 1:
                    rebuild.finish(target.pk, end)
                    del pending[key]
                    done += 1
            if stats.queue_records // _PROGRESS_EVERY > before // _PROGRESS_EVERY or not pending:
                log.info(
                    "lease rebuild: queue records",
                    extra={
                        "records": stats.queue_records,
                        "partitions_done": done,
                        "of": len(targets),
                    },
                )
    finally:
        consumer.unassign()


def _read(
    consumer: Consumer,
    start: TopicPartition,
    end: int,
    handle: Callable[[list[Message]], None],
    timeout_s: float,
    stop: threading.Event,
) -> None:
    """Hand every record of one partition from `start.offset` up to `end` (exclusive), in
    batches."""
    if start.offset >= end:
        return
    consumer.assign([start])
    try:
        last_progress = time.monotonic()
        done = False
        while not done:
            _check(stop)
            messages = poll_batch(consumer, 1.0)
            if messages:
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > timeout_s:
                raise TimeoutError(f"reading {start.topic}/{start.partition} stalled")
            batch: list[Message] = []
            for msg in messages:
                error = msg.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(error)
                    done = True
                    break
                _, _, offset = coordinates(msg)
                if offset >= end:
                    done = True
                    break
                batch.append(msg)
                if offset == end - 1:
                    done = True
                    break
            if batch:
                handle(batch)
    finally:
        consumer.unassign()


def _check(stop: threading.Event) -> None:
    if stop.is_set():
        raise RebuildStopped("lease rebuild stopped before its end")
