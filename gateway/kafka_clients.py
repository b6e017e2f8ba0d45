"""The Kafka clients the gateway makes, in one place (`KafkaClients`)."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterable, Mapping

from gateway.cluster.lease_recovery import open_lease_store
from gateway.common.config import Settings
from lease_store.clock import Clock
from lease_store.store import LeaseStore
from lease_store.types import CommitListener
from topology.admin import TopicAdmin
from topology.catalog import Catalog, QueueRecord
from topology.client_log import LIBRDKAFKA
from topology.events import EventPublisher
from topology.follower_producer import FollowerProducer
from topology.ingest import BatchHandler, GroupListener, Ingest, IngestConsumer, IngestShards
from topology.log_reader import LogReader
from topology.move_task_log import MoveTaskLog
from topology.names import MOVE_TASKS_TOPIC
from topology.owners import OwnersDirectory
from topology.presence import GatewayPresence
from topology.producer import AsyncProducer
from topology.segment_sync import SegmentSync
from topology.stack_log import StackLog

log = logging.getLogger("kqs.gateway")


class KafkaClients:
    """Makes every Kafka client of the gateway: the only place `_start` gets them from.

    `kqs serve` uses this class as is. The request-path microbenchmark (`bench/micro`) passes
    a subclass whose clients answer in process, so that everything else is wired exactly as
    here.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.bootstrap = settings.kafka_bootstrap

    def producer(self) -> AsyncProducer:
        # librdkafka's messages through our logger, not raw on stderr (gateway/observability/logs.py)
        return AsyncProducer(
            self.bootstrap,
            {"logger": LIBRDKAFKA},
            statistics=True,
            shards=self.settings.producer_shards,
            linger_ms=self.settings.produce_linger_ms,
            bulk_linger_ms=self.settings.produce_bulk_linger_ms,
            fill_linger_ms=self.settings.produce_fill_linger_ms,
            segment_sync=SegmentSync(self.settings.segment_sync_dir)
            if self.settings.segment_sync_dir is not None
            else None,
        )

    def admin(self, bootstrap: str, fsync_durable_topics: bool = True) -> TopicAdmin:
        return TopicAdmin(
            bootstrap,
            self.settings.replication_factor,
            fsync_durable_topics,
            gateway_syncs_queues=self.settings.segment_sync_dir is not None,
        )

    def presence(self, mode: str, gateway: str) -> GatewayPresence:
        return GatewayPresence(self.bootstrap, mode, gateway)

    def follower(self, name: str, confirmed: bool = False) -> FollowerProducer:
        return FollowerProducer(self.bootstrap, name, confirmed)

    def catalog(self, admin: TopicAdmin, producer: AsyncProducer) -> Catalog:
        return Catalog(self.bootstrap, admin, producer)

    def owners_directory(self, admin: TopicAdmin, producer: AsyncProducer) -> OwnersDirectory:
        return OwnersDirectory(self.bootstrap, admin, producer)

    def move_task_log(
        self, admin: TopicAdmin, producer: AsyncProducer, topic: str = MOVE_TASKS_TOPIC
    ) -> MoveTaskLog:
        return MoveTaskLog(self.bootstrap, admin, producer, topic)

    def stack_log(self, admin: TopicAdmin, producer: AsyncProducer) -> StackLog:
        """`__kqs_stacks`, the CloudFormation stacks (gateway/cloudformation/store.py)."""
        return StackLog(self.bootstrap, admin, producer)

    def log_reader(self) -> LogReader:
        """A reader of queue topics by coordinates (replay tasks, browsing)."""
        return LogReader(self.bootstrap)

    async def open_leases(
        self, records: Iterable[QueueRecord], clock: Clock, on_commit: CommitListener
    ) -> LeaseStore:
        """The lease store under the data directory, rebuilt from Kafka if it is lost."""
        return await open_lease_store(
            self.settings.lease_dir,
            self.bootstrap,
            records,
            clock,
            on_commit,
            young_ms=self.settings.lease_young_ms,
        )

    def events(self) -> EventPublisher:
        settings = self.settings
        return EventPublisher(
            settings.events_bootstrap or self.bootstrap, settings.events_buffer_messages
        )

    def ingest(
        self,
        loop: asyncio.AbstractEventLoop,
        on_batch: BatchHandler,
        applied: Mapping[tuple[str, int], int],
        group_listener: GroupListener | None = None,
    ) -> IngestConsumer:
        return IngestConsumer(
            self.bootstrap,
            loop,
            on_batch,
            applied,
            self.settings.ingest_fetch_wait_ms,
            group_listener,
        )

    def ingest_shards(
        self,
        loop: asyncio.AbstractEventLoop,
        on_batch: BatchHandler,
        applied: Mapping[tuple[str, int], int],
    ) -> Ingest:
        """One gateway's ingest: the queue topics over `KQS_INGEST_SHARDS` consumers."""

        def make(in_flight: threading.BoundedSemaphore, prefetch_kbytes: int) -> IngestConsumer:
            return IngestConsumer(
                self.bootstrap,
                loop,
                on_batch,
                applied,
                self.settings.ingest_fetch_wait_ms,
                in_flight=in_flight,
                prefetch_kbytes=prefetch_kbytes,
            )

        return IngestShards(make, self.settings.ingest_shards)
