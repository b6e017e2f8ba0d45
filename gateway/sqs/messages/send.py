"""SendMessage and SendMessageBatch: producing the records and answering once they are applied."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Sequence

from gateway.common.errors import SqsError
from gateway.sqs.messages.apply import Applying
from gateway.sqs.queues import (
    is_fifo,
)
from lease_store.records import StoredMessage
from topology.catalog import QueueRecord, group_partition
from topology.producer import Delivered, Linger
from topology.record_format import to_headers

log = logging.getLogger("kqs.messages")


# How long after a receive found a queue empty its sends skip the bulk producer's linger
# (`MessageService._linger_for`): about the gap between a short-polling consumer's receives
# even on a loaded gateway, and short enough that a queue whose consumers went away soon
# fills in full produce requests again. Also how long after any receive a queue counts as
# consumed (its busy sends then join the bulk producer, not the fill one).
WANTED_FOR_MS = 1_000


def _lately(times_ms: dict[str, int], key: str, now_ms: int) -> bool:
    """Whether `times_ms` holds a time for `key` within `WANTED_FOR_MS` of `now_ms`. A stale
    one is dropped, so the memo keeps only live entries."""
    at_ms = times_ms.get(key)
    if at_ms is None:
        return False
    if now_ms - at_ms < WANTED_FOR_MS:
        return True
    del times_ms[key]
    return False


class Sending(Applying):
    """Sends: the record produced, then applied, then answered."""

    # -- send ------------------------------------------------------------------------------

    async def send(self, record: QueueRecord, message: StoredMessage) -> Delivered:
        """Append the message; returns where it landed, once Kafka acknowledged it and it is
        receivable."""
        if self.encryption.sealing_calls_kms(record):
            await self.encryption.ready_to_seal(record)
        delivery, applied = self._start_send(record, message, self._linger_for(record))
        delivered = await delivery
        await self._applied(applied, delivered)
        return delivered

    async def send_many(
        self, record: QueueRecord, messages: Sequence[StoredMessage]
    ) -> list[Delivered | Exception]:
        """Append several messages (SendMessageBatch): each, once acknowledged and receivable,
        is where it landed, or what failed it. All go to the producer at once, so they share
        produce requests and their reports arrive together (one lease-store write)."""
        started: list[tuple[asyncio.Future[Delivered], asyncio.Future[None]] | Exception] = []
        if self.encryption.sealing_calls_kms(record):
            try:
                await self.encryption.ready_to_seal(record)
            except SqsError as refused:  # KMS refused the queue's key: every entry, as one
                return [refused for _ in messages]
        linger = self._linger_for(record)  # one choice for the batch: its records keep order
        fifo = is_fifo(record)
        for message in messages:
            try:
                started.append(self._start_send(record, message, linger, fifo))
            except Exception as refused:  # noqa: BLE001 - fails this entry only
                started.append(refused)
        for delivery in (s[0] for s in started if not isinstance(s, Exception)):
            # Each awaited in turn, not through `asyncio.wait`: the reports of one batch come
            # in one turn, so this resumes in the next, where `wait`'s own callbacks cost a
            # turn more. Nothing else cancels a delivery's future: a cancelled one is this
            # request's own cancellation, which goes on up.
            if not delivery.done():
                with contextlib.suppress(Exception):
                    await delivery  # a failure is read below, with the others
        outcomes: list[Delivered | Exception] = []
        for entry in started:
            if isinstance(entry, Exception):
                outcomes.append(entry)
                continue
            delivery, applied = entry
            if (failed := delivery.exception()) is not None:
                if not isinstance(failed, Exception):
                    raise failed
                outcomes.append(failed)
                continue
            delivered = delivery.result()
            if not applied.done():  # most are: no coroutine per record for the check
                await self._applied(applied, delivered)
            outcomes.append(delivered)
        return outcomes

    def _linger_for(self, record: QueueRecord) -> Linger:
        """Which producer a send to the queue joins (`Linger`). A crowded gateway's sends wait
        for fuller produce requests (less CPU per message for librdkafka and the broker):
        the fill producer's when nobody received from the queue within `WANTED_FOR_MS`, the
        bulk producer's longer linger when its consumers lag behind.

        Not while consumers wait for the queue's messages (a receive found it empty within
        `WANTED_FOR_MS`, or a long poll is parked on it): there the linger is latency
        nobody gains from, as the consumers spend what it saves on empty receives.
        Measured on side-by-side workload (b), 12 batch producers and 20 short-polling
        consumers on one queue (bench/results/archive/profile-journal.md, 2026-11-27 (9fdcc3b)): sends at p50 42 ->
        31 ms, 1.24x the messages. A fill with no consumer at all has nobody to keep pace
        with, and gains from the fill producer's shorter linger (bench/results/archive/profile-journal.md, 2026-11-29 (20922b2)).
        """
        if not self._producer.crowded():
            return Linger.PROMPT
        now_ms = self._clock.now_ms()
        if _lately(self._wanted_at_ms, record.key, now_ms) or self._signals.waiting(record.key):
            return Linger.PROMPT
        return Linger.BULK if _lately(self._received_at_ms, record.key, now_ms) else Linger.FILL

    def _start_send(
        self,
        record: QueueRecord,
        message: StoredMessage,
        linger: Linger = Linger.PROMPT,
        fifo: bool | None = None,
    ) -> tuple[asyncio.Future[Delivered], asyncio.Future[None]]:
        """Hand the message's record to the producer: the futures of its delivery report and
        of its being applied to the lease store. A standard queue's record joins the producer
        `linger` names (`_linger_for`); a FIFO queue's always the prompt one, as records of
        one group must not overtake each other between producers.
        `fifo` is `is_fifo(record)` when the caller knows it (once for a batch)."""
        if fifo is None:
            fifo = is_fifo(record)
        # As the queue keeps it: its record, the lease store's copy and the re-sends of both.
        message = self.encryption.for_queue(record, message)
        group = message.message_group_id if fifo else None  # FIFO: key = group
        applied: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        partition: int | None
        if group is not None:
            partition = group_partition(group, record.partitions)
        elif self._everything_here:
            partition = None  # the producer's choice, as `_served_partition` says
        else:
            partition = self._served_partition(record)
        delivery = self._producer.start(
            record.topic,
            message.body,
            key=(group or message.message_id).encode(),
            headers=to_headers(message, id_in_header=group is not None),
            timestamp_ms=message.sent_ms,
            partition=partition,
            on_delivered=functools.partial(self._delivered, message, applied),
            linger=Linger.PROMPT if fifo else linger,
        )
        return delivery, applied

    async def _applied(self, applied: asyncio.Future[None], delivered: Delivered) -> None:
        if not applied.done():
            # Not applied in its own turn (a gap before it on the partition: another
            # producer's records, which ingest brings).
            await self._until_applied(
                applied, delivered.topic, delivered.partition, delivered.offset
            )
