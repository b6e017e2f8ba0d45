"""The queue catalog: one compacted record per queue in `__kqs_queues`.

The topic is the source of truth for queues, their attributes and tags. A gateway reads it
from the beginning at start-up; every change is written (acks=all) before it is answered,
so a restarted gateway comes back with exactly the queues it acknowledged.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from topology.admin import TopicAdmin
from topology.client_log import LIBRDKAFKA
from topology.consuming import watermarks
from topology.names import CATALOG_TOPIC, catalog_key, queue_topic
from topology.producer import AsyncProducer, coordinates

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

    @property
    def topic(self) -> str:
        return queue_topic(self.account_id, self.name, self.incarnation)

    @property
    def key(self) -> str:
        return catalog_key(self.account_id, self.name)

    @property
    def deleted(self) -> bool:
        return self.deleted_ms is not None

    def changed(self, **changes: Any) -> QueueRecord:
        return replace(self, **changes)

    def encode(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def decode(cls, raw: bytes) -> QueueRecord:
        return cls(**json.loads(raw))


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

    def load(self, timeout_s: float = 30.0) -> dict[str, QueueRecord]:
        """Read the whole catalog topic up to its current end (blocking)."""
        consumer = Consumer(
            {
                "bootstrap.servers": self._bootstrap,
                "group.id": "kqs-catalog-reader",
                "enable.auto.commit": False,
                "logger": LIBRDKAFKA,
            }
        )
        records: dict[str, QueueRecord] = {}
        try:
            _, high = watermarks(consumer, TopicPartition(CATALOG_TOPIC, 0), timeout_s)
            if high <= 0:
                return records
            consumer.assign([TopicPartition(CATALOG_TOPIC, 0, OFFSET_BEGINNING)])
            position = -1
            while position < high - 1:
                msg = consumer.poll(timeout_s)
                if msg is None:
                    raise TimeoutError(
                        f"catalog topic {CATALOG_TOPIC} stalled at offset {position}"
                    )
                if msg.error():
                    raise RuntimeError(f"reading {CATALOG_TOPIC}: {msg.error()}")
                _, _, position = coordinates(msg)
                key = _text(msg.key())
                value = msg.value()
                if value is None:
                    records.pop(key, None)
                else:
                    records[key] = QueueRecord.decode(value)
        finally:
            consumer.close()
        log.info("catalog loaded", extra={"queues": sum(not r.deleted for r in records.values())})
        return records

    async def put(self, record: QueueRecord) -> None:
        await self._producer.send(CATALOG_TOPIC, record.encode(), key=record.key.encode())


def _text(value: str | bytes | None) -> str:
    if value is None:
        raise ValueError(f"{CATALOG_TOPIC} holds a record without a key")
    return value.decode() if isinstance(value, bytes) else value
