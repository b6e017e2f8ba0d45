"""The owners directory: `__kqs_owners`, which gateway serves each queue partition, and where.

Kafka's group protocol decides which gateway owns a partition (`topology/ingest.py`); each
owner publishes itself here once it serves the partition (after restoring it), so every
gateway, following the topic, knows where to forward what needs the owner, and an assigned
gateway knows whether it was the last to serve the partition (its local copy is current) or
must restore it. One compacted record per partition, key `<topic>/<partition>`, value
`{"gateway": <id>, "endpoint": <url>}`; the latest record wins.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass

from topology.admin import TopicAdmin
from topology.names import OWNERS_TOPIC
from topology.producer import AsyncProducer
from topology.topic_tail import TailRecord, TopicTail, read_to_end

log = logging.getLogger("kqs.owners")

TOPIC_CONFIG = {"cleanup.policy": "compact", "min.compaction.lag.ms": "60000"}

Partition = tuple[str, int]  # (queue topic, partition)


@dataclass(frozen=True, slots=True)
class Owner:
    gateway: str  # the gateway's id (`<data-dir>/gateway-id`)
    endpoint: str  # where its internal channel answers, e.g. http://10.0.0.5:9324

    def encode(self) -> bytes:
        return json.dumps({"gateway": self.gateway, "endpoint": self.endpoint}).encode()

    @classmethod
    def decode(cls, raw: bytes) -> Owner:
        fields = json.loads(raw)
        return cls(str(fields["gateway"]), str(fields["endpoint"]))


def owner_key(topic: str, partition: int) -> bytes:
    return f"{topic}/{partition}".encode()


def parse_owner_key(key: bytes) -> Partition | None:
    topic, _, partition = key.decode().rpartition("/")
    return (topic, int(partition)) if topic and partition.isdigit() else None


class OwnersDirectory:
    """The directory as this gateway knows it: read whole at start, then followed."""

    def __init__(self, bootstrap: str, admin: TopicAdmin, producer: AsyncProducer) -> None:
        self._bootstrap = bootstrap
        self._admin = admin
        self._producer = producer
        self._owners: dict[Partition, Owner] = {}
        # Offset of the record each entry comes from: an older record read back late (this
        # gateway's own write was applied when acknowledged) must not replace a newer one.
        self._offsets: dict[Partition, int] = {}
        self._tail: TopicTail | None = None
        self.position = 0  # the next offset of the topic to read

    async def ensure_topic(self) -> None:
        await self._admin.create_topic(OWNERS_TOPIC, 1, TOPIC_CONFIG)

    def owner(self, topic: str, partition: int) -> Owner | None:
        return self._owners.get((topic, partition))

    def version(self, topic: str, partition: int) -> int:
        """The offset of the partition's latest record (-1: none): grows with every publish,
        also when a restarted gateway publishes itself again under its old id and endpoint."""
        return self._offsets.get((topic, partition), -1)

    def load(self, timeout_s: float = 30.0) -> None:
        """Read the topic to its current end (blocking; before `follow`)."""
        end = read_to_end(self._bootstrap, OWNERS_TOPIC, self._apply, timeout_s)
        self.position = max(self.position, end)
        log.info("owners directory loaded", extra={"partitions": len(self._owners)})

    def follow(self, on_change: Callable[[], None]) -> TopicTail:
        """Follow the topic from where `load` ended; `on_change` runs after each batch."""

        def applied(batch: list[TailRecord]) -> None:
            self._apply(batch)
            on_change()

        self._tail = TopicTail(self._bootstrap, OWNERS_TOPIC, self.position, applied)
        return self._tail

    async def publish(self, topic: str, partition: int, owner: Owner) -> int:
        """Say that `owner` serves the partition now (acks=all, awaited); returns the
        record's offset (which `topology/changelog.epoch_of` makes the owner's epoch)."""
        delivered = await self._producer.send(
            OWNERS_TOPIC, owner.encode(), key=owner_key(topic, partition)
        )
        self._set((topic, partition), delivered.offset, owner)
        return delivered.offset

    async def end_offset(self) -> int:
        (end,) = await self._admin.end_offsets(OWNERS_TOPIC, 1)
        return end

    def _apply(self, batch: list[TailRecord]) -> None:
        """Records read from the topic, in log order."""
        for offset, key, value in batch:
            self.position = max(self.position, offset + 1)
            partition = parse_owner_key(key)
            if partition is not None:
                self._set(partition, offset, Owner.decode(value) if value is not None else None)

    def _set(self, partition: Partition, offset: int, owner: Owner | None) -> None:
        if offset <= self._offsets.get(partition, -1):
            return
        self._offsets[partition] = offset
        if owner is None:
            self._owners.pop(partition, None)
        else:
            self._owners[partition] = owner
