"""The message plane: send, receive, delete and visibility changes on lease store + Kafka.

Send produces the record (acks=all) and answers once the record is applied to the lease
store, so a message acknowledged to a client is both durable in Kafka and receivable at once.
The gateway that produced a record applies it from its delivery report, which names the
offset: all the records of one batch of reports in one lease-store write, in the event-loop
turn the reports arrive in, so the sends answer in the next turn. The ingest consumer reads
the records back too and skips what is applied already. Records
applied out of turn (a report whose predecessor on the partition is not applied yet: a
foreign producer's record, another gateway's) wait in `_ahead` until ingest fills the gap,
so a partition's applied offset only ever moves over a contiguous run. Receive takes leases
in the lease store; when nothing is visible it parks on `QueueSignals` until a record is
applied, a visibility changes, or the earliest lease or delay of the queue ends.

With several gateways (`gateway/ownership.py`), each partition is served by one of them: what
needs a partition another gateway serves goes to it (`gateway/forwarding.py`), and the `*_here`
methods are what an owner runs for such a request.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from confluent_kafka import KafkaException

from gateway import limits
from gateway.eager_start import resume_waiting
from gateway.errors import (
    OverLimit,
    OwnerGone,
    PurgeQueueInProgress,
    QueueDoesNotExist,
    ReceiptHandleIsInvalid,
    ServiceUnavailable,
    SqsError,
)
from gateway.events import EventSink
from gateway.fifo import FifoService
from gateway.forwarding import Forwarder, NotServedHere, QueueGaugeParts, Received
from gateway.group_sync import GroupSync
from gateway.ownership import EveryPartition, GroupOwnership
from gateway.queues import (
    QueueRegistry,
    attribute_int,
    group_partition,
    is_fifo,
    partition_keys,
    queue_arn,
    redrive_allows,
    redrive_target,
)
from gateway.waiters import QueueSignals
from lease_store.clock import Clock
from lease_store.errors import LeaseError
from lease_store.handles import ReceiptHandle, ReceiptHandleCodec
from lease_store.keys import PartitionKey
from lease_store.records import StoredMessage
from lease_store.store import LeaseStore
from lease_store.types import Counts, Delivery
from topology.catalog import QueueRecord
from topology.changelog import Confirmation, LeaseChangelog
from topology.ingest import Batch
from topology.owners import Owner
from topology.producer import AsyncProducer, Delivered, Linger, ProduceFailed
from topology.record_format import to_headers

log = logging.getLogger("kqs.messages")


@dataclass(slots=True)
class _Taken:
    """Leases a receive took from one partition: those of `received[start:]` up to the next
    run's start, in the spell of serving `spell` (`GroupOwnership.serving_since`)."""

    pk: PartitionKey
    spell: int
    start: int


# How long a send waits for its record to come back through ingest before answering anyway.
# The record is durable in Kafka by then; only its immediate receivability is at stake.
INGEST_WAIT_S = 10.0


# Longest a request waits for a partition that no gateway serves (a rebalance moving it from
# one to the next; measured ~0.7 s for a restore) before it fails with ServiceUnavailable.
MOVING_WAIT_S = 5.0
# Longest a change waits for the next owner of a partition whose owner was gone (`OwnerGone`)
# before trying once more. Longer: after a SIGKILL the group notices only at the end of the
# dead gateway's 6 s session, and the next owner restores the partition before it publishes
# itself (the crash suite's SIGKILL runs still refused changes after 5 s). An SDK's own
# retries of ServiceUnavailable are over within a second or two, so waiting here is what
# spares the application the error.
OWNER_GONE_WAIT_S = 15.0

Entry = TypeVar("Entry")
T = TypeVar("T")


def _nobody_to_wake(topic: str, partition: int) -> None:
    """`MessageService.wake_ingest` before ingest is there."""


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


# A partition whose delivered records this gateway applies: its queue, its key and its applied
# offset when the batch of delivery reports came (`MessageService._delivered`).
_ApplyTarget = tuple[QueueRecord, PartitionKey, int]


class MessageService:
    def __init__(
        self,
        clock: Clock,
        producer: AsyncProducer,
        leases: LeaseStore,
        registry: QueueRegistry,
        signals: QueueSignals,
        handles: ReceiptHandleCodec,
        region: str,
        changelog: LeaseChangelog | None = None,
        events: EventSink | None = None,
        ownership: EveryPartition | GroupOwnership | None = None,
        forwarder: Forwarder | None = None,
    ) -> None:
        self._clock = clock
        # Which partitions are served here; the others' owners are reached by `_forwarder`.
        self.ownership = ownership or EveryPartition()
        # One gateway (the default): nothing to ask per partition on the request path.
        self._everything_here = isinstance(self.ownership, EveryPartition)
        self._forwarder = forwarder
        # Told about each outcome once it is decided; must return at once and never raise.
        self._events = events or EventSink()
        self._changelog = changelog
        self.group_sync = GroupSync(self._sync)
        self._producer = producer
        self._leases = leases
        self._registry = registry
        self._signals = signals
        self._handles = handles
        self._region = region
        self.fifo = FifoService(self, leases, clock)
        # Standard queues that were sent a MessageGroupId (fair queues), by topic: marked by a
        # grouped send through this gateway, a grouped message ingested, or a receive that
        # returned one (after a restart, or on a partition taken over from another gateway).
        self.fair_topics: set[str] = set()
        self._ingest_waiters: dict[tuple[str, int], list[tuple[int, asyncio.Future[None]]]] = (
            defaultdict(list)
        )
        # Delivered records not applied yet, by offset (see the module header): those of this
        # event-loop turn, and those past a gap in their partition.
        self._ahead: dict[PartitionKey, dict[int, StoredMessage]] = defaultdict(dict)
        # Where the delivered records of each partition in this batch of reports apply:
        # (topic, partition) -> (queue, partition key, applied offset when the batch came),
        # and the partitions with records to apply at the end of the batch.
        self._batch_targets: dict[tuple[str, int], _ApplyTarget] = {}
        self._to_apply: dict[tuple[str, int], _ApplyTarget] = {}
        # (topic, partition) -> applied offset, read by the ingest thread to skip records
        # without decoding them, and with one gateway to pause the partitions it applied
        # whole (`IngestConsumer._follow_ends`). Written only on the event loop.
        self.applied_hint: dict[tuple[str, int], int] = {}
        # Asks ingest to read a partition now; set once ingest exists (`gateway/app.py`).
        self.wake_ingest: Callable[[str, int], None] = _nobody_to_wake
        self._next_partition: dict[str, int] = defaultdict(int)
        self._next_send_partition: dict[str, int] = defaultdict(int)  # `_served_partition`
        producer.add_batch_listener(self._apply_delivered)
        # Then the sends waiting for those reports answer in the same turn, not after the
        # loop's next round of reading requests (`gateway/eager_start.py`).
        producer.add_settled_listener(resume_waiting)
        # Last PurgeQueue per queue topic (so per incarnation), in memory: a gateway restart
        # or another gateway of the cluster does not know it.
        self._purged_at_ms: dict[str, int] = {}
        # Whether the last delete left visible messages in its queue: the lean front then
        # starts the next delete on its reading stack (`LeanFront.deletes_now`).
        self.deletes_find_more = False
        # When a receive last found the queue empty, and when one last ran on it, by queue
        # key (see `_linger_for`).
        self._wanted_at_ms: dict[str, int] = {}
        self._received_at_ms: dict[str, int] = {}

    # -- ingest ----------------------------------------------------------------------------

    def on_ingested(self, topic: str, partition: int, batch: Batch) -> None:
        """Called on the event loop with records the ingest consumer read."""
        record = self._registry.by_topic(topic)
        if record is None:
            return  # the queue was deleted while the batch was in transit
        if not self.ownership.serves(topic, partition):
            return  # released while the batch was in transit
        pk = partition_keys(record)[partition]
        self._leases.ingest(pk, batch, self._clock.now_ms())
        if topic not in self.fair_topics and not is_fifo(record):
            if any(message.message_group_id is not None for _, message in batch):
                self.fair_topics.add(topic)  # another producer's grouped send
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

    def _apply_target(self, topic: str, partition: int) -> _ApplyTarget | None:
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

    # -- send ------------------------------------------------------------------------------

    async def send(self, record: QueueRecord, message: StoredMessage) -> Delivered:
        """Append the message; returns where it landed, once Kafka acknowledged it and it is
        receivable."""
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

    def queue_deleted(self, record: QueueRecord) -> None:
        """Forget what was kept in memory about the queue's incarnation."""
        for memo in (
            self._wanted_at_ms,
            self._received_at_ms,
            self._next_partition,
            self._next_send_partition,
        ):
            memo.pop(record.key, None)

    def _linger_for(self, record: QueueRecord) -> Linger:
        """Which producer a send to the queue joins (`Linger`). A crowded gateway's sends wait
        for fuller produce requests (less CPU per message for librdkafka and the broker):
        the fill producer's when nobody received from the queue within `WANTED_FOR_MS`, the
        bulk producer's longer linger when its consumers lag behind.

        Not while consumers wait for the queue's messages (a receive found it empty within
        `WANTED_FOR_MS`, or a long poll is parked on it): there the linger is latency
        nobody gains from, as the consumers spend what it saves on empty receives.
        Measured on side-by-side workload (b), 12 batch producers and 20 short-polling
        consumers on one queue (bench/results/PROFILE.md, session 21): sends at p50 42 ->
        31 ms, 1.24x the messages. A fill with no consumer at all has nobody to keep pace
        with, and gains from the fill producer's shorter linger (session 36).
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
        group = message.message_group_id if fifo else None  # FIFO: key = group
        if group is None and message.message_group_id is not None:
            self.fair_topics.add(record.topic)  # a fair queue (see `_receive_now`)
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

    def _served_partition(self, record: QueueRecord) -> int | None:
        """Where a standard queue's message goes: any partition (the producer's choice, None)
        with one gateway; with several, one this gateway serves, in turn, when it serves any.

        A standard queue promises no order, so the partition is free. Produced to a partition
        another gateway serves, a message is receivable only once that owner's ingest fetch
        returns (up to `KQS_INGEST_FETCH_WAIT_MS`); produced to one served here, it is applied
        from its delivery report. Measured with `kqs serve --workers 2` (session 8, PROFILE.md):
        single calls ran at a quarter of one process's rate, send p99 550 ms.
        """
        if self._everything_here:
            return None
        served = [p for p in range(record.partitions) if self.ownership.serves(record.topic, p)]
        if not served:
            return None
        turn = self._next_send_partition[record.key]
        self._next_send_partition[record.key] = turn + 1
        return served[turn % len(served)]

    async def _applied(self, applied: asyncio.Future[None], delivered: Delivered) -> None:
        if not applied.done():
            # Not applied in its own turn (a gap before it on the partition: another
            # producer's records, which ingest brings).
            await self._until_applied(
                applied, delivered.topic, delivered.partition, delivered.offset
            )

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

    def served(self, record: QueueRecord) -> tuple[PartitionKey, ...]:
        """The queue's partitions served here (all of them with one gateway)."""
        keys = partition_keys(record)
        if self._everything_here:
            return keys
        return tuple(pk for pk in keys if self.ownership.serves(record.topic, pk.partition))

    def owners(
        self, record: QueueRecord, pks: Sequence[PartitionKey]
    ) -> dict[Owner, list[PartitionKey]]:
        """The partitions of `pks` other gateways serve, by gateway (none with one gateway;
        a partition nobody serves, during a rebalance, is left out)."""
        owners: dict[Owner, list[PartitionKey]] = {}
        if self._everything_here:
            return owners
        for pk in pks:
            if self.ownership.serves(record.topic, pk.partition):
                continue
            owner = self.ownership.owner(record.topic, pk.partition)
            if owner is not None:
                owners.setdefault(owner, []).append(pk)
        return owners

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
    ) -> tuple[list[Received], int, list[_Taken]]:
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
        taken: list[_Taken] = []
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
                taken.append(_Taken(pk, spell, len(received)))
            # FIFO: groups in order, nothing from a group with a message in flight. Fair: a
            # standard queue known to carry MessageGroupIds (`fair_topics`); groups take turns.
            plain = not fifo_queue and record.topic not in self.fair_topics
            take = self._leases.receive
            if fifo_queue:
                take = self._leases.receive_fifo
            elif not plain:
                take = self._leases.receive_fair
            outcome = take(pk, now_ms, wanted, visibility_ms, retention_ms, max_receive_count)
            if delivered := outcome.delivered:
                if plain and any(d.message.message_group_id is not None for d in delivered):
                    self.fair_topics.add(record.topic)  # fair from the next receive on
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
        return received, moved, taken

    async def _still_served(
        self, record: QueueRecord, received: list[Received], taken: list[_Taken]
    ) -> list[Received]:
        """The leases of `received` (runs of `taken`) whose partition is still served in the
        spell they were taken in, once the receive has waited for something after taking them
        (a forwarded receive, a dead-letter move); `taken` is updated to match.

        A gateway stopped in that wait past its session lost those partitions: their next
        owner restored them without these leases (still in this gateway's changelog queue
        then), and may have delivered and deleted the messages since. Answering them on
        waking would deliver them after their deletion (the crash suite's SIGSTOP run, session
        35). Those leased on a moved partition are not answered; they are not lost: the next
        owner serves them (and should the partition come back to this gateway's kept copy,
        the lease ends with its visibility timeout)."""
        await self.ownership.settled()  # at once unless the loop stood still
        kept: list[Received] = []
        still: list[_Taken] = []
        for i, run in enumerate(taken):
            end = taken[i + 1].start if i + 1 < len(taken) else len(received)
            if self.ownership.serving_since(record.topic, run.pk.partition) != run.spell:
                log.warning(
                    "leases taken before the partition moved are not answered",
                    extra={
                        "queue": record.key,
                        "partition": run.pk.partition,
                        "leases": end - run.start,
                    },
                )
                continue
            still.append(_Taken(run.pk, run.spell, len(kept)))
            kept.extend(received[run.start : end])
        taken[:] = still
        return kept

    def served_here(self, record: QueueRecord, partitions: list[int]) -> list[int]:
        """`partitions` (of a forwarded request), all served here, or `NotServedHere`."""
        for partition in partitions:
            if not self._served_here(record, partition):
                raise NotServedHere(f"{record.topic}/{partition}")
        return partitions

    def _served_here(self, record: QueueRecord, partition: int) -> bool:
        """Whether a partition a forwarded request names is one of the queue's, served here."""
        return partition < record.partitions and self.ownership.serves(record.topic, partition)

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

    def queue_arn_of(self, record: QueueRecord) -> str:
        return queue_arn(record)

    # -- delete and visibility -------------------------------------------------------------

    def locate(
        self, record: QueueRecord, receipt_handle: str
    ) -> tuple[PartitionKey, ReceiptHandle]:
        """The partition and handle a receipt handle of `record` names (FIFO receive attempts)."""
        return self._locate(record, receipt_handle)

    def _locate(
        self, record: QueueRecord, receipt_handle: str
    ) -> tuple[PartitionKey, ReceiptHandle]:
        handle = self._handles.decode(receipt_handle)
        keys = partition_keys(record)
        if handle.incarnation != keys[0].incarnation or handle.partition >= len(keys):
            raise ReceiptHandleIsInvalid.for_handle(receipt_handle)
        return keys[handle.partition], handle

    def _owner_elsewhere(
        self, record: QueueRecord, pk: PartitionKey, forward: bool
    ) -> Owner | None:
        """The gateway to forward a request about `pk` to; None when it is served here.

        Raises `NotServedHere` for a forwarded request (`forward` False) that reached a
        gateway no longer serving the partition, and `ServiceUnavailable` while nobody does.
        """
        if self.ownership.serves(record.topic, pk.partition):
            return None
        if not forward:
            raise NotServedHere(f"{record.topic}/{pk.partition}")
        owner = self.ownership.owner(record.topic, pk.partition)
        if owner is None:
            # A delete, visibility change or FIFO send first waited `MOVING_WAIT_S` for the
            # next owner (`until_served`): unlike a 409 while a partition moves, worth a line
            # naming the partition that stayed without one.
            log.warning(
                "no gateway serves the partition: answered as unavailable",
                extra={"queue": record.key, "partition": pk.partition},
            )
            raise ServiceUnavailable(
                "This queue partition is moving between gateways. Retry later."
            )
        return owner

    async def until_served(self, record: QueueRecord, pks: Iterable[PartitionKey]) -> None:
        """With several gateways, wait (at most `MOVING_WAIT_S`) while any of `pks` is moving
        between gateways, so that a request about it reaches its next owner rather than
        failing with ServiceUnavailable (a send right after CreateQueue met a second round
        of the group's balancing so)."""
        if not self._everything_here:
            partitions = {pk.partition for pk in pks}
            await self.ownership.until_served(record.topic, partitions, MOVING_WAIT_S)

    async def until_moved(
        self, record: QueueRecord, partition: int, away_from: Owner | None
    ) -> bool:
        """Wait (at most `OWNER_GONE_WAIT_S`) until a partition whose owner was gone
        (`OwnerGone.owner`, None: this gateway) is served here or by another gateway."""
        return await self.ownership.until_moved(
            record.topic, partition, away_from, OWNER_GONE_WAIT_S
        )

    def _partitions_named(
        self, record: QueueRecord, receipt_handles: Iterable[str]
    ) -> list[PartitionKey]:
        """The partitions the valid handles among `receipt_handles` name."""
        named = []
        for receipt_handle in receipt_handles:
            try:
                named.append(self._locate(record, receipt_handle)[0])
            except (SqsError, LeaseError):
                continue  # the request's own pass answers this entry's error
        return named

    def owner_elsewhere(
        self, record: QueueRecord, pk: PartitionKey, forward: bool
    ) -> tuple[Owner, Forwarder] | None:
        """The gateway serving `pk` and the channel to it, when that is not this one (see
        `_owner_elsewhere`); for the FIFO sends (`gateway/fifo.py`)."""
        owner = self._owner_elsewhere(record, pk, forward)
        return None if owner is None else (owner, self.forwarder_for(owner))

    def forwarder_for(self, owner: Owner) -> Forwarder:
        if self._forwarder is None:
            raise ServiceUnavailable("No channel to the gateway serving this partition.")
        return self._forwarder

    def _changes(self) -> contextlib.AbstractContextManager[Confirmation]:
        """Collects the lease changelog records of a change, to await their acknowledgement."""
        if self._changelog is None:
            return contextlib.nullcontext(Confirmation())
        return self._changelog.capture()

    async def delete(self, record: QueueRecord, receipt_handle: str) -> None:
        """Delete the message; deleting an already deleted message succeeds, as in SQS."""
        (error,) = await self.delete_many(record, (receipt_handle,))
        if error is not None:
            raise error

    async def delete_here(self, record: QueueRecord, receipt_handle: str) -> bool:
        """A delete another gateway forwarded here (never forwarded again): whether this
        removed the message (False: it was gone already). That gateway tries again where the
        partition moved if this raises `OwnerGone`."""
        outcomes, removed = await self._delete_once(record, (receipt_handle,), forward=False)
        if outcomes[0] is not None:
            raise outcomes[0]
        return bool(removed)

    async def delete_many(
        self, record: QueueRecord, receipt_handles: Sequence[str]
    ) -> list[Exception | None]:
        """Delete the messages these handles name: for each, None or what failed it (an
        invalid or, on FIFO, expired handle fails only its own entry).

        One lease-store write per partition served here for all of them; the others go to
        their partitions' owners. Answers once the removals are on disk (the lease store's
        WAL, synced once for all the writes of this event-loop turn). The changelog records
        follow without waiting. An entry whose partition's owner was gone is tried once more
        at the next owner (`_once_more_where_moved`).

        Each message removed counts as deleted once (`EventSink.deleted`). A gateway that
        removed one but lost its partition before the removal was confirmed does not count
        it (`OwnerGone.removed`): the next owner counts it if it still had the message (it
        restored the partition before the removal reached the changelog), and if it had it
        no more, the retry's answer says so and it is counted here.
        """
        outcomes, _ = await self._delete_once(record, receipt_handles, forward=True)
        if self._everything_here:
            return outcomes  # one gateway: no owner is ever gone
        removed_on_retry: set[str] = set()

        async def delete_again(again: Sequence[str]) -> list[Exception | None]:
            retried, removed = await self._delete_once(record, again, forward=True)
            removed_on_retry.update(again[i] for i in removed)
            return retried

        first = list(outcomes)  # the retry answers in place
        final = await self._once_more_where_moved(
            record, receipt_handles, outcomes, lambda handle: handle, delete_again
        )
        found_gone = [
            tried.removed
            for tried, handle, last in zip(first, receipt_handles, final, strict=True)
            if isinstance(tried, OwnerGone)
            and tried.removed
            and last is None
            and handle not in removed_on_retry
        ]
        if found_gone:
            self._events.deleted(record, found_gone)
        return final

    async def _delete_once(
        self, record: QueueRecord, receipt_handles: Sequence[str], forward: bool
    ) -> tuple[list[Exception | None], set[int]]:
        """One try of `delete_many` (`forward` False: a request forwarded here): each
        entry's outcome, and the entries whose message this try removed (here, or at the
        owner it was forwarded to)."""
        if not self._everything_here:
            await self.ownership.settled()
        if forward and not self._everything_here:  # a forwarded request: the sender waited
            await self.until_served(record, self._partitions_named(record, receipt_handles))
        outcomes: list[Exception | None] = [None] * len(receipt_handles)
        offsets: dict[PartitionKey, list[int]] = {}
        local: list[tuple[int, PartitionKey, int]] = []  # the entries deleted here
        forwarded: list[tuple[int, Awaitable[bool]]] = []
        fifo = is_fifo(record)
        for i, receipt_handle in enumerate(receipt_handles):
            try:
                pk, handle = self._locate(record, receipt_handle)
                owner = (
                    None if self._everything_here else self._owner_elsewhere(record, pk, forward)
                )
                if owner is not None:
                    forwarder = self.forwarder_for(owner)
                    forwarded.append((i, forwarder.delete(owner, record.topic, receipt_handle)))
                    continue
                if fifo:
                    self.fifo.check_expired(pk, handle, receipt_handle)
            except (SqsError, LeaseError, NotServedHere) as error:
                outcomes[i] = error
                continue
            offsets.setdefault(pk, []).append(handle.offset)
            local.append((i, pk, handle.offset))
        spells = self._spells(record, offsets)
        now_ms = self._clock.now_ms()
        removed_ids: dict[tuple[PartitionKey, int], str] = {}
        for pk, wanted in offsets.items():
            removed = self._leases.remove_many(pk, wanted, now_ms)
            removed_ids.update(((pk, o), message_id) for o, message_id in removed.items())
            if self._changelog is not None:
                for offset in set(wanted) - removed.keys():
                    # Gone here already; an earlier try may have failed to reach the changelog.
                    self._changelog.tombstone(pk, offset)
        answered = await self._settle_forwarded(forwarded, outcomes)
        removed_by = {i for i, removed_there in answered.items() if removed_there}
        if not offsets:
            return outcomes, removed_by
        # Its consumer answered sooner takes more only while the queue has some to give: on an
        # empty queue it would poll it sooner, for nothing (PROFILE.md, session 34).
        prompt = any(self._leases.has_visible(pk, now_ms) for pk in self.served(record))
        self.deletes_find_more = prompt
        try:
            await self._confirmed(record, spells, prompt)
        except BaseException:
            # Removed here even if the sync failed (and a retry will find them gone): the
            # messages are no longer in the queue, so each counts as deleted once, now.
            self._count_deleted(record, removed_ids, self._moved(record, spells))
            raise
        moved = self._fail_if_moved(record, spells, [(i, pk) for i, pk, _ in local], outcomes)
        self._count_deleted(record, removed_ids, moved)
        if removed_ids and fifo:
            self._signals.notify(record.key)  # their groups may be free now: wake long polls
        if self._everything_here:
            return outcomes, removed_by  # one gateway: nobody asks which entry removed what
        for i, pk, offset in local:
            if (pk, offset) not in removed_ids:
                continue  # gone already, or a handle given twice (its first entry removed it)
            message_id = removed_ids.pop((pk, offset))
            if isinstance(gone := outcomes[i], OwnerGone):
                gone.removed = message_id or None  # counted by whoever learns where it went
            else:
                removed_by.add(i)
        return outcomes, removed_by

    def _count_deleted(
        self,
        record: QueueRecord,
        removed_ids: dict[tuple[PartitionKey, int], str],
        moved: set[PartitionKey],
    ) -> None:
        """Count the messages removed here, but those of partitions that moved before the
        removal was confirmed (`delete_many` says who counts those)."""
        deleted = [m for (pk, _), m in removed_ids.items() if m and pk not in moved]
        if deleted:
            self._events.deleted(record, deleted)

    async def change_visibility(
        self, record: QueueRecord, receipt_handle: str, visibility_s: int, forward: bool = True
    ) -> None:
        (error,) = await self.change_visibility_many(
            record, ((receipt_handle, visibility_s),), forward
        )
        if error is not None:
            raise error

    async def change_visibility_many(
        self, record: QueueRecord, changes: Sequence[tuple[str, int]], forward: bool = True
    ) -> list[Exception | None]:
        """Restart the leases these (receipt handle, seconds) name: for each, None or what
        failed it (MessageNotAvailable, an invalid or, on FIFO, expired handle).

        Partitions served elsewhere go to their owners (and an entry whose partition's owner
        was gone, to the next one: `_once_more_where_moved`). Answers once the changes are on
        disk: one WAL sync for all of them (and for every other write of this turn).
        """
        outcomes = await self._change_visibility_once(record, changes, forward)
        if not forward or self._everything_here:
            # Forwarded: the gateway that forwarded it tries again. One gateway: no owner is
            # ever gone.
            return outcomes
        return await self._once_more_where_moved(
            record,
            changes,
            outcomes,
            lambda change: change[0],
            lambda again: self._change_visibility_once(record, again, forward),
        )

    async def _change_visibility_once(
        self, record: QueueRecord, changes: Sequence[tuple[str, int]], forward: bool
    ) -> list[Exception | None]:
        if not self._everything_here:
            await self.ownership.settled()
        if forward and not self._everything_here:  # a forwarded request: the sender waited
            handles = [receipt_handle for receipt_handle, _ in changes]
            await self.until_served(record, self._partitions_named(record, handles))
        outcomes: list[Exception | None] = [None] * len(changes)
        forwarded: list[tuple[int, Awaitable[None]]] = []
        local: list[tuple[int, PartitionKey]] = []  # the entries changed here
        fifo = is_fifo(record)
        now_ms = self._clock.now_ms()
        for i, (receipt_handle, visibility_s) in enumerate(changes):
            try:
                pk, handle = self._locate(record, receipt_handle)
                owner = self._owner_elsewhere(record, pk, forward)
                if owner is not None:
                    forwarder = self.forwarder_for(owner)
                    forwarded.append(
                        (
                            i,
                            forwarder.change_visibility(
                                owner, record.topic, receipt_handle, visibility_s
                            ),
                        )
                    )
                    continue
                if fifo:
                    self.fifo.check_expired(pk, handle, receipt_handle)
                self._leases.change_visibility(
                    pk, handle.offset, handle.epoch, now_ms, visibility_s * 1000, sync=False
                )
            except (SqsError, LeaseError, NotServedHere) as error:
                outcomes[i] = error
                continue
            local.append((i, pk))
        spells = self._spells(record, {pk for _, pk in local})
        await self._settle_forwarded(forwarded, outcomes)
        if local:
            await self._confirmed(record, spells)
            self._fail_if_moved(record, spells, local, outcomes)
            # The earliest moment something becomes visible may have moved: let waiters
            # re-plan.
            self._signals.notify(record.key)
        return outcomes

    def _spells(
        self, record: QueueRecord, pks: Iterable[PartitionKey]
    ) -> dict[PartitionKey, int | None]:
        """Which spell of serving each partition is in (see `GroupOwnership.serving_since`)."""
        if self._everything_here:
            return {}
        return {pk: self.ownership.serving_since(record.topic, pk.partition) for pk in pks}

    def _moved(
        self, record: QueueRecord, spells: dict[PartitionKey, int | None]
    ) -> set[PartitionKey]:
        """The partitions no longer in the spell of serving they were in (`_spells`)."""
        return {
            pk
            for pk, spell in spells.items()
            if self.ownership.serving_since(record.topic, pk.partition) != spell
        }

    async def _confirmed(
        self,
        record: QueueRecord,
        spells: dict[PartitionKey, int | None],
        prompt: bool = False,
    ) -> None:
        """Wait until the changes made so far are durable (`group_sync`, resumed from the
        sync's callback with `prompt`); a failure that is their partitions' move
        (`_failed_by_move`) is not raised, since `_fail_if_moved` then sends the entries to
        the next owner. After the loop stood still, also wait for the group's word
        (`GroupOwnership.settled`) before the spells are checked."""
        try:
            await self.group_sync.durable(prompt)
        except BaseException as error:
            if not self._failed_by_move(record, spells, error):
                raise
        if not self._everything_here:
            await self.ownership.settled()

    def _failed_by_move(
        self, record: QueueRecord, spells: dict[PartitionKey, int | None], error: BaseException
    ) -> bool:
        """Whether a change's failed confirmation is its partitions' move: every partition it
        changed here stopped being served here meanwhile.

        A gateway that finds its partitions lost drops the changelog records Kafka has not
        taken yet (`GroupOwnership._let_go`), which fails the confirmations waiting for them
        (`ProduceFailed.dropped`); the next owner restored the partitions without those
        changes. That is a move, not an outage: the entries are tried again at the next
        owner (`_fail_if_moved`), instead of the client being told Kafka is unavailable (seen
        with a gateway stopped past its session and woken with a delete in its socket,
        `test_e2e_ownership.py`)."""
        if not (isinstance(error, ProduceFailed) and error.dropped) or not spells:
            # Another failure (a delivery timeout: the broker away) is not the move's, and
            # is answered as it is: waiting for the next owner on top of it would hold the
            # client past its delivery timeout twice over.
            return False
        if self._moved(record, spells) != spells.keys():
            return False
        log.warning(
            "a change's confirmation failed as its partitions moved: tried at the next owner",
            extra={"queue": record.key, "error": str(error)},
        )
        return True

    def _fail_if_moved(
        self,
        record: QueueRecord,
        spells: dict[PartitionKey, int | None],
        local: list[tuple[int, PartitionKey]],
        outcomes: list[Exception | None],
    ) -> set[PartitionKey]:
        """Fail the entries changed here on a partition that stopped being served here (or
        was served again, in a new spell) before the change was confirmed; returns those
        partitions.

        The partition's new owner may have restored it from the changelog before this
        change's record reached Kafka (a gateway learns late that the group took its
        partitions when the broker was down): answering success would let an acknowledged
        delete be undone. As `OwnerGone`, the entry is tried once more at the new owner
        (by this gateway, or by the one that forwarded it here)."""
        moved = self._moved(record, spells)
        if not moved:
            return moved
        log.warning(
            "partition moved while a change was confirmed: tried at the next owner",
            extra={"queue": record.key, "partitions": sorted(pk.partition for pk in moved)},
        )
        for i, pk in local:
            if pk in moved and outcomes[i] is None:
                outcomes[i] = OwnerGone(
                    "This queue partition moved to another gateway during the request. Retry."
                )
        return moved

    async def _once_more_where_moved(
        self,
        record: QueueRecord,
        entries: Sequence[Entry],
        outcomes: list[Exception | None],
        handle_of: Callable[[Entry], str],
        attempt: Callable[[Sequence[Entry]], Awaitable[list[Exception | None]]],
    ) -> list[Exception | None]:
        """Try once more the entries whose partition's owner was gone (`OwnerGone`: it let
        the partition go or could not be reached), each partition's once its next owner
        serves it (`until_moved`); the others keep their outcome.

        While a partition moves, the directory goes on naming the gateway that let it go
        until the next one has restored it: without this, every delete of a handle of that
        partition in the meantime would be refused. Only "gone" is tried again; what an owner
        answered itself (an invalid handle, a message not in flight) stands. A delete or
        visibility change applied by a gateway that then could not answer is harmless to
        apply again."""
        gone: dict[tuple[int, Owner | None], list[int]] = defaultdict(list)
        for i, outcome in enumerate(outcomes):
            if isinstance(outcome, OwnerGone):
                pk, _ = self._locate(record, handle_of(entries[i]))
                gone[(pk.partition, outcome.owner)].append(i)
        if not gone:
            return outcomes  # the usual case: nothing to wait for

        async def again(partition: int, away_from: Owner | None, indexes: list[int]) -> None:
            if not await self.until_moved(record, partition, away_from):
                log.warning(
                    "owner of the partition gone, no next one in time: answered as unavailable",
                    extra={"queue": record.key, "partition": partition, "entries": len(indexes)},
                )
                return
            retried = await attempt([entries[i] for i in indexes])
            for i, outcome in zip(indexes, retried, strict=True):
                outcomes[i] = outcome

        retries = [again(p, owner, indexes) for (p, owner), indexes in gone.items()]
        for failed in await asyncio.gather(*retries, return_exceptions=True):
            if isinstance(failed, BaseException):
                raise failed  # as the first try would have: the whole request fails
        return outcomes

    @staticmethod
    async def _settle_forwarded(
        forwarded: list[tuple[int, Awaitable[T]]], outcomes: list[Exception | None]
    ) -> dict[int, T]:
        """Await the entries sent to other gateways; each one's failure becomes its outcome.
        Returns the answers of those that succeeded, by entry."""
        if not forwarded:
            return {}
        results = await asyncio.gather(*(call for _, call in forwarded), return_exceptions=True)
        answered: dict[int, T] = {}
        for (i, _), result in zip(forwarded, results, strict=True):
            if isinstance(result, BaseException):
                if not isinstance(result, Exception):
                    raise result
                outcomes[i] = result
            else:
                answered[i] = result
        return answered

    def _sync(self) -> concurrent.futures.Future[None] | None:
        """The group sync: the WAL, the durable record of every change made so far.

        With several gateways the changelog is what another gateway restores a partition
        from, so its records of those changes go to Kafka's client now and the waiters also
        wait for their acknowledgement (the future returned). With one gateway the changelog
        is a copy for a lost disk only: the follower's own thread hands its records over
        every `FollowerProducer.HAND_OVER_S`, so a message received and deleted within that
        time costs Kafka one record (the tombstone) instead of two, and the event loop makes
        no produce calls for them."""
        self._leases.sync()
        if self._changelog is not None and not self._everything_here:
            return self._changelog.hand_over()
        return None

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
            owners = self.owners(record, partition_keys(record))
            moving = owners.get(gone.owner, []) if gone.owner is not None else []
            # Waited for together, as deletes wait for their partitions: 15 s at most in all.
            await asyncio.gather(
                *(self.until_moved(record, pk.partition, gone.owner) for pk in moving)
            )
            return await self._queue_counts_once(record)

    async def _queue_counts_once(self, record: QueueRecord) -> Counts:
        total = self.counts(record)
        owners = self.owners(record, partition_keys(record))
        if owners and self._forwarder is not None:
            total = total + await self._forwarder.counts(owners, record.topic)
        return total

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
            for partition in self.served_here(record, list(ends)):
                dropped += self._leases.purge(
                    keys[partition], ends[partition], self._clock.now_ms()
                )
        await changes.confirmed()
        return dropped

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
            ends = await self._registry.topic_end_offsets(record)
        except BaseException:
            self._purged_at_ms.pop(record.topic, None)  # nothing was purged: allow a retry
            raise
        if self._registry.current(record) is None:
            raise QueueDoesNotExist()  # deleted while the offsets were fetched
        dropped = await self.purge_here(
            record, {pk.partition: ends[pk.partition] for pk in self.served(record)}
        )
        for owner, pks in self.owners(record, partition_keys(record)).items():
            ends_there = {pk.partition: ends[pk.partition] for pk in pks}
            dropped += await self.forwarder_for(owner).purge(owner, record.topic, ends_there)
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
