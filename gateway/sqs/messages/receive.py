"""ReceiveMessage: taking leases, long polls, and moving messages to a dead-letter queue."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from gateway.cluster.forwarding import NotServedHere
from gateway.common import limits
from gateway.common.errors import (
    OverLimit,
)
from gateway.common.results import Received
from gateway.sqs.messages.counts import Counting
from gateway.sqs.messages.state import Taken
from gateway.sqs.queues import (
    attribute_int,
    is_fifo,
    redrive_allows,
    redrive_target,
)
from lease_store.handles import ReceiptHandle
from lease_store.keys import PartitionKey
from lease_store.types import Delivery
from topology.catalog import QueueRecord, partition_keys

log = logging.getLogger("kqs.messages")


class Receiving(Counting):
    """Receives: leases taken here or at the owners, long polls, dead-lettering."""

    # -- receive ---------------------------------------------------------------------------

    async def receive(
        self, record: QueueRecord, max_messages: int, visibility_s: int, wait_s: int
    ) -> list[Received]:
        received = await self._receive(record, max_messages, visibility_s, wait_s)
        if received:
            self._events.received(record, [r.delivery for r in received])
        else:
            self._events.empty_receive(record)
        return received

    async def _receive(
        self, record: QueueRecord, max_messages: int, visibility_s: int, wait_s: int
    ) -> list[Received]:
        deadline_ms = self._clock.now_ms() + wait_s * 1000
        if wait_s == 0 and self._over_in_flight_limit(record):
            raise OverLimit(
                f"Too many messages in flight on this queue (limit {limits.MAX_IN_FLIGHT})."
            )
        while True:
            now_ms = self._clock.now_ms()
            self._received_at_ms[record.key] = now_ms  # consumed: no fill linger (`_linger_for`)
            received, moved = await self._receive_now(
                record, max_messages, visibility_s * 1000, now_ms
            )
            if received:
                return received
            self._wanted_at_ms[record.key] = now_ms  # its sends skip the linger (`_linger_for`)
            if moved:
                continue  # dead-letter moves used up this round: others may be visible now
            if now_ms >= deadline_ms:
                return received
            wake_ms = min(deadline_ms, self._next_visible_at_ms(record, now_ms) or deadline_ms)
            await self._park(record, (wake_ms - now_ms) / 1000)
            if self._signals.closed:
                # Shutting down: answer now (empty). A closed `wait` returns at once, so
                # looping on would spin without yielding until the deadline.
                return []
            current = self._registry.current(record)
            if current is None:
                return []  # deleted while we waited
            record = current

    async def _park(self, record: QueueRecord, timeout_s: float) -> None:
        """Wait until something may be visible: a wake-up here, or on another gateway that
        serves some of the queue's partitions."""
        local = self._signals.wait(record.key, timeout_s)
        owners = self.owners(record, partition_keys(record))
        if not owners or self._forwarder is None:
            await local
            return
        await self._forwarder.park(owners.items(), record.topic, local, timeout_s)

    def _over_in_flight_limit(self, record: QueueRecord) -> bool:
        in_flight = sum(self._leases.in_flight_at_most(pk) for pk in self.served(record))
        # Ended leases and expired messages still count in that bound: only a queue that
        # looks full pays for the exact count.
        return in_flight >= limits.MAX_IN_FLIGHT and (
            self.counts(record).in_flight >= limits.MAX_IN_FLIGHT
        )

    def _next_visible_at_ms(self, record: QueueRecord, now_ms: int) -> int | None:
        times = [
            t for pk in self.served(record) if (t := self._leases.next_visible_at_ms(pk, now_ms))
        ]
        return min(times) if times else None

    async def _receive_now(
        self, record: QueueRecord, max_messages: int, visibility_ms: int, now_ms: int
    ) -> tuple[list[Received], int]:
        """Lease what is visible now; returns the leases and how many went to the DLQ."""
        keys = partition_keys(record)
        start = self._next_partition[record.key] % len(keys)
        self._next_partition[record.key] += 1
        rotated = keys[start:] + keys[:start]
        served = (
            rotated
            if self._everything_here
            else tuple(pk for pk in rotated if self.ownership.serves(record.topic, pk.partition))
        )
        received, moved, taken = await self._receive_partitions(
            record, served, max_messages, visibility_ms, now_ms
        )
        owners = self.owners(record, rotated)
        if owners and self._forwarder is not None and len(received) < max_messages:
            forwarded, moved_there = await self._forwarder.receive(
                owners, record.topic, max_messages - len(received), visibility_ms
            )
            if taken:
                received = await self._still_served(record, received, taken)
            received += forwarded
            moved += moved_there
        return received, moved

    async def receive_here(
        self, record: QueueRecord, partitions: list[int], max_messages: int, visibility_ms: int
    ) -> tuple[list[Received], int]:
        """A receive forwarded by another gateway, on its partitions still served here: one
        that moved meanwhile has nothing to give (as one nobody serves), the others answer;
        `NotServedHere` only when none is served here any more."""
        keys = partition_keys(record)
        still = [p for p in partitions if self._served_here(record, p)]
        if partitions and not still:
            raise NotServedHere(f"{record.topic}/{partitions}")
        pks = [keys[p] for p in still]
        now_ms = self._clock.now_ms()
        self._received_at_ms[record.key] = now_ms
        received, moved, _ = await self._receive_partitions(
            record, pks, max_messages, visibility_ms, now_ms
        )
        if not received:
            self._wanted_at_ms[record.key] = now_ms  # sends here feed that consumer too
        return received, moved

    async def _receive_partitions(
        self,
        record: QueueRecord,
        pks: Sequence[PartitionKey],
        max_messages: int,
        visibility_ms: int,
        now_ms: int,
    ) -> tuple[list[Received], int, list[Taken]]:
        """Lease up to `max_messages` from `pks` (served here): the leases, how many messages
        went to the DLQ, and, with several gateways, which partition and spell of serving
        each run of leases came from (`_still_served`)."""
        if not self._everything_here:
            # Woken from a stall, leases taken on partitions the group gave away would reach
            # the changelog after their next owner's own records (`PauseWatch`).
            await self.ownership.settled()
        redrive = redrive_target(record)
        dlq = self._registry.by_arn(redrive[0]) if redrive else None
        if dlq is not None and not redrive_allows(dlq, self.queue_arn_of(record)):
            dlq = None  # the DLQ's RedriveAllowPolicy no longer admits this queue: keep it
        max_receive_count = redrive[1] if redrive and dlq else None
        retention_ms = attribute_int(record, "MessageRetentionPeriod") * 1000
        fifo_queue = is_fifo(record)
        received: list[Received] = []
        moved = 0
        taken: list[Taken] = []
        for pk in pks:
            wanted = max_messages - len(received)
            if wanted <= 0:
                break
            if not self._everything_here:
                spell = self.ownership.serving_since(record.topic, pk.partition)
                if spell is None:
                    # Released while a dead-letter move awaited Kafka: its next owner may have
                    # restored it already, without a lease taken here now.
                    continue
                taken.append(Taken(pk, spell, len(received)))
            # FIFO: groups in order, nothing from a group with a message in flight. Fair: a
            # standard queue's partition that stored a MessageGroupId (`PartitionState.
            # grouped`, kept with the partition across restarts and moves); groups take turns.
            plain = not fifo_queue and not self._leases.grouped(pk)
            take = self._leases.receive
            if fifo_queue:
                take = self._leases.receive_fifo
            elif not plain:
                take = self._leases.receive_fair
            outcome = take(pk, now_ms, wanted, visibility_ms, retention_ms, max_receive_count)
            if delivered := outcome.delivered:
                encode = self._handles.encode  # each message received gets its receipt handle
                received.extend(
                    [
                        Received(
                            d,
                            encode(
                                ReceiptHandle(
                                    pk.incarnation, pk.partition, d.offset, d.fact.receive_count
                                )
                            ),
                        )
                        for d in delivered
                    ]
                )
            if outcome.expired_ids:
                self._events.expired(record, outcome.expired_ids)
            if outcome.dead_letter and dlq is not None:
                await self._dead_letter(record, dlq, pk, outcome.dead_letter)
                moved += len(outcome.dead_letter)
                if taken:  # the loop may have stood still while the move awaited Kafka
                    received = await self._still_served(record, received, taken)
        if taken and received:
            received = await self._leases_confirmed(record, received, taken)
        return received, moved, taken

    async def wait_here(self, record: QueueRecord, partitions: list[int], timeout_s: float) -> None:
        """A long poll of another gateway, parked here until something may be visible on
        these partitions: at once if something is."""
        keys = partition_keys(record)
        pks = [keys[p] for p in self.served_here(record, partitions)]
        now_ms = self._clock.now_ms()
        if any(self._leases.has_visible(pk, now_ms) for pk in pks):
            return
        times = [t for pk in pks if (t := self._leases.next_visible_at_ms(pk, now_ms))]
        if times:
            timeout_s = min(timeout_s, (min(times) - now_ms) / 1000)
        await self._signals.wait(record.key, timeout_s)

    async def _dead_letter(
        self, source: QueueRecord, dlq: QueueRecord, pk: PartitionKey, moves: list[Delivery]
    ) -> None:
        """Move messages past maxReceiveCount to the DLQ, keeping id, body and attributes."""
        source_arn = self.queue_arn_of(source)
        for delivery in moves:
            # Everything is kept but the delay, which was spent in the source queue; the
            # receive count carries over, as in SQS (the DLQ's first receive counts on).
            moved = replace(
                delivery.message,
                delay_s=0,
                deduplication_scope=None,  # a move is never refused as a FIFO duplicate
                dead_letter_source_arn=source_arn,
                receive_count=delivery.fact.receive_count,
                first_receive_ms=delivery.fact.first_receive_ms,
            )
            await self.send(dlq, moved)
            self._leases.remove(pk, delivery.offset, self._clock.now_ms())
            self._events.moved_to_dlq(source, dlq, delivery)
            log.info(
                "message moved to dead-letter queue",
                extra={"queue": source.key, "dlq": dlq.key, "message_id": moved.message_id},
            )
