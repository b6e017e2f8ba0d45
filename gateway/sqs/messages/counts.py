"""The Approximate* numbers, the gauges, expiry, PurgeQueue, and the lease facts a browse
(PeekMessages) reads."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence

from confluent_kafka import KafkaException

from gateway.cluster.forwarding import NotServedHere
from gateway.common import limits
from gateway.common.errors import (
    OwnerGone,
    PurgeQueueInProgress,
    QueueDoesNotExist,
)
from gateway.common.results import LeaseFacts, QueueGaugeParts
from gateway.sqs.messages.send import Sending
from gateway.sqs.queues import (
    attribute_int,
    is_fifo,
)
from lease_store import notes
from lease_store.keys import PartitionKey
from lease_store.types import Counts
from topology.catalog import QueueRecord, partition_keys
from topology.owners import Owner

log = logging.getLogger("kqs.messages")


class Counting(Sending):
    """The Approximate* numbers, gauges, expiry and purges."""

    # -- queue-level -----------------------------------------------------------------------

    def counts(self, record: QueueRecord) -> Counts:
        """The queue's exact counters, of the partitions served here (all with one gateway)."""
        return self._counts_of(record, self.served(record))

    async def queue_counts(self, record: QueueRecord) -> Counts:
        """The queue's exact counters over all its partitions, wherever they are served.

        A partition whose owner let it go or could not be reached while it was counted (a
        rebalance: the directory names the old owner until the next one has restored it) is
        counted once more where it went, after waiting for that (`until_moved`, as deletes
        do), rather than failing the request."""
        try:
            return await self._queue_counts_once(record)
        except OwnerGone as gone:
            await self._until_moved_from(record, gone)
            return await self._queue_counts_once(record)

    async def _until_moved_from(self, record: QueueRecord, gone: OwnerGone) -> None:
        """Wait until the queue's partitions the gone owner served are served elsewhere."""
        owners = self.owners(record, partition_keys(record))
        moving = owners.get(gone.owner, []) if gone.owner is not None else []
        # Waited for together, as deletes wait for their partitions: 15 s at most in all.
        await asyncio.gather(*(self.until_moved(record, pk.partition, gone.owner) for pk in moving))

    async def _queue_counts_once(self, record: QueueRecord) -> Counts:
        total = self.counts(record)
        owners = self.owners(record, partition_keys(record))
        if owners and self._forwarder is not None:
            total = total + await self._forwarder.counts(owners, record.topic)
        return total

    async def lease_facts(
        self, record: QueueRecord, wanted: dict[int, list[int]]
    ) -> dict[int, LeaseFacts]:
        """The lease facts of these offsets (by partition), wherever their partitions are
        served: read here, or asked of their owners, together. A partition nobody serves now,
        or whose owner did not answer, is absent."""
        keys = partition_keys(record)
        served = {pk.partition for pk in self.served(record)}
        found = self.lease_facts_here(record, {p: o for p, o in wanted.items() if p in served})
        owners = self.owners(record, [keys[p] for p in wanted if p not in served])
        if owners and self._forwarder is not None:
            forwarder = self._forwarder
            answers = await asyncio.gather(
                *(
                    forwarder.lease_facts(
                        owner, record.topic, {pk.partition: wanted[pk.partition] for pk in pks}
                    )
                    for owner, pks in owners.items()
                )
            )
            for answer in answers:
                found.update(answer)
        return found

    def lease_facts_here(
        self, record: QueueRecord, wanted: dict[int, list[int]]
    ) -> dict[int, LeaseFacts]:
        """The lease facts of these offsets of partitions served here (also for another
        gateway's browse: `NotServedHere` for one that is not). Reads only: nothing changes."""
        keys = partition_keys(record)
        found: dict[int, LeaseFacts] = {}
        for partition in self.served_here(record, list(wanted)):
            pk = keys[partition]
            found[partition] = LeaseFacts(
                self._leases.applied_offset(pk),
                {offset: self._leases.fact(pk, offset) for offset in wanted[partition]},
            )
        return found

    def counts_here(self, record: QueueRecord, partitions: list[int]) -> Counts:
        """Counters of partitions served here, for another gateway (`queue_counts`)."""
        keys = partition_keys(record)
        return self._counts_of(record, [keys[p] for p in self.served_here(record, partitions)])

    def _counts_of(self, record: QueueRecord, pks: Iterable[PartitionKey]) -> Counts:
        """Exact counters of these partitions (served here), expired messages dropped first."""
        now_ms = self._clock.now_ms()
        retention_ms = attribute_int(record, "MessageRetentionPeriod") * 1000
        total = Counts()
        for pk in pks:
            if message_ids := self._leases.expire_ids(pk, now_ms, retention_ms):
                self._events.expired(record, message_ids)
            total = total + self._leases.counts(pk, now_ms)
        return total

    def expire(self, record: QueueRecord) -> int:
        """Drop the messages older than the queue's MessageRetentionPeriod, in any state.

        Receives drop the expired messages they come across; this also catches the in-flight
        and delayed ones, and those no receive reaches. Called before counting and by the
        periodic sweep (`expiry.py`).
        """
        now_ms = self._clock.now_ms()
        retention_ms = attribute_int(record, "MessageRetentionPeriod") * 1000
        dropped = 0
        for pk in self.served(record):
            message_ids = self._leases.expire_ids(pk, now_ms, retention_ms)
            if message_ids:
                self._events.expired(record, message_ids)
                dropped += len(message_ids)
        return dropped

    def oldest_message_age_s(self, record: QueueRecord) -> int:
        """ApproximateAgeOfOldestMessage of the partitions served here: seconds since the
        oldest message was sent, or 0."""
        return self._age_s(self._oldest_sent_ms(self.served(record)))

    def _oldest_sent_ms(self, pks: Iterable[PartitionKey]) -> int | None:
        sent = [t for pk in pks if (t := self._leases.oldest_sent_ms(pk)) is not None]
        return min(sent) if sent else None

    def _age_s(self, oldest_sent_ms: int | None, now_ms: int | None = None) -> int:
        if oldest_sent_ms is None:
            return 0
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        return max(0, (now_ms - oldest_sent_ms) // 1000)

    def gauges_here(self, partitions: dict[str, list[int]]) -> dict[str, QueueGaugeParts]:
        """For another gateway's `queue_gauges`: the counters and oldest SentTimestamp of
        each queue topic's partitions served here (a topic gone or moved is left out)."""
        parts: dict[str, QueueGaugeParts] = {}
        for topic, wanted in partitions.items():
            record = self._registry.by_topic(topic)
            if record is None:
                continue
            keys = partition_keys(record)
            try:
                pks = [keys[p] for p in self.served_here(record, wanted)]
            except NotServedHere:
                continue
            parts[topic] = QueueGaugeParts(self._counts_of(record, pks), self._oldest_sent_ms(pks))
        return parts

    async def queue_gauges(
        self, records: Sequence[QueueRecord]
    ) -> tuple[int, dict[str, tuple[Counts, int]]]:
        """The Approximate* numbers of the queues whose gauges this gateway reports: when
        they were read here, and by queue key (exact counters, age of the oldest message in
        seconds) over all their partitions, wherever they are served.

        With several gateways, each queue is reported by the gateway serving its partition
        0 (the others leave it out), which asks the other owners for their partitions in
        one call per owner for all queues. A queue with a partition nobody serves now (a
        rebalance) or whose owner did not answer is left out of this round: no sample is
        better than a partial one.
        """
        asked: dict[Owner, dict[str, list[int]]] = {}
        complete: list[tuple[QueueRecord, QueueGaugeParts]] = []  # with the part read here
        # The samples' time: before the other owners are asked (their answers come later,
        # so a change made meanwhile is never reported as older than it is).
        read_ms = self._clock.now_ms()
        for record in records:
            keys = partition_keys(record)
            if not self._everything_here and not self.ownership.serves(record.topic, 0):
                continue
            served = self.served(record)
            owners = self.owners(record, keys)
            if len(served) + sum(len(pks) for pks in owners.values()) < len(keys):
                continue  # a partition without an owner: counted next round
            here = QueueGaugeParts(self._counts_of(record, served), self._oldest_sent_ms(served))
            for owner, pks in owners.items():
                asked.setdefault(owner, {})[record.topic] = [pk.partition for pk in pks]
            complete.append((record, here))
        answers: list[dict[str, QueueGaugeParts]] = [{} for _ in asked]  # no channel: none
        if asked and self._forwarder is not None:
            forwarder = self._forwarder
            answers = list(
                await asyncio.gather(*(forwarder.gauges(o, parts) for o, parts in asked.items()))
            )
        gauges: dict[str, tuple[Counts, int]] = {}
        for record, here in complete:
            parts = [here]
            for owner_parts, answer in zip(asked.values(), answers, strict=True):
                if record.topic in owner_parts:
                    if record.topic not in answer:
                        break  # that owner did not answer for it: left out
                    parts.append(answer[record.topic])
            else:
                counts = sum((p.counts for p in parts), Counts())
                oldest = [p.oldest_sent_ms for p in parts if p.oldest_sent_ms is not None]
                age_s = self._age_s(min(oldest) if oldest else None, read_ms)
                gauges[record.key] = (counts, age_s)
        return read_ms, gauges

    async def purge_here(self, record: QueueRecord, ends: dict[int, int]) -> int:
        """Drop the messages below `ends` (partition -> purge point) of partitions served
        here; returns how many. Answers once the purge watermarks are in the changelog."""
        keys = partition_keys(record)
        dropped = 0
        with self._changes() as changes:  # the purge watermarks, awaited
            fifo = is_fifo(record)
            for partition in self.served_here(record, list(ends)):
                dropped += self._leases.purge(
                    keys[partition], ends[partition], self._clock.now_ms()
                )
                if fifo:  # PurgeQueue clears the deduplication window too, as in SQS
                    pk = keys[partition]
                    self._leases.forget_deduplication(pk, ends[partition])
                    # and the claims of scope `queue` decided here (lease_store/fifo_claims.py)
                    for name in self._leases.forget_notes(pk, notes.KIND_CLAIM):
                        if self._changelog is not None:
                            self._changelog.note(
                                pk, notes.KIND_CLAIM, name, None, acknowledged=True
                            )
        await changes.confirmed()
        return dropped

    async def _purge_everywhere(self, record: QueueRecord) -> tuple[list[int], int]:
        """Purge every partition at its end offset now, here and at the gateways serving the
        others; returns the end offsets and how many messages were dropped."""
        ends = await self._registry.topic_end_offsets(record)
        if self._registry.current(record) is None:
            raise QueueDoesNotExist()  # deleted while the offsets were fetched
        dropped = await self.purge_here(
            record, {pk.partition: ends[pk.partition] for pk in self.served(record)}
        )
        for owner, pks in self.owners(record, partition_keys(record)).items():
            ends_there = {pk.partition: ends[pk.partition] for pk in pks}
            dropped += await self.forwarder_for(owner).purge(owner, record.topic, ends_there)
        return ends, dropped

    async def purge(self, record: QueueRecord) -> None:
        """Delete every message in the queue when called (PurgeQueue); once per 60 s.

        The purge point of each partition is its end offset now: the lease store drops the
        messages below it and never ingests those offsets again, then Kafka deletes them.
        """
        now_ms = self._clock.now_ms()
        last_ms = self._purged_at_ms.get(record.topic)
        if last_ms is not None and now_ms - last_ms < limits.PURGE_COOLDOWN_S * 1000:
            raise PurgeQueueInProgress(
                f"Only one PurgeQueue operation on {record.name} is allowed every "
                f"{limits.PURGE_COOLDOWN_S} seconds."
            )
        self._purged_at_ms[record.topic] = now_ms  # before any await: a concurrent purge waits
        try:
            try:
                ends, dropped = await self._purge_everywhere(record)
            except OwnerGone as gone:  # a rebalance: purged again where the partitions went
                await self._until_moved_from(record, gone)
                ends, dropped = await self._purge_everywhere(record)
        except BaseException:
            # The client is told the purge failed and retries it (SDKs retry 5xx): the retry
            # must purge, not be refused as in progress. Purging twice is harmless.
            self._purged_at_ms.pop(record.topic, None)
            raise
        self._events.purged(record, dropped)
        log.info("queue purged", extra={"queue": record.key, "messages": dropped})
        # The purge has taken effect; trimming the log only reclaims space (the purge
        # watermark already keeps those offsets out), so a failure here is not the client's.
        for partition, end in enumerate(ends):
            if end <= 0:
                continue
            try:
                await self._registry.trim_topic(record, partition, end)
            except KafkaException as exc:
                log.warning(
                    "purged records not deleted from Kafka",
                    extra={"topic": record.topic, "partition": partition, "error": str(exc)},
                )
