"""Applying records to the lease store: those ingest reads, and those this gateway produced,
from their delivery reports (`service.py` tells the whole story)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

from gateway.sqs.messages.routing import Routing
from gateway.sqs.messages.state import ApplyTarget
from lease_store.keys import PartitionKey
from lease_store.records import StoredMessage
from topology.catalog import QueueRecord, partition_keys
from topology.ingest import Batch
from topology.producer import Delivered

log = logging.getLogger("kqs.messages")


# How long a send waits for its record to come back through ingest before answering anyway.
# The record is durable in Kafka by then; only its immediate receivability is at stake.
INGEST_WAIT_S = 10.0


class Applying(Routing):
    """Records into the lease store: delivered ones in batches, ingested ones as read."""

    # -- ingest ----------------------------------------------------------------------------

    def on_ingested(self, topic: str, partition: int, batch: Batch) -> None:
        """Called on the event loop with records the ingest consumer read."""
        record = self._registry.by_topic(topic)
        if record is None:
            return  # the queue was deleted while the batch was in transit
        if not self.ownership.serves(topic, partition):
            return  # released while the batch was in transit
        pk = partition_keys(record)[partition]
        if not self._everything_here:
            self._in_this_spell(topic, partition, pk)
        self._leases.ingest(pk, batch, self._clock.now_ms())
        self._apply_ahead(record, topic, partition, pk)

    def _delivered(
        self, message: StoredMessage, applied: asyncio.Future[None], delivered: Delivered
    ) -> None:
        """A record this gateway produced was acknowledged (on the loop, from its report).

        It is applied by `_apply_delivered` once the whole batch of reports is in, together
        with the other records of the batch (the ten of a SendMessageBatch, concurrent
        sends): one lease-store write for all of them, and `applied` settled in the same
        event-loop turn, so the send answers in the next.
        """
        where = (delivered.topic, delivered.partition)
        target = self._batch_targets.get(where)
        if target is None:
            # The partition's first record in this batch of reports: where it applies is
            # asked once, not for each of the batch's records.
            target = self._apply_target(delivered.topic, delivered.partition)
            if target is None:
                # The queue was deleted while the record was in transit, or another gateway
                # serves the partition: its ingest applies the record.
                applied.set_result(None)
                return
            self._batch_targets[where] = target
            if not self._everything_here:
                self._in_this_spell(delivered.topic, delivered.partition, target[1])
        _, pk, applied_offset = target
        if delivered.offset <= applied_offset:
            applied.set_result(None)  # ingest was first
            return
        if 0 < delivered.timestamp_ms != message.sent_ms:
            # What ingest would read back: the broker's timestamp (CreateTime: ours, so this
            # differs only under LogAppendTime).
            message = replace(message, sent_ms=delivered.timestamp_ms)
        self._ahead[pk][delivered.offset] = message
        self._ingest_waiters[where].append((delivered.offset, applied))
        self._to_apply[where] = target

    def _in_this_spell(self, topic: str, partition: int, pk: PartitionKey) -> None:
        """Several gateways: before a record of a served partition is applied, forget the
        delivered records still waiting in `_ahead` from an earlier spell of serving it.

        A record is applied to a partition's lease state only by the gateway serving it, in
        the spell its delivery report came in: between two spells the partition may have
        been served by another gateway, which restored it and delivered those records
        itself (or this gateway restored it since). Kept, they would be applied over the
        restored state; forgotten, they come back the one right way, through the restore or
        through ingest in this spell. Their sends answer now: the records are in Kafka."""
        spell = self.ownership.serving_since(topic, partition)
        if spell is None:
            return
        was = self._ahead_spell.get(pk)
        if was == spell:
            return
        self._ahead_spell[pk] = spell
        stale = self._ahead.pop(pk, None)
        if was is None or not stale:
            return
        log.info(
            "delivered records of an earlier spell left to the restore or ingest",
            extra={"topic": topic, "partition": partition, "records": len(stale)},
        )
        for _, future in self._ingest_waiters.pop((topic, partition), []):
            if not future.done():
                future.set_result(None)

    def _apply_target(self, topic: str, partition: int) -> ApplyTarget | None:
        """The queue, partition key and applied offset of a partition whose delivered records
        this gateway applies; None when it does not (the queue is gone, or another gateway
        serves the partition)."""
        record = self._registry.by_topic(topic)
        if record is None or not self.ownership.serves(topic, partition):
            return None
        pk = partition_keys(record)[partition]
        return record, pk, self._leases.applied_offset(pk)

    def _apply_delivered(self) -> None:
        """After each batch of delivery reports (`AsyncProducer.add_batch_listener`)."""
        if self._batch_targets:
            self._batch_targets = {}
        if not self._to_apply:
            return
        to_apply, self._to_apply = self._to_apply, {}
        for (topic, partition), (record, pk, _) in to_apply.items():
            self._apply_ahead(record, topic, partition, pk)

    def _apply_ahead(
        self, record: QueueRecord, topic: str, partition: int, pk: PartitionKey
    ) -> None:
        """Apply the delivered records that now continue the partition's applied run, then
        answer the sends waiting for what is applied."""
        applied = self._leases.applied_offset(pk)
        ahead = self._ahead.get(pk)
        if ahead:
            run: Batch = []
            for offset in sorted(ahead):
                if offset <= applied:
                    del ahead[offset]  # ingest applied it meanwhile
                elif offset == applied + 1 + len(run):
                    run.append((offset, ahead.pop(offset)))
                else:
                    break
            if run:
                self._leases.ingest(pk, run, self._clock.now_ms())
                applied = self._leases.applied_offset(pk)
            if ahead:
                # A gap before a record of ours: another producer's records, which only
                # ingest brings (with one gateway it may have paused the partition).
                self.wake_ingest(topic, partition)
            else:
                del self._ahead[pk]
        self.applied_hint[(topic, partition)] = applied
        waiters = self._ingest_waiters.get((topic, partition))
        if waiters:
            still = []
            for offset, future in waiters:
                if offset <= applied:
                    if not future.done():
                        future.set_result(None)
                else:
                    still.append((offset, future))
            self._ingest_waiters[(topic, partition)] = still
        self._signals.notify(record.key)

    async def _until_applied(
        self, applied: asyncio.Future[None], topic: str, partition: int, offset: int
    ) -> None:
        try:
            await asyncio.wait_for(applied, INGEST_WAIT_S)
        except TimeoutError:
            log.warning(
                "send answered before ingest caught up",
                extra={"topic": topic, "partition": partition, "offset": offset},
            )

    def queue_deleted(self, record: QueueRecord) -> None:
        """Forget what was kept in memory about the queue's incarnation."""
        for memo in (
            self._wanted_at_ms,
            self._received_at_ms,
            self._next_partition,
            self._next_send_partition,
        ):
            memo.pop(record.key, None)
        for pk in partition_keys(record):
            self._ahead_spell.pop(pk, None)
