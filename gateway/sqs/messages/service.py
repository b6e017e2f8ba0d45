"""The message service, assembled from its parts by job (this package's modules), each a
layer on the one before: `state` (what they share), `routing` (which gateway serves a
partition), `apply`, `send`, `counts`, `receive`, `changes`.

The message plane: send, receive, delete and visibility changes on lease store + Kafka.

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

With several gateways (`gateway/cluster/ownership.py`), each partition is served by one of
them: what needs a partition another gateway serves goes to it
(`gateway/cluster/forwarding.py`), and the `*_here` methods are what an owner runs for such a
request.
"""

from __future__ import annotations

from gateway.cluster.forwarding import Forwarder
from gateway.cluster.ownership import EveryPartition, GroupOwnership
from gateway.common.eager_start import resume_waiting
from gateway.observability.events import EventSink
from gateway.sqs.encryption import QueueEncryption
from gateway.sqs.group_sync import GroupSync
from gateway.sqs.messages.changes import Changing
from gateway.sqs.queues import QueueRegistry
from gateway.sqs.waiters import QueueSignals
from lease_store.clock import Clock
from lease_store.handles import ReceiptHandleCodec
from lease_store.store import LeaseStore
from topology.changelog import LeaseChangelog
from topology.producer import AsyncProducer


class MessageService(Changing):
    """Send, receive, delete and change visibility of the messages of every queue."""

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
        super().__init__(
            clock,
            producer,
            leases,
            registry,
            signals,
            handles,
            region,
            changelog,
            events,
            ownership,
            forwarder,
            encryption,
        )
        # The parts' hooks, once they are all there.
        self.group_sync = GroupSync(self._sync)
        self._producer.add_batch_listener(self._apply_delivered)
        # Then the sends waiting for those reports answer in the same turn, not after the
        # loop's next round of reading requests (`gateway/common/eager_start.py`).
        self._producer.add_settled_listener(resume_waiting)
