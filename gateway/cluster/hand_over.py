"""Moving a data directory between one gateway and a pool of workers (`kqs serve --workers`).

One gateway (`KQS_PARTITION_OWNERSHIP=all`) keeps its lease store in `<data>/leases` and
trusts it at start: its WAL is the durable record, and its changelog may miss the changes
of its last moments before a crash. Workers (group mode) keep one store each under
`<data>/workers/<i>`, and restore a partition from the changelog whenever another gateway
served it last; they answer a change only once the changelog has it.

So each direction has one step, run before anything serves:

- one gateway → workers (`hand_over_to_workers`): publish the single store's state to the
  changelog (every fact, a tombstone for every message it no longer holds, the purge
  watermarks), acknowledged; name a retired owner for every partition in `__kqs_owners`, so
  each worker restores what it is given instead of trusting an empty copy; then remove
  `<data>/leases`.
- workers → one gateway (`retire_worker_copies`): remove `<data>/leases` (older than the
  workers' changes) and the workers' copies; the gateway then rebuilds its store from the
  changelog and the queue topics, as it does when its store is lost.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from gateway.common.config import Settings
from lease_store import notes
from lease_store.keys import PartitionKey
from lease_store.rocks import RocksKeyValueStore
from lease_store.store import LeaseStore
from topology.admin import TopicAdmin
from topology.catalog import Catalog, QueueRecord, partition_keys
from topology.changelog import TOPIC_CONFIG as CHANGELOG_CONFIG
from topology.changelog import encode_state, fact_key, note_key, state_key
from topology.client_log import LIBRDKAFKA
from topology.client_properties import connection
from topology.consuming import watermarks
from topology.follower_producer import FollowerProducer
from topology.names import LEASES_TOPIC
from topology.owners import Owner, OwnersDirectory
from topology.producer import AsyncProducer

log = logging.getLogger("kqs.hand_over")

WORKERS_DIR = "workers"
_PROGRESS_EVERY = 100_000


class HandOverFailed(RuntimeError):
    pass


def worker_data_dir(data_dir: Path, index: int) -> Path:
    return data_dir / WORKERS_DIR / str(index)


def retire_worker_copies(settings: Settings) -> None:
    """Before one gateway serves a data directory that workers served last."""
    workers = settings.data_dir / WORKERS_DIR
    if not workers.exists():
        return
    log.info(
        "this data directory was last served by workers: the lease store is rebuilt from "
        "the changelog",
        extra={"data_dir": str(settings.data_dir)},
    )
    # The older single store first: should this stop half-way, the next start still sees
    # the workers' directory and does the same again.
    if settings.lease_dir.exists():
        shutil.rmtree(settings.lease_dir)
    shutil.rmtree(workers)


async def hand_over_to_workers(settings: Settings) -> None:
    """Before workers serve a data directory that one gateway served last (see above)."""
    if not (settings.lease_dir / "CURRENT").exists():
        return
    began = time.monotonic()
    log.info(
        "this data directory was last served by one gateway: its lease store is handed "
        "over to the workers through the changelog",
        extra={"lease_dir": str(settings.lease_dir)},
    )
    bootstrap = settings.kafka_bootstrap
    loop = asyncio.get_running_loop()
    admin = TopicAdmin(bootstrap, settings.replication_factor, settings.topic_fsync)
    producer = AsyncProducer(bootstrap, {"logger": LIBRDKAFKA})
    follower = FollowerProducer(bootstrap, "kqs-hand-over", confirmed=True)
    store = LeaseStore(RocksKeyValueStore(settings.lease_dir))
    try:
        await admin.create_topic(LEASES_TOPIC, 1, CHANGELOG_CONFIG)
        catalog = Catalog(bootstrap, admin, producer)
        snapshot = await loop.run_in_executor(None, catalog.snapshot, settings.region)
        queues = [r for r in snapshot.records.values() if not r.deleted]
        directory = OwnersDirectory(bootstrap, admin, producer)
        await directory.ensure_topic()
        # Under an epoch that outranks every owner before (their directory records are below
        # the end) and no worker after (theirs come after it): see topology/changelog.py.
        epoch = await directory.end_offset()
        published = await loop.run_in_executor(
            None, _publish_store, store, queues, follower, bootstrap, epoch
        )
        for record in queues:
            for pk in partition_keys(record):
                state = store.partition_state(pk)
                if state.purged_before_offset:
                    await producer.send(LEASES_TOPIC, encode_state(state), key=state_key(pk))
        remaining = await loop.run_in_executor(None, follower.flush, 60.0)
        if remaining or follower.failures:
            raise HandOverFailed(
                f"{remaining} changelog records unsent and {follower.failures} refused "
                f"({follower.last_error or 'no error given'}); the lease store was kept: "
                "check that Kafka is reachable and start again"
            )
        retired = Owner(f"retired-single-gateway-{uuid.uuid4().hex}", "")
        await asyncio.gather(
            *(
                directory.publish(record.topic, pk.partition, retired)
                for record in queues
                for pk in partition_keys(record)
            )
        )
    finally:
        follower.close()
        producer.close()
        store.close()
    shutil.rmtree(settings.lease_dir)
    log.info(
        "lease store handed over",
        extra={
            "queues": len(queues),
            "changelog_records": published,
            "elapsed_s": round(time.monotonic() - began, 3),
        },
    )


def _publish_store(
    store: LeaseStore,
    queues: list[QueueRecord],
    follower: FollowerProducer,
    bootstrap: str,
    epoch: int,
) -> int:
    """Every fact the store holds and a tombstone for every offset it no longer holds, from
    each partition's log start to its applied offset (blocking)."""
    consumer = Consumer(
        {**connection(bootstrap), "group.id": "kqs-hand-over", "logger": LIBRDKAFKA}
    )
    published = 0
    try:
        for record in queues:
            for pk in partition_keys(record):
                low, _ = watermarks(consumer, TopicPartition(record.topic, pk.partition), 30.0)
                before = published
                published += publish_partition(store, pk, low, follower, epoch)
                if published // _PROGRESS_EVERY > before // _PROGRESS_EVERY:
                    log.info("hand-over: changelog records", extra={"records": published})
    finally:
        consumer.close()
    return published


def publish_partition(
    store: LeaseStore, pk: PartitionKey, log_start: int, follower: FollowerProducer, epoch: int = 0
) -> int:
    applied = store.applied_offset(pk)
    next_offset = log_start
    published = 0
    for offset, fact in store.facts(pk):
        for gone in range(next_offset, min(offset, applied + 1)):
            follower.produce(LEASES_TOPIC, None, key=fact_key(pk, gone, epoch))
            published += 1
        follower.produce(LEASES_TOPIC, fact.encode(), key=fact_key(pk, offset, epoch))
        published += 1
        next_offset = max(next_offset, offset + 1)
    for gone in range(next_offset, applied + 1):
        follower.produce(LEASES_TOPIC, None, key=fact_key(pk, gone, epoch))
        published += 1
    # Above the applied offset: messages held young when the gateway stopped (a crash), live
    # (no record: untouched since ingest) but for those deleted, which their markers name.
    for gone in store.deleted_young(pk):
        follower.produce(LEASES_TOPIC, None, key=fact_key(pk, gone, epoch))
        published += 1
    # Its notes (FIFO deduplication claims, receive attempts), which the workers' restore
    # reads back as a changelog note: a retried receive with the same attempt id, or a send
    # with a claimed deduplication id, answers after the hand-over as before it.
    for kind in notes.KINDS:
        for name, raw in store.notes_of(pk, kind):
            follower.produce(LEASES_TOPIC, raw, key=note_key(pk, kind, name))
            published += 1
    return published
