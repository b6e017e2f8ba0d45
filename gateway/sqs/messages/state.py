"""What the parts of the message service share: its collaborators and its in-memory state
(`MessageState`), and the small records they hand each other. The service itself and the
story of a message are in `service.py`.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from gateway.cluster.forwarding import Forwarder
from gateway.cluster.ownership import EveryPartition, GroupOwnership
from gateway.observability.events import EventSink
from gateway.sqs.encryption import QueueEncryption
from gateway.sqs.group_sync import GroupSync
from gateway.sqs.queues import (
    QueueRegistry,
)
from gateway.sqs.waiters import QueueSignals
from lease_store.clock import Clock
from lease_store.handles import ReceiptHandleCodec
from lease_store.keys import PartitionKey
from lease_store.records import StoredMessage
from lease_store.store import LeaseStore
from topology.catalog import QueueRecord
from topology.changelog import LeaseChangelog
from topology.producer import AsyncProducer


@dataclass(slots=True)
class Taken:
    """Leases a receive took from one partition: those of `received[start:]` up to the next
    run's start, in the spell of serving `spell` (`GroupOwnership.serving_since`)."""

    pk: PartitionKey
    spell: int
    start: int


def _nobody_to_wake(topic: str, partition: int) -> None:
    """`MessageService.wake_ingest` before ingest is there."""


# A partition whose delivered records this gateway applies: its queue, its key and its applied
# offset when the batch of delivery reports came (`MessageService._delivered`).
ApplyTarget = tuple[QueueRecord, PartitionKey, int]


log = logging.getLogger("kqs.messages")


class MessageState:
    """What every part of the message service shares (its parts: routing, apply, send,
    counts, receive, changes; assembled in `service.py`)."""

    group_sync: GroupSync

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
        encryption: QueueEncryption | None = None,
    ) -> None:
        self._clock = clock
        # Seals what is sent to encrypted queues (`Sending._start_send`); opens for move tasks.
        self.encryption = encryption or QueueEncryption()
        # Which partitions are served here; the others' owners are reached by `_forwarder`.
        self.ownership = ownership or EveryPartition()
        # One gateway (the default): nothing to ask per partition on the request path.
        self._everything_here = isinstance(self.ownership, EveryPartition)
        self._forwarder = forwarder
        # Told about each outcome once it is decided; must return at once and never raise.
        self._events = events or EventSink()
        self._changelog = changelog
        self._producer = producer
        self._leases = leases
        self._registry = registry
        self._signals = signals
        self._handles = handles
        self._region = region
        self._ingest_waiters: dict[tuple[str, int], list[tuple[int, asyncio.Future[None]]]] = (
            defaultdict(list)
        )
        # Delivered records not applied yet, by offset (see the module header): those of this
        # event-loop turn, and those past a gap in their partition.
        self._ahead: dict[PartitionKey, dict[int, StoredMessage]] = defaultdict(dict)
        # With several gateways, the spell of serving (`GroupOwnership.serving_since`) each
        # partition's `_ahead` records were delivered in: they apply only in that spell
        # (`Applying._in_this_spell`).
        self._ahead_spell: dict[PartitionKey, int] = {}
        # Where the delivered records of each partition in this batch of reports apply:
        # (topic, partition) -> (queue, partition key, applied offset when the batch came),
        # and the partitions with records to apply at the end of the batch.
        self._batch_targets: dict[tuple[str, int], ApplyTarget] = {}
        self._to_apply: dict[tuple[str, int], ApplyTarget] = {}
        # (topic, partition) -> applied offset, read by the ingest thread to skip records
        # without decoding them, and with one gateway to pause the partitions it applied
        # whole (`IngestConsumer._follow_ends`). Written only on the event loop.
        self.applied_hint: dict[tuple[str, int], int] = {}
        # Asks ingest to read a partition now; set once ingest exists (`gateway/app.py`).
        self.wake_ingest: Callable[[str, int], None] = _nobody_to_wake
        self._next_partition: dict[str, int] = defaultdict(int)
        self._next_send_partition: dict[str, int] = defaultdict(int)  # `_served_partition`
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
