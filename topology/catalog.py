"""The queue catalog: one compacted record per queue in `__kqs_queues`.

The topic is the source of truth for queues, their attributes and tags. A gateway reads it
from the beginning at start-up (`snapshot`), then follows it from where that read ended
(`Catalog.follower`, a `topology/topic_tail.py` TopicTail), so it sees every other gateway's changes too; every change
is written (acks=all) before it is answered, so a restarted gateway comes back with exactly
the queues it acknowledged. The offset of a record orders it: of two records of one queue,
the one at the higher offset is the current one, whoever wrote it (`put` returns it).

A record names its queue's region. A record written before regions existed has none: it is
read as a queue of the default region (`Catalog.load(default_region)`) with region-less
names, and keeps that region once it is written again.
"""

from __future__ import annotations

import json
import logging
import zlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property, lru_cache
from typing import Any, Protocol

from lease_store.keys import PartitionKey
from topology.admin import TopicAdmin
from topology.names import CATALOG_TOPIC, catalog_key, queue_topic
from topology.producer import AsyncProducer
from topology.topic_tail import TailRecord, TopicTail, read_to_end

log = logging.getLogger("kqs.catalog")


@dataclass(frozen=True)
class QueueRecord:
    account_id: str
    name: str
    incarnation: str  # 32 hex digits
    partitions: int
    attributes: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    created_s: int = 0
    modified_s: int = 0
    deleted_ms: int | None = None
    region: str = "us-east-1"
    # Whether the catalog key and topic name carry the region (`topology/names.py`): False
    # for the default region's queues, True for the others; fixed at CreateQueue.
    region_in_names: bool = False

    # The topic and the key are asked for several times per message: each is built on first
    # use and then read from the instance (a changed record is a new instance).
    @cached_property
    def topic(self) -> str:
        return queue_topic(self._name_region, self.account_id, self.name, self.incarnation)

    @cached_property
    def key(self) -> str:
        return catalog_key(self._name_region, self.account_id, self.name)

    @property
    def queue_id(self) -> tuple[str, str, str]:
        """(region, account id, name): what names a queue, whatever form its names take."""
        return self.region, self.account_id, self.name

    @property
    def arn(self) -> str:
        return f"arn:aws:sqs:{self.region}:{self.account_id}:{self.name}"

    @property
    def _name_region(self) -> str:
        return self.region if self.region_in_names else ""

    @property
    def deleted(self) -> bool:
        return self.deleted_ms is not None

    def changed(self, **changes: Any) -> QueueRecord:
        return replace(self, **changes)

    def encode(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def decode(cls, raw: bytes, default_region: str) -> QueueRecord:
        """A record as written; one written before regions existed is `default_region`'s."""
        fields = json.loads(raw)
        if "region" not in fields:
            fields["region"] = default_region
            fields["region_in_names"] = False
        return cls(**fields)


@dataclass(frozen=True)
class CatalogSnapshot:
    """The catalog as read up to `end_offset` (exclusive): each key's latest record and the
    offset it was read at; following it resumes at `end_offset`."""

    records: dict[str, QueueRecord]
    offsets: dict[str, int]
    end_offset: int


# Catalog records with the offset each was read at, in log order.
OnCatalogRecords = Callable[[list[tuple[int, QueueRecord]]], None]


class Catalog:
    def __init__(self, bootstrap: str, admin: TopicAdmin, producer: AsyncProducer) -> None:
        self._bootstrap = bootstrap
        self._admin = admin
        self._producer = producer

    async def ensure_topic(self) -> None:
        await self._admin.create_topic(
            CATALOG_TOPIC,
            1,
            self._admin.durable({"cleanup.policy": "compact", "min.compaction.lag.ms": "60000"}),
        )

    def load(self, default_region: str, timeout_s: float = 30.0) -> dict[str, QueueRecord]:
        """Read the whole catalog topic up to its current end (blocking), by catalog key.

        Records without a region (written before regions existed) are `default_region`'s.
        """
        return self.snapshot(default_region, timeout_s).records

    def snapshot(self, default_region: str, timeout_s: float = 30.0) -> CatalogSnapshot:
        """`load`, with the offset of each record and where the read ended (blocking)."""
        records: dict[str, QueueRecord] = {}
        offsets: dict[str, int] = {}

        def read(batch: list[TailRecord]) -> None:
            for offset, raw_key, value in batch:
                if not raw_key:
                    raise ValueError(f"{CATALOG_TOPIC} holds a record without a key")
                key = raw_key.decode()
                if value is None:
                    records.pop(key, None)
                    offsets.pop(key, None)
                else:
                    records[key] = QueueRecord.decode(value, default_region)
                    offsets[key] = offset

        end_offset = read_to_end(self._bootstrap, CATALOG_TOPIC, read, timeout_s)
        log.info("catalog loaded", extra={"queues": sum(not r.deleted for r in records.values())})
        return CatalogSnapshot(records, offsets, end_offset)

    async def put(self, record: QueueRecord) -> int:
        """Write the queue's record (acks=all); returns the offset it landed at."""
        delivered = await self._producer.send(
            CATALOG_TOPIC, record.encode(), key=record.key.encode()
        )
        return delivered.offset

    def follower(
        self, start_offset: int, default_region: str, on_records: OnCatalogRecords
    ) -> TopicTail:
        """Follows the catalog from `start_offset` (a snapshot's `end_offset`): every record
        written since, by any gateway, this one's own included, goes to `on_records` on the
        event loop (`TopicTail.start`), with its offset, in log order."""

        def decoded(batch: list[TailRecord]) -> None:
            records: list[tuple[int, QueueRecord]] = []
            for offset, key, value in batch:
                if value is None:
                    # Nothing writes catalog tombstones (a deleted queue keeps its record).
                    log.warning("catalog tombstone ignored", extra={"key": key.decode()})
                    continue
                records.append((offset, QueueRecord.decode(value, default_region)))
            on_records(records)

        return TopicTail(self._bootstrap, CATALOG_TOPIC, start_offset, decoded)


def partition_keys(record: QueueRecord) -> tuple[PartitionKey, ...]:
    """The lease-store keys of the queue's topic partitions, one per partition."""
    return _partition_keys(record.incarnation, record.partitions)


@lru_cache(maxsize=65_536)
def _partition_keys(incarnation_hex: str, partitions: int) -> tuple[PartitionKey, ...]:
    # Asked for several times per request: built once per queue incarnation.
    incarnation = bytes.fromhex(incarnation_hex)
    return tuple(PartitionKey(incarnation, p) for p in range(partitions))


def group_partition(group_id: str, partitions: int) -> int:
    """The partition of a FIFO queue's topic that a message group lives on.

    Chosen here, not by the producer's partitioner, so that it never depends on client
    configuration: CRC-32 of the group id (what librdkafka's default partitioner hashes too).
    """
    return zlib.crc32(group_id.encode()) % partitions


class QueueLookup(Protocol):
    """What the cluster and observability layers read of the queue registry
    (`gateway/sqs/queues.py`), without depending on the service layer."""

    def all_active(self) -> list[QueueRecord]: ...

    def by_topic(self, topic: str) -> QueueRecord | None: ...
