"""The lease changelog: lease changes published to the compacted `__kqs_leases` topic.

The lease store reports every committed write (`LeaseStore(on_commit=...)`); this module turns
the report into records:

    key  <incarnation-hex>/<partition:5>/<offset:20>/<epoch:20>   value  LeaseFact.encode(), or None
    key  <incarnation-hex>/<partition:5>/state         value  JSON {purged_before_offset, ...}
    key  <incarnation-hex>/<partition:5>/note/<kind>/<name-hex>   value  a note, or None

Keys are fixed-width, one per message and owner epoch, so compaction keeps exactly the
latest fact (or the tombstone) each owner wrote of each message. Facts created by ingest are
not published: the queue record determines them (see `lease_store/rebuild.py`). Records are
produced in commit order, so per key the latest write wins.

**Owner epochs.** A gateway that loses a partition can still have fact records on their way:
librdkafka sends what it held when the process stopped (SIGSTOP, a stalled VM) as soon as it
wakes, and a produce request sent into a cut link is retransmitted by the kernel when the
link returns, though librdkafka reported it failed. Such a record lands after the records of
the partition's next owner, and read in log order it would undo that owner's work (a lease
over its delete's tombstone: a deleted message back). So each fact record names the epoch
its writer owned the partition in: one more than the offset of the writer's own record in
`__kqs_owners` (`epoch_of`), which grows with every owner, and a restore keeps each message's
record of the highest epoch (`lease_store/rebuild.py`). The epoch is in the key, not only the
value: with one key, compaction would keep the late record and drop the next owner's newer
one under it. Epoch 0 is the key without an epoch: one gateway that is not in the directory
(`KQS_SHARED_CLUSTER=warn`), and versions before epochs (2026-12-02).

The changelog follows the lease store; it is not the durable record of a lease change. A
DeleteMessage or ChangeMessageVisibility is answered once the lease store's WAL is synced
(`gateway/sqs/group_sync.py`), and its fact record goes out through a `FollowerProducer` without
anyone waiting: no delivery report per record, failures counted and logged. The records are
noted as the lease store commits and handed to librdkafka, the latest value per key, by the
follower's own thread every `FollowerProducer.HAND_OVER_S` (50 ms; with several gateways
also right after each sync, before the answer: `hand_over`). What that costs:
a gateway whose disk is *lost* rebuilds from a changelog that may miss the changes of its
last moments (a redelivery, or a lower receive count, which at-least-once delivery allows).
A crash or power loss costs nothing, the WAL holds them. Purge watermarks are rare and
decide which offsets are never ingested again, so they still go through the acknowledged
producer and PurgeQueue waits for them (`capture()`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field

from lease_store.keys import PartitionKey
from lease_store.types import PartitionState
from topology.admin import TopicAdmin
from topology.follower_producer import FollowerProducer
from topology.names import LEASES_TOPIC
from topology.producer import AsyncProducer, Delivered

log = logging.getLogger("kqs.changelog")

# Tombstones must outlive the queue records they delete: the longest MessageRetentionPeriod
# (14 days) plus the topic retention margin, with a day to spare.
TOMBSTONE_RETENTION_MS = 15 * 24 * 60 * 60 * 1000
TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "delete.retention.ms": str(TOMBSTONE_RETENTION_MS),
    "min.compaction.lag.ms": "60000",
}
_STATE = "state"
_NOTE = "note"


# A fact's key: its partition's part (`_key_prefix`), the offset in 20 digits, then the
# writer's epoch (`_epoch_suffix`).
_OFFSET = b"%020d"


def epoch_of(directory_offset: int) -> int:
    """The epoch of an owner whose record in `__kqs_owners` is at `directory_offset`."""
    return directory_offset + 1


def _epoch_suffix(epoch: int) -> bytes:
    return b"/%020d" % epoch if epoch else b""


def fact_key(pk: PartitionKey, offset: int, epoch: int = 0) -> bytes:
    return _key_prefix(pk.prefix) + _OFFSET % offset + _epoch_suffix(epoch)


@functools.lru_cache(maxsize=4096)
def _key_prefix(partition_prefix: bytes) -> bytes:
    # Every lease change builds a key: the partition's part is formatted once per partition
    # (cached by `PartitionKey.prefix`, the incarnation's 16 bytes and the partition number).
    incarnation, partition = partition_prefix[:16], int.from_bytes(partition_prefix[16:], "big")
    return f"{incarnation.hex()}/{partition:05d}/".encode()


def state_key(pk: PartitionKey) -> bytes:
    return f"{pk.incarnation.hex()}/{pk.partition:05d}/{_STATE}".encode()


def encode_state(st: PartitionState) -> bytes:
    return json.dumps(
        {"purged_before_offset": st.purged_before_offset, "applied_offset": st.applied_offset}
    ).encode()


def note_key(pk: PartitionKey, kind: bytes, name: bytes) -> bytes:
    """A note's key (`lease_store/notes.py`): `<incarnation>/<partition>/note/<kind>/<name hex>`
    (names may hold `/`). A version that does not know notes skips these keys."""
    return _key_prefix(pk.prefix) + b"note/" + kind + b"/" + name.hex().encode()


@dataclass(frozen=True, slots=True)
class ChangelogKey:
    pk: PartitionKey
    offset: int | None  # None: the partition's state record, or a note
    note: tuple[bytes, bytes] | None = None  # a note's (kind, name)
    epoch: int = 0  # a fact's: its writer's owner epoch (`epoch_of`)


def parse_key(raw: bytes) -> ChangelogKey | None:
    """The coordinates a changelog key names; None for a key this version does not know."""
    try:
        parts = raw.decode().split("/")
        pk = PartitionKey(bytes.fromhex(parts[0]), int(parts[1]))
        if len(parts) == 5 and parts[2] == _NOTE:
            return ChangelogKey(pk, None, (parts[3].encode(), bytes.fromhex(parts[4])))
        if len(parts) == 4:
            return ChangelogKey(pk, int(parts[2]), epoch=int(parts[3]))
        (last,) = parts[2:]
        return ChangelogKey(pk, None if last == _STATE else int(last))
    except (ValueError, IndexError):
        return None


def purge_watermark(raw: bytes) -> int:
    return int(json.loads(raw)["purged_before_offset"])


@dataclass
class Confirmation:
    """Records produced inside one `capture()` block."""

    futures: list[asyncio.Future[Delivered]] = field(default_factory=list)

    async def confirmed(self) -> None:
        """Return once every record is acknowledged; raises `ProduceFailed` otherwise."""
        if self.futures:
            await asyncio.gather(*self.futures)


class LeaseChangelog:
    def __init__(
        self, producer: AsyncProducer, follower: FollowerProducer, admin: TopicAdmin
    ) -> None:
        self._producer = producer  # acknowledged: partition state records
        self._follower = follower  # fire-and-forget: fact records
        self._admin = admin
        self._capture: Confirmation | None = None
        self._purge_published: dict[PartitionKey, int] = {}
        # Each partition's fact-key suffix: the epoch this gateway owns it in (`write_as`).
        self._suffixes: dict[PartitionKey, bytes] = {}
        self.published = 0
        self._state_failures = 0

    @property
    def pending(self) -> int:
        """Fact records not acknowledged by Kafka yet (how far the changelog lags)."""
        return self._follower.pending

    @property
    def failures(self) -> int:
        return self._follower.failures + self._state_failures

    async def ensure_topic(self) -> None:
        # One partition, like the catalog: a rebuild reads it whole, in order.
        await self._admin.create_topic(LEASES_TOPIC, 1, TOPIC_CONFIG)

    def write_as(self, pk: PartitionKey, epoch: int) -> None:
        """Write the partition's facts under owner epoch `epoch` from now on (set when this
        gateway takes the partition, before it serves it; see the module docstring)."""
        self._suffixes[pk] = _epoch_suffix(epoch)

    def on_commit(
        self, pk: PartitionKey, changes: dict[int, bytes | None], st: PartitionState
    ) -> None:
        """The lease store's commit listener; runs on the event loop. `changes` holds each
        changed fact as `LeaseFact.encode` wrote it: the record value as it is."""
        if changes:
            # One call for the commit's facts (a receive's or a delete's ten), not three each.
            prefix = _key_prefix(pk.prefix)
            suffix = self._suffixes.get(pk, b"")
            records = [
                (prefix + _OFFSET % offset + suffix, changes[offset]) for offset in sorted(changes)
            ]
            self._follower.produce_many(LEASES_TOPIC, records)
            self.published += len(records)
        if st.purged_before_offset != self._purge_published.get(pk, 0):
            self._purge_published[pk] = st.purged_before_offset
            self._produce_state(state_key(pk), encode_state(st))

    def note(
        self,
        pk: PartitionKey,
        kind: bytes,
        name: bytes,
        raw: bytes | None,
        *,
        acknowledged: bool = False,
    ) -> None:
        """Publish a note as stored (`lease_store/notes.py`), or its tombstone (None).

        `acknowledged`: through the acknowledged producer, collected by `capture()` (a FIFO
        deduplication claim, which must be in the changelog before the message it admits is
        sent); otherwise it follows, as lease facts do."""
        key = note_key(pk, kind, name)
        if acknowledged:
            self._produce_state(key, raw)
        else:
            self._publish_fact(key, raw)

    def tombstone(self, pk: PartitionKey, offset: int) -> None:
        """Publish a message's removal again (a retried DeleteMessage whose first try failed)."""
        self._publish_fact(self._fact_key(pk, offset), None)

    def forget_partition(self, pk: PartitionKey, offsets: list[int]) -> None:
        """Tombstone what the changelog may hold of a deleted queue's partition.

        Its facts and its state record would otherwise stay in the compacted topic forever
        (a rebuild ignores them: the queue is gone from the catalog). Deleted messages have
        their tombstones already; facts written only by ingest were never published, and a
        tombstone for them is harmless.
        """
        for offset in offsets:
            self._publish_fact(self._fact_key(pk, offset), None)
        self._produce_state(state_key(pk), None)
        self._purge_published.pop(pk, None)

    @contextlib.contextmanager
    def capture(self) -> Iterator[Confirmation]:
        """Collect the records produced inside the block, to await their acknowledgement."""
        confirmation = Confirmation()
        previous, self._capture = self._capture, confirmation
        try:
            yield confirmation
        finally:
            self._capture = previous

    def hand_over(self) -> concurrent.futures.Future[None] | None:
        """Give Kafka's client the fact records noted so far; call after each lease-store sync.

        With a confirmed follower (several gateways), the future of their acknowledgement.
        """
        return self._follower.hand_over()

    def flush(self, timeout_s: float = 30.0) -> int:
        """Wait for the fact records handed over so far; returns how many are still out."""
        return self._follower.flush(timeout_s)

    def _fact_key(self, pk: PartitionKey, offset: int) -> bytes:
        return _key_prefix(pk.prefix) + _OFFSET % offset + self._suffixes.get(pk, b"")

    def _publish_fact(self, key: bytes, value: bytes | None) -> None:
        self._follower.produce(LEASES_TOPIC, value, key=key)
        self.published += 1

    def _produce_state(self, key: bytes, value: bytes | None) -> None:
        future = self._producer.send_soon(LEASES_TOPIC, value, key=key)
        self.published += 1
        future.add_done_callback(self._on_state_delivered)
        if self._capture is not None:
            self._capture.futures.append(future)

    def _on_state_delivered(self, future: asyncio.Future[Delivered]) -> None:
        if future.cancelled():
            return
        error = future.exception()
        if error is not None:
            self._state_failures += 1
            log.warning(
                "partition state not written to the changelog",
                extra={"error": str(error), "failures": self.failures},
            )
