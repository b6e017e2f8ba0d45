"""`__kqs_stacks`: the CloudFormation stacks, durable and shared by every gateway.

One compacted record per stack, key its stack id, value the stack as JSON (written and read
by `gateway/cloudformation/store.py`; this module does not look inside). It is kept as the
queue catalog is (`topology/catalog.py`): every change is written (acks=all, a synced topic)
before it is answered, every gateway reads the topic whole at start and then follows it, and
of two records of one stack the one at the higher offset is the current one, whoever wrote it.
Deleted stacks keep their record (AWS lists them for 90 days); nothing writes tombstones.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from topology.admin import TopicAdmin
from topology.names import STACKS_TOPIC
from topology.producer import AsyncProducer
from topology.topic_tail import TailRecord, TopicTail, read_to_end

log = logging.getLogger("kqs.stack_log")

TOPIC_CONFIG = {"cleanup.policy": "compact", "min.compaction.lag.ms": "60000"}
# A stack's record holds its template (51,200 bytes at most through the API) and its latest
# events; the broker's default limit (1 MB) would refuse a record only for absurd stacks.
MAX_RECORD_BYTES = 1_000_000

# (offset, stack id, the stack's JSON), in log order.
OnStackRecords = Callable[[list[tuple[int, str, bytes]]], None]


class StackLog:
    def __init__(self, bootstrap: str, admin: TopicAdmin, producer: AsyncProducer) -> None:
        self._bootstrap = bootstrap
        self._admin = admin
        self._producer = producer

    async def ensure_topic(self) -> None:
        await self._admin.create_topic(STACKS_TOPIC, 1, self._admin.durable(TOPIC_CONFIG))

    def load(self, on_records: OnStackRecords, timeout_s: float = 30.0) -> int:
        """Hand every record the topic holds now to `on_records` (blocking); returns where
        `follow` resumes."""
        return read_to_end(
            self._bootstrap, STACKS_TOPIC, lambda batch: on_records(_decoded(batch)), timeout_s
        )

    def follow(self, start_offset: int, on_records: OnStackRecords) -> TopicTail:
        """Follow the topic from `start_offset` (where `load` ended): every gateway's writes,
        this one's own included, go to `on_records` on the event loop."""
        return TopicTail(
            self._bootstrap, STACKS_TOPIC, start_offset, lambda batch: on_records(_decoded(batch))
        )

    async def put(self, stack_id: str, value: bytes) -> int:
        """Write a stack's record (acks=all); returns the offset it landed at."""
        if len(value) > MAX_RECORD_BYTES:
            raise ValueError(f"the stack's record is {len(value)} bytes, over {MAX_RECORD_BYTES}")
        delivered = await self._producer.send(STACKS_TOPIC, value, key=stack_id.encode())
        return delivered.offset


def _decoded(batch: list[TailRecord]) -> list[tuple[int, str, bytes]]:
    records = []
    for offset, key, value in batch:
        if value is None:
            log.warning("stack tombstone ignored", extra={"key": key.decode()})
            continue
        records.append((offset, key.decode(), value))
    return records
