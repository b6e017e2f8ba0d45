"""Browsing a queue: its messages as the log holds them, with their lease state, untouched.

A page is read from the queue topic's partitions with a `LogReader` (a consumer in no group:
no offset moves) and each record's state is read from the lease store where its partition is
served (`MessageService.lease_facts`: here, or asked of the gateway serving it, with several
gateways; a read either way): nothing is received, leased, held or deleted, so no receive
count, visibility or counter changes by looking.

Status, from the facts and this gateway's clock, as `lease_store/state.py` derives it:
VISIBLE, IN_FLIGHT (received; visible again at `visible_at_ms`), DELAYED (never received;
visible at `visible_at_ms`), DELETED (the log still holds it, the queue no longer: deleted,
expired, purged, moved or dead-lettered), or UNKNOWN for a partition no gateway serves at
that moment (one moving between gateways) or whose gateway did not answer.

Pages are merged across partitions by send time, oldest or newest first; a page's
NextToken holds the next offset (or, newest first, the bound) of each partition.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import heapq
import json
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from confluent_kafka import KafkaException

from gateway.common.errors import InvalidParameterValue
from gateway.common.results import LeaseFacts
from gateway.sqs.messages.service import MessageService
from gateway.sqs.queues import attribute_int
from gateway.sqs.replay import ranges
from gateway.sqs.replay.tasks import read_view
from lease_store.clock import Clock
from lease_store.records import LeaseFact
from topology.admin import TopicAdmin
from topology.catalog import QueueRecord
from topology.log_reader import LoggedMessage, LogReader

# Records looked at for one page at most (a filter that matches little ends a page early,
# with a NextToken to go on from).
SCAN_BUDGET = 10_000


class Status(Enum):
    VISIBLE = "VISIBLE"
    IN_FLIGHT = "IN_FLIGHT"
    DELAYED = "DELAYED"
    DELETED = "DELETED"
    UNKNOWN = "UNKNOWN"


@dataclass(frozen=True)
class Browsed:
    logged: LoggedMessage
    status: Status
    fact: LeaseFact | None


@dataclass(frozen=True)
class Page:
    messages: list[Browsed]
    next_token: str | None
    oldest_available_ms: int
    retention_s: int
    topic_retention_ms: int | None  # the queue topic's retention.ms, as the broker has it


def _encode_token(newest_first: bool, cursors: dict[int, int]) -> str:
    raw = json.dumps({"newest": newest_first, "cursors": cursors}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode("ascii")


def _decode_token(token: str) -> tuple[bool, dict[int, int]]:
    try:
        raw = json.loads(base64.urlsafe_b64decode(token.encode()))
        return bool(raw["newest"]), {int(k): int(v) for k, v in raw["cursors"].items()}
    except (binascii.Error, ValueError, KeyError, TypeError, AttributeError):
        raise InvalidParameterValue("Invalid NextToken value.") from None


class Browser:
    def __init__(
        self,
        clock: Clock,
        messages: MessageService,
        new_reader: Callable[[], LogReader],
        admin: TopicAdmin,
    ) -> None:
        self._clock = clock
        self._messages = messages
        self._new_reader = new_reader
        self._admin = admin

    async def page(
        self,
        record: QueueRecord,
        limit: int,
        newest_first: bool,
        statuses: frozenset[Status],
        token: str | None,
    ) -> Page:
        cursors: dict[int, int] | None = None
        if token is not None:
            newest_first, cursors = _decode_token(token)
        loop = asyncio.get_running_loop()
        reader = self._new_reader()
        try:
            view: ranges.LogView = await loop.run_in_executor(
                None, read_view, reader, record.topic, record.partitions
            )
            if cursors is None:
                cursors = {
                    p: (high if newest_first else low) for p, (low, high) in enumerate(view.bounds)
                }
            page: list[Browsed] = []
            scanned = 0
            while len(page) < limit and scanned < SCAN_BUDGET:
                chunks = []
                for partition, (low, high) in enumerate(view.bounds):
                    at = max(cursors.get(partition, low), low)
                    start, end = (
                        (max(low, at - limit), at) if newest_first else (at, min(high, at + limit))
                    )
                    if start < end:
                        chunks.append((partition, start, end))
                if not chunks:
                    break
                read = await loop.run_in_executor(None, _read_chunks, reader, record.topic, chunks)
                for partition, start, end in chunks:
                    if not any(m.partition == partition for m in read):
                        # Nothing left in the window (removed meanwhile): past it.
                        cursors[partition] = start if newest_first else end
                # Each partition's records in log order (newest first: backwards), merged by
                # send time: the cursors move past each record taken, so none is skipped.
                lists = [[m for m in read if m.partition == p] for p, _, _ in chunks]
                if newest_first:
                    for records in lists:
                        records.reverse()
                wanted: dict[int, list[int]] = {}
                for logged in read:
                    wanted.setdefault(logged.partition, []).append(logged.offset)
                facts = await self._messages.lease_facts(record, wanted)
                now_ms = self._clock.now_ms()
                merged = heapq.merge(*lists, key=lambda m: m.message.sent_ms, reverse=newest_first)
                for logged in merged:
                    scanned += 1
                    cursors[logged.partition] = logged.offset if newest_first else logged.offset + 1
                    browsed = _state(facts.get(logged.partition), logged, now_ms)
                    if not statuses or browsed.status in statuses:
                        page.append(browsed)
                    if len(page) >= limit:
                        break
            more = any(
                (cursors.get(p, low) > low) if newest_first else (cursors.get(p, high) < high)
                for p, (low, high) in enumerate(view.bounds)
            )
        finally:
            await loop.run_in_executor(None, reader.close)
        oldest = ranges.oldest_available_ms(
            view, self._clock.now_ms(), attribute_int(record, "MessageRetentionPeriod")
        )
        try:
            retention_ms = (await self._admin.topic_config(record.topic)).get("retention.ms")
        except KafkaException:
            retention_ms = None  # the page is worth answering without it
        return Page(
            page,
            _encode_token(newest_first, cursors) if more else None,
            oldest,
            attribute_int(record, "MessageRetentionPeriod"),
            int(retention_ms) if retention_ms is not None else None,
        )


def _state(facts: LeaseFacts | None, logged: LoggedMessage, now_ms: int) -> Browsed:
    if facts is None:
        return Browsed(logged, Status.UNKNOWN, None)
    fact: LeaseFact | None = facts.facts.get(logged.offset)
    if fact is None:
        if logged.offset > facts.applied_offset:
            # Not ingested yet: what a receive will find once it is.
            due = logged.message.sent_ms + 1000 * logged.message.delay_s
            return Browsed(logged, Status.DELAYED if due > now_ms else Status.VISIBLE, None)
        return Browsed(logged, Status.DELETED, None)
    if fact.visible_at_ms <= now_ms:
        return Browsed(logged, Status.VISIBLE, fact)
    return Browsed(logged, Status.IN_FLIGHT if fact.receive_count else Status.DELAYED, fact)


def _read_chunks(
    reader: LogReader, topic: str, chunks: list[tuple[int, int, int]]
) -> list[LoggedMessage]:
    out: list[LoggedMessage] = []
    for partition, start, end in chunks:
        out.extend(reader.read_window(topic, partition, start, end))
    return out
