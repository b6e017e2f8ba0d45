"""`InProcessKafka`: the gateway's Kafka clients (its `KafkaClients`) made of the
in-process stand-ins of `topology/standins.py`, with a RocksDB (under `lease_dir`) or memory
lease store, for the request-path microbenchmark.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from pathlib import Path

from gateway.common.config import Settings
from gateway.kafka_clients import KafkaClients
from lease_store.clock import Clock
from lease_store.memory import MemoryKeyValueStore
from lease_store.rocks import RocksKeyValueStore
from lease_store.store import LeaseStore
from lease_store.types import CommitListener
from topology.admin import TopicAdmin
from topology.catalog import Catalog, QueueRecord
from topology.events import EventPublisher
from topology.follower_producer import FollowerProducer
from topology.ingest import BatchHandler, GroupListener, Ingest, IngestConsumer
from topology.move_task_log import MoveTaskLog
from topology.names import MOVE_TASKS_TOPIC
from topology.owners import OwnersDirectory
from topology.presence import GatewayPresence
from topology.producer import AsyncProducer
from topology.stack_log import StackLog
from topology.standins import (
    AlonePresence,
    CountingEvents,
    CountingFollower,
    EmptyCatalog,
    EmptyMoveTaskLog,
    EmptyOwnersDirectory,
    EmptyStackLog,
    InstantProducer,
    Log,
    LoopbackIngest,
    NullAdmin,
)

STORES = ("rocksdb", "memory")


class InProcessKafka(KafkaClients):
    """`KafkaClients` of the stand-ins, with a RocksDB (under `lease_dir`) or memory store."""

    def __init__(self, settings: Settings, store: str, lease_dir: Path) -> None:
        if store not in STORES:
            raise ValueError(f"store must be one of {STORES}, not {store!r}")
        super().__init__(settings)
        self.bootstrap = "in-process"
        self.log = Log()
        self.store = store
        self.lease_dir = lease_dir
        self.leases: LeaseStore | None = None
        self.event_publisher = CountingEvents()

    def producer(self) -> AsyncProducer:
        return InstantProducer(self.log)

    def admin(self, bootstrap: str, fsync_durable_topics: bool = True) -> TopicAdmin:
        return NullAdmin(self.log)

    def follower(self, name: str, confirmed: bool = False) -> FollowerProducer:
        return CountingFollower(self.log)

    def presence(self, mode: str, gateway: str) -> GatewayPresence:
        return AlonePresence()

    def catalog(self, admin: TopicAdmin, producer: AsyncProducer) -> Catalog:
        return EmptyCatalog(self.bootstrap, admin, producer)

    def owners_directory(self, admin: TopicAdmin, producer: AsyncProducer) -> OwnersDirectory:
        return EmptyOwnersDirectory(self.bootstrap, admin, producer)

    def move_task_log(
        self, admin: TopicAdmin, producer: AsyncProducer, topic: str = MOVE_TASKS_TOPIC
    ) -> MoveTaskLog:
        return EmptyMoveTaskLog(self.bootstrap, admin, producer, topic)

    def stack_log(self, admin: TopicAdmin, producer: AsyncProducer) -> StackLog:
        return EmptyStackLog(self.bootstrap, admin, producer)

    async def open_leases(
        self, records: Iterable[QueueRecord], clock: Clock, on_commit: CommitListener
    ) -> LeaseStore:
        kv = (
            RocksKeyValueStore(self.lease_dir) if self.store == "rocksdb" else MemoryKeyValueStore()
        )
        self.leases = LeaseStore(kv, on_commit, young_ms=self.settings.lease_young_ms)
        return self.leases

    def events(self) -> EventPublisher:
        return self.event_publisher

    def ingest(
        self,
        loop: asyncio.AbstractEventLoop,
        on_batch: BatchHandler,
        applied: Mapping[tuple[str, int], int],
        group_listener: GroupListener | None = None,
    ) -> IngestConsumer:
        return LoopbackIngest(self.log, loop, on_batch, applied)

    def ingest_shards(
        self,
        loop: asyncio.AbstractEventLoop,
        on_batch: BatchHandler,
        applied: Mapping[tuple[str, int], int],
    ) -> Ingest:
        return self.ingest(loop, on_batch, applied)  # one stand-in reads every topic
