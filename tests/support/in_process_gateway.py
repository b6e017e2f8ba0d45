"""A gateway's message service and group ownership on the running event loop, with Kafka's
clients replaced by in-process stand-ins: for the tests of races between the loop's own steps
(a change confirmed after its partition moved, a receive while it moves, a partition taken
again while it is restored, ...)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from gateway.cluster.forwarding import Forwarder
from gateway.cluster.ownership import GroupOwnership
from gateway.cluster.pause_watch import PauseWatch
from gateway.common.results import FifoSent, Received
from gateway.observability.events import EventSink
from gateway.sqs.messages.service import MessageService
from gateway.sqs.queues import QueueRegistry
from gateway.sqs.waiters import QueueSignals
from lease_store.clock import ManualClock
from lease_store.fifo import DedupEntry
from lease_store.handles import ReceiptHandleCodec
from lease_store.keys import PartitionKey
from lease_store.memory import MemoryKeyValueStore
from lease_store.records import StoredMessage
from lease_store.store import LeaseStore
from lease_store.types import Counts
from topology.catalog import QueueRecord
from topology.ingest import IngestConsumer
from topology.owners import Owner, OwnersDirectory
from topology.standins import CountingFollower, EmptyCatalog, InstantProducer, Log, NullAdmin

ME = Owner("gateway-here", "http://127.0.0.1:1")
NEXT = Owner("gateway-next", "http://127.0.0.1:2")
QUEUE = QueueRecord("000000000000", "orders", "ab" * 16, 1)
T0 = 1_700_000_000_000


class RememberingDirectory(OwnersDirectory):
    """The owners directory without Kafka: what this gateway published is what it reads."""

    def __init__(self) -> None:  # no consumer, no producer
        self._owners = {}
        self._offsets = {}
        self.position = 0

    async def end_offset(self) -> int:
        return self.position

    async def publish(self, topic: str, partition: int, owner: Owner) -> int:
        offset = self.position
        self._set((topic, partition), offset, owner)
        self.position += 1
        return offset


class AnsweringForwarder(Forwarder):
    """The channel to other gateways without HTTP: each owner answers what `answers` says
    (an error to raise, else done); every call is noted."""

    def __init__(self, answers: dict[Owner, Exception] | None = None) -> None:
        super().__init__(b"unused")
        self.answers = answers or {}
        self.calls: list[tuple[str, Owner, str]] = []
        self.had_it_no_more: set[Owner] = set()  # owners whose deletes find the message gone
        self.claimed_sends: list[str] = []  # MessageIds of FIFO sends forwarded as claimed
        self.entries: dict[bytes, DedupEntry] = {}  # what the owners' FIFO windows hold

    def _answer(self, operation: str, owner: Owner, about: str) -> None:
        self.calls.append((operation, owner, about))
        if (error := self.answers.get(owner)) is not None:
            raise error

    async def delete(self, owner: Owner, topic: str, receipt_handle: str) -> bool:
        self._answer("delete", owner, receipt_handle)
        return owner not in self.had_it_no_more

    async def change_visibility(
        self, owner: Owner, topic: str, receipt_handle: str, visibility_s: int
    ) -> None:
        self._answer("change_visibility", owner, receipt_handle)

    async def fifo_send(
        self, owner: Owner, topic: str, message: StoredMessage, claimed: bool = False
    ) -> FifoSent:
        self._answer("fifo_send", owner, message.message_id)
        self.claimed_sends += [message.message_id] if claimed else []
        return FifoSent(message.message_id, "1", duplicate=False)

    async def fifo_entry(
        self, owner: Owner, topic: str, partition: int, scope_key: bytes
    ) -> DedupEntry | None:
        self._answer("fifo_entry", owner, scope_key.decode())
        return self.entries.get(scope_key)

    async def counts(self, owners: dict[Owner, list[PartitionKey]], topic: str) -> Counts:
        total = Counts()
        for owner, pks in owners.items():
            self._answer("counts", owner, ",".join(str(pk.partition) for pk in pks))
            total = total + Counts(visible=1)  # each owner holds one visible message
        return total

    async def purge(self, owner: Owner, topic: str, ends: dict[int, int]) -> int:
        self._answer("purge", owner, ",".join(f"{p}:{e}" for p, e in sorted(ends.items())))
        return len(ends)  # one message dropped per partition

    async def receive_attempt(
        self,
        owner: Owner,
        topic: str,
        attempt_id: str,
        wanted: int,
        visibility_s: int,
        wait_s: int,
    ) -> list[Received]:
        self._answer("receive_attempt", owner, attempt_id)
        return []  # the queue is empty at every owner


class AssignmentsOnly(IngestConsumer):
    """The ingest consumer without Kafka: it only takes note of what it is told to read."""

    def __init__(self) -> None:  # no librdkafka, no thread
        self.assigned: dict[str, dict[int, int]] = {}

    def assign(self, topic: str, next_offsets: dict[int, int]) -> None:
        self.assigned.setdefault(topic, {}).update(next_offsets)


def registry_of(queue: QueueRecord, log: Log) -> QueueRegistry:
    """A registry that knows `queue` (the catalog and topics are stand-ins on `log`)."""
    registry = QueueRegistry(
        EmptyCatalog("unused", NullAdmin(log), InstantProducer(log)),
        NullAdmin(log),
        1,
        on_created=lambda record: None,
        on_deleted=lambda record: None,
    )
    registry.apply(queue, 0)
    return registry


def ownership_on_the_loop(
    registry: QueueRegistry,
    directory: OwnersDirectory,
    leases: LeaseStore,
    clock: ManualClock,
    log: Log,
    pause_watch: PauseWatch | None = None,
    write_as: Callable[[PartitionKey, int], None] = lambda pk, epoch: None,
) -> GroupOwnership:
    """This gateway's `GroupOwnership`, started on the running loop, Kafka's clients stand-ins."""
    ownership = GroupOwnership(
        ME,
        directory,
        registry,
        leases,
        CountingFollower(log),
        "unused",
        clock,
        on_served=lambda record: None,
        pause_watch=pause_watch,
        write_as=write_as,
    )
    ownership.start(AssignmentsOnly(), asyncio.get_running_loop())
    return ownership


async def gateway_serving_the_queue(
    directory: OwnersDirectory | None = None,
    served: bool = True,
    forwarder: Forwarder | None = None,
    queue: QueueRecord = QUEUE,
    clock: ManualClock | None = None,
    also: Sequence[QueueRecord] = (),
    events: EventSink | None = None,
    pause_watch: PauseWatch | None = None,
) -> tuple[MessageService, GroupOwnership]:
    """`served`: partition 0 of `queue` is served here; `forwarder`: the channel to the
    other gateways (none: nothing can be forwarded); `also`: other queues that exist."""
    log = Log()
    clock = clock or ManualClock(T0)
    leases = LeaseStore(MemoryKeyValueStore())
    registry = registry_of(queue, log)
    for offset, other in enumerate(also, start=1):
        registry.apply(other, offset)
    ownership = ownership_on_the_loop(
        registry, directory or RememberingDirectory(), leases, clock, log, pause_watch
    )
    messages = MessageService(
        clock,
        InstantProducer(log),
        leases,
        registry,
        QueueSignals(),
        ReceiptHandleCodec(b"a receipt handle secret"),
        "us-east-1",
        ownership=ownership,
        forwarder=forwarder,
        events=events,
    )
    if served:
        await take(ownership, queue)
    return messages, ownership


async def take(ownership: GroupOwnership, queue: QueueRecord = QUEUE, partition: int = 0) -> None:
    ownership.assigned([(queue.topic, partition)])
    for _ in range(100):  # bounded: a few loop turns
        if ownership.serves(queue.topic, partition):
            return
        await asyncio.sleep(0)
    raise AssertionError("partition not served")
