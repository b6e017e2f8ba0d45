"""Publishes each queue partition's backlog start as the consumer-group offset.

Kafka tools (kafka-consumer-groups, lag exporters) then show a queue's backlog as the
ingest group's lag: committed offset = lowest offset not yet deleted.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from lease_store.store import LeaseStore
from topology.catalog import QueueLookup, partition_keys
from topology.ingest import Ingest

log = logging.getLogger("kqs.backlog")

COMMIT_INTERVAL_S = 5.0


async def commit_backlog_offsets(
    registry: QueueLookup,
    leases: LeaseStore,
    ingest: Ingest,
    interval_s: float = COMMIT_INTERVAL_S,
    serves: Callable[[str, int], bool] = lambda topic, partition: True,
) -> None:
    """`serves(topic, partition)`: whether this gateway owns the partition (only the owner
    knows its backlog, and only the owner may commit for it)."""
    committed: dict[tuple[str, int], int] = {}
    while True:
        await asyncio.sleep(interval_s)
        changed: list[tuple[str, int, int]] = []
        for record in registry.all_active():
            for pk in partition_keys(record):
                if not serves(record.topic, pk.partition):
                    continue
                start = leases.backlog_start(pk)
                if start > 0 and committed.get((record.topic, pk.partition)) != start:
                    committed[(record.topic, pk.partition)] = start
                    changed.append((record.topic, pk.partition, start))
        ingest.commit(changed)
