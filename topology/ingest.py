"""Tails the queue topics and hands their records to the lease store.

One consumer thread per gateway. Records are decoded on the thread and handed to the event
loop in per-partition batches, so the lease store keeps a single writer. Two ways to decide
which partitions are read:

* manual assignment (one gateway owns every partition): the gateway assigns each queue
  topic's partitions itself, each resuming at the lease store's applied offset + 1;
* the group (`group_listener` given, several gateways): the consumer subscribes to the queue
  topics (`subscribe`) in the ingest group with cooperative-sticky assignment, and Kafka
  decides which gateway owns which partition. The rebalance callbacks assign nothing
  themselves: they tell the listener, whose event loop restores what it was given and then
  assigns each partition at the offset to resume from (`assign`, as in manual mode). A
  revocation waits for the listener to release the partitions (it stops serving them and
  flushes their changelog) before they leave the assignment, so the next owner finds every
  change in Kafka.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)

from lease_store.records import StoredMessage
from topology.client_log import LIBRDKAFKA
from topology.client_properties import connection
from topology.consuming import decode_queue_record, poll_batch
from topology.names import INGEST_GROUP
from topology.producer import coordinates

log = logging.getLogger("kqs.ingest")

Batch = list[tuple[int, StoredMessage]]
BatchHandler = Callable[[str, int, Batch], None]
# Batches handed to the event loop and not yet applied. Without a bound, a large backlog
# arriving at once (a Kafka producer filling a queue, a restart far behind) queues thousands
# of callbacks ahead of the HTTP requests, which then wait for all of them.
MAX_BATCHES_IN_FLIGHT = 2
# Longest wait of a fetch with less than 64 KiB to return: how late another producer's record
# (a Kafka-native producer's) can become receivable. Every fetch names every assigned
# partition (librdkafka has no incremental fetch sessions), so its cost grows with the
# queues: measured idle with 5,000 one-partition queues, librdkafka's fetch thread took 49 %
# of a core at 100 ms and 11 % at 1,000 ms (the broker 19 % and 8 %); with 10,000 queues
# the gateway used 82 % of a core at 100 ms, doing nothing.
DEFAULT_FETCH_WAIT_MS = 500
# Manual assignment (one gateway): how often the log ends of the partitions are read, to
# pause those the gateway keeps up with by itself and resume the others (see
# `IngestConsumer._follow_ends`): a record of another producer on a paused partition waits up
# to two of these, and a fetch, to be read.
LOG_END_CHECK_S = 1.0
# Group mode: how long a gateway that stops heartbeating (SIGKILLed) keeps its partitions
# before the group moves them (the broker's group.min.session.timeout.ms is 6 s by default;
# librdkafka's own default is 45 s).
SESSION_TIMEOUT_MS = 6_000
# A member learns that the group rebalances (a gateway died) from a heartbeat's answer, so
# this bounds how long the survivors wait before they rejoin and take its partitions (it
# was 2 s, a third of the session timeout, in the failover measured by bench/failover.py).
HEARTBEAT_INTERVAL_MS = 500
# Records fetched ahead and not yet polled, per gateway (librdkafka's default, 64 MiB).
DEFAULT_PREFETCH_KBYTES = 65_536

Partitions = list[tuple[str, int]]  # (topic, partition)


class GroupListener(Protocol):
    """Told of the ingest group's decisions, on the ingest thread (group mode)."""

    def assigned(self, partitions: Partitions) -> None:
        """These partitions are this gateway's now (perhaps none, after a rebalance that gave
        it nothing more); must return at once (restore later)."""

    def revoked(self, partitions: Partitions) -> None:
        """These partitions go to another gateway: return once they are no longer served
        here and their lease changes are in Kafka (blocks the ingest thread meanwhile)."""

    def lost(self, partitions: Partitions) -> None:
        """The group took these away without a revocation (this member's session expired):
        stop serving them at once; another gateway may own them already."""


@dataclass(frozen=True, slots=True)
class _Assign:
    topic: str
    next_offsets: dict[int, int]  # partition -> first offset to read


@dataclass(frozen=True, slots=True)
class _Commit:
    offsets: tuple[tuple[str, int, int], ...]  # (topic, partition, offset)


@dataclass(frozen=True, slots=True)
class _Unassign:
    topic: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class _Wake:
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class _Subscribe:
    topics: tuple[str, ...]


_Command = _Assign | _Unassign | _Commit | _Subscribe | _Wake


class IngestConsumer:
    def __init__(
        self,
        bootstrap: str,
        loop: asyncio.AbstractEventLoop,
        on_batch: BatchHandler,
        applied: Mapping[tuple[str, int], int] | None = None,
        fetch_wait_ms: int = DEFAULT_FETCH_WAIT_MS,
        group_listener: GroupListener | None = None,
        in_flight: threading.BoundedSemaphore | None = None,
        prefetch_kbytes: int = DEFAULT_PREFETCH_KBYTES,
    ):
        """`applied`: (topic, partition) -> offset applied already, kept by the event loop; the
        records at or below it (the gateway's own, applied from their delivery reports) are
        dropped here without being decoded or handed over. `fetch_wait_ms`: see
        `DEFAULT_FETCH_WAIT_MS`. `group_listener`: group mode (see the module header).
        `in_flight` and `prefetch_kbytes`: shared bounds of several consumers (`IngestShards`)."""
        group_settings = (
            {
                "partition.assignment.strategy": "cooperative-sticky",
                "session.timeout.ms": SESSION_TIMEOUT_MS,
                "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
            }
            if group_listener is not None
            else {}
        )
        self._consumer = Consumer(
            {
                **group_settings,
                **connection(bootstrap),
                "group.id": INGEST_GROUP,
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": "earliest",
                # The gateway applies its own records from their delivery reports, so ingest
                # only has to be prompt for other producers' records: the broker answers a
                # fetch when 64 KiB are there or after `fetch_wait_ms`, instead of once per
                # produce request (a fetch per append cost the broker as much as the append).
                "fetch.wait.max.ms": fetch_wait_ms,
                "fetch.min.bytes": 64 * 1024,
                "queued.max.messages.kbytes": prefetch_kbytes,
                "logger": LIBRDKAFKA,
            }
        )
        self._applied: Mapping[tuple[str, int], int] = applied if applied is not None else {}
        self._loop = loop
        self._on_batch = on_batch
        self._commands: queue.SimpleQueue[_Command] = queue.SimpleQueue()
        self._group_listener = group_listener
        # Partitions in the consumer's assignment now (written on the ingest thread only).
        self._assigned: set[tuple[str, int]] = set()
        # Group mode: the partitions the group gives this consumer now (ingest thread only).
        # An assignment the event loop asked for is applied only while the partition is
        # still given: a revocation can come (inside a poll) between the loop's request and
        # the thread applying it, and must not be undone by it.
        self._given: set[tuple[str, int]] = set()
        # Manual assignment: the partitions paused because the gateway applied every record
        # of their log (its own, from their delivery reports), and when to look again.
        self._paused: set[tuple[str, int]] = set()
        self._log_ends: dict[tuple[str, int], int] = {}  # as read at the last look
        self._next_end_check = 0.0
        self._closing = False
        self._stopping = threading.Event()
        self._in_flight = in_flight or threading.BoundedSemaphore(MAX_BATCHES_IN_FLIGHT)
        self._thread = threading.Thread(target=self._run, name="kqs-ingest", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop reading. In group mode, release every partition first (the listener's work):
        closing leaves the group, whose revocation then only unassigns."""
        self._stopping.set()
        self._thread.join(timeout=10)
        self._closing = True
        self._consumer.close()

    def subscribe(self, topics: list[str]) -> None:
        """Group mode: the queue topics whose partitions the group shares out (all of them)."""
        self._commands.put(_Subscribe(tuple(sorted(topics))))

    def assign(self, topic: str, next_offsets: dict[int, int]) -> None:
        self._commands.put(_Assign(topic, next_offsets))

    def unassign(self, topic: str, partitions: int) -> None:
        self._commands.put(_Unassign(topic, tuple(range(partitions))))

    def wake(self, topic: str, partition: int) -> None:
        """Read the partition now: the gateway is waiting for records it did not produce
        (a delivery report showed a gap before its own record)."""
        self._commands.put(_Wake(topic, partition))

    def commit(self, offsets: list[tuple[str, int, int]]) -> None:
        """Commit (topic, partition, offset) triples as the ingest group's offsets.

        Informational for Kafka tools (lag = backlog): ingestion itself resumes from the
        lease store's applied offset, which is written atomically with the leases.
        """
        if offsets:
            self._commands.put(_Commit(tuple(offsets)))

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._step()

    def _step(self) -> None:
        """One round of the ingest thread: commands, the log ends when due, one poll."""
        self._apply_commands()
        if self._group_listener is None and time.monotonic() >= self._next_end_check:
            try:
                self._follow_ends()
            except Exception:  # the thread must survive transient client errors
                log.exception("following the log ends failed")
            self._next_end_check = time.monotonic() + LOG_END_CHECK_S
        try:
            messages = poll_batch(self._consumer, 0.05, max_messages=1000)
        except Exception:  # the thread must survive transient client errors
            log.exception("ingest consume failed")
            return
        batches: dict[tuple[str, int], Batch] = {}
        for msg in messages:
            error = msg.error()
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    log.warning("ingest fetch error", extra={"error": str(error)})
                continue
            topic, partition, offset = coordinates(msg)
            if offset <= self._applied.get((topic, partition), -1):
                continue
            offset, stored = decode_queue_record(msg)
            batches.setdefault((topic, partition), []).append((offset, stored))
        for (topic, partition), batch in batches.items():
            while not self._in_flight.acquire(timeout=0.1):
                if self._stopping.is_set():
                    return
            self._loop.call_soon_threadsafe(self._apply, topic, partition, batch)

    def _apply(self, topic: str, partition: int, batch: Batch) -> None:
        """Runs on the event loop: one batch into the lease store, then room for the next."""
        try:
            self._on_batch(topic, partition, batch)
        finally:
            self._in_flight.release()

    def _apply_commands(self) -> None:
        commands: list[_Command] = []
        while True:
            try:
                commands.append(self._commands.get_nowait())
            except queue.Empty:
                break
        # Assignments are applied together: a gateway starting with thousands of queues
        # makes one assign call and one metadata request, not one of each per queue.
        assigned = [
            TopicPartition(command.topic, p, offset if offset >= 0 else OFFSET_BEGINNING)
            for command in commands
            if isinstance(command, _Assign)
            for p, offset in command.next_offsets.items()
        ]
        subscriptions = [c for c in commands if isinstance(c, _Subscribe)]
        woken = {(c.topic, c.partition) for c in commands if isinstance(c, _Wake)}
        for key in woken:
            # Its end at the last look may predate the records it now waits for: the next
            # look pauses it again only once its whole log is applied.
            self._log_ends.pop(key, None)
        if woken & self._paused:
            self._resume(woken & self._paused)
        for command in commands:
            if isinstance(command, _Unassign):
                # An unassign of a topic assigned in this same round must come after it.
                if assigned:
                    self._incremental_assign(assigned)
                    assigned = []
                self._incremental_unassign(
                    [TopicPartition(command.topic, p) for p in command.partitions]
                )
            elif isinstance(command, _Commit):
                try:
                    self._consumer.commit(
                        offsets=[TopicPartition(t, p, o) for t, p, o in command.offsets],
                        asynchronous=True,
                    )
                except KafkaException as exc:
                    log.warning("offset commit failed", extra={"error": str(exc)})
        if assigned and self._group_listener is not None:
            assigned = [tp for tp in assigned if (tp.topic, tp.partition) in self._given]
        if assigned:
            self._incremental_assign(assigned)
        if subscriptions:
            self._subscribe(list(subscriptions[-1].topics))  # the latest list is the whole truth
        if any(isinstance(command, _Assign) for command in commands):
            self._learn_leaders()

    def _incremental_assign(self, partitions: list[TopicPartition]) -> None:
        """Assign the partitions at their offsets; one assigned already (taken, released and
        taken again before its release reached this thread) moves to the offset instead:
        librdkafka refuses to assign it twice, and its lease state may have been restored."""
        wanted = {(tp.topic, tp.partition): tp for tp in partitions}  # the latest per partition
        fresh = [tp for key, tp in wanted.items() if key not in self._assigned]
        again = [tp for key, tp in wanted.items() if key in self._assigned]
        if fresh:
            self._consumer.incremental_assign(fresh)
            self._assigned.update((tp.topic, tp.partition) for tp in fresh)
        # A seek does not resume a paused partition: the assignment's offset is to be read.
        self._resume_now({(tp.topic, tp.partition) for tp in again} & self._paused)
        for tp in again:
            try:
                self._consumer.seek(tp)
            except KafkaException as exc:
                log.warning(
                    "ingest could not move an assigned partition",
                    extra={"topic": tp.topic, "partition": tp.partition, "error": str(exc)},
                )

    def _incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        """Unassign those of `partitions` that are assigned (in group mode some may be given
        to this gateway and not assigned yet, or never)."""
        present = [tp for tp in partitions if (tp.topic, tp.partition) in self._assigned]
        self._consumer.incremental_unassign(present)
        self._assigned.difference_update((tp.topic, tp.partition) for tp in present)
        self._paused.difference_update((tp.topic, tp.partition) for tp in present)
        for tp in present:
            self._log_ends.pop((tp.topic, tp.partition), None)

    # -- manual assignment: not reading back what the gateway applied ------------------------

    def _follow_ends(self) -> None:
        """Pause the partitions the gateway keeps up with by itself; resume the others.

        The gateway applies the records it produced from their delivery reports, so reading
        them back only cost a fetch of every record (broker, librdkafka and this thread: ~20 µs
        of CPU per message sent, bench/results/archive/profile-journal.md, 2026-11-25 (763ae4a)). A paused partition is
        not fetched at all; its log end is read here once a second (one ListOffsets request for
        every partition). A partition keeps up when everything its log held at the previous
        look (or holds now) is applied; one where records the log held a second ago are still
        not applied — another producer's, or a record whose delivery report never came — is
        resumed where the applied run ends: such a record is read within about two seconds.
        """
        if not self._assigned:
            return
        try:
            ends = self._consumer.offsets_for_times(
                [
                    TopicPartition(topic, partition, OFFSET_END)
                    for topic, partition in self._assigned
                ],
                timeout=2,  # with the broker down, the commands must not wait long behind it
            )
        except KafkaException as exc:
            # Nothing known, nothing paused: read every partition, as without pausing (seen
            # for seconds after a broker restart, "Unknown partition").
            log.warning("reading the log ends failed", extra={"error": str(exc)})
            self._log_ends.clear()
            self._resume(set(self._paused))
            return
        caught_up: list[tuple[str, int]] = []
        behind: set[tuple[str, int]] = set()
        for end in ends:
            key = (end.topic, end.partition)
            if key not in self._assigned:
                continue
            if end.error is not None or end.offset < 0:
                self._log_ends.pop(key, None)
                behind.add(key)  # unknown: read it
                continue
            applied_end = self._applied.get(key, -1) + 1
            before = self._log_ends.get(key)
            self._log_ends[key] = end.offset
            # Under load the gateway's own records are always in flight, ahead of what it
            # applied: a partition keeps up when what its log held at the last look is applied.
            if end.offset <= applied_end or (before is not None and before <= applied_end):
                caught_up.append(key)
            else:
                behind.add(key)
        to_pause = [key for key in caught_up if key not in self._paused]
        if to_pause:
            self._consumer.pause([TopicPartition(t, p) for t, p in to_pause])
            self._paused.update(to_pause)
        self._resume(behind & self._paused)

    def _resume(self, keys: set[tuple[str, int]]) -> None:
        """Resume paused partitions after what the gateway applied: nothing is read twice."""
        for topic, partition in keys:
            try:
                self._consumer.seek(
                    TopicPartition(topic, partition, self._applied.get((topic, partition), -1) + 1)
                )
            except KafkaException as exc:
                log.warning(
                    "ingest could not move a paused partition",
                    extra={"topic": topic, "partition": partition, "error": str(exc)},
                )
        self._resume_now(keys)

    def _resume_now(self, keys: set[tuple[str, int]]) -> None:
        if not keys:
            return
        try:
            self._consumer.resume([TopicPartition(t, p) for t, p in keys])
        except KafkaException as exc:  # still paused: the next look tries again
            log.warning("ingest could not resume partitions", extra={"error": str(exc)})
            return
        self._paused.difference_update(keys)

    # -- group mode ------------------------------------------------------------------------

    def _subscribe(self, topics: list[str]) -> None:
        if not topics:
            self._consumer.unsubscribe()
            return
        self._consumer.subscribe(
            topics, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
        )

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Assign nothing now (an assignment made here would start at the committed offset):
        # the listener's event loop assigns each partition once restored (`assign`).
        consumer.incremental_assign([])
        self._given.update((tp.topic, tp.partition) for tp in partitions)
        # Told of an empty share too: the gateway is ready once it has its first one.
        if self._group_listener is not None and not self._closing:
            self._group_listener.assigned([(tp.topic, tp.partition) for tp in partitions])

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._given.difference_update((tp.topic, tp.partition) for tp in partitions)
        if partitions and self._group_listener is not None and not self._closing:
            try:
                self._group_listener.revoked([(tp.topic, tp.partition) for tp in partitions])
            except Exception:
                log.exception("releasing revoked partitions failed")
        self._incremental_unassign(partitions)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._given.difference_update((tp.topic, tp.partition) for tp in partitions)
        if partitions and self._group_listener is not None and not self._closing:
            try:
                self._group_listener.lost([(tp.topic, tp.partition) for tp in partitions])
            except Exception:
                log.exception("dropping lost partitions failed")
        self._incremental_unassign(partitions)

    def _learn_leaders(self) -> None:
        """Ask for metadata now, so fetching from newly assigned topics starts at once.

        librdkafka looks up the leaders of a newly assigned, not yet known topic only on its
        1 s topic scan: without this, the first send to a new queue waited up to a second
        for ingest. A metadata answer updates the partitions' leaders.
        """
        try:
            self._consumer.list_topics(timeout=5)
        except KafkaException as exc:
            log.warning("topic metadata lookup failed", extra={"error": str(exc)})


class Ingest(Protocol):
    """What the gateway asks of its ingest, one consumer or several (`IngestShards`)."""

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def assign(self, topic: str, next_offsets: dict[int, int]) -> None: ...

    def unassign(self, topic: str, partitions: int) -> None: ...

    def wake(self, topic: str, partition: int) -> None: ...

    def commit(self, offsets: list[tuple[str, int, int]]) -> None: ...


class IngestShards:
    """One gateway's queue topics read by several consumers, each topic always by the same one
    (CRC-32 of its name), each consumer made on first use (manual assignment only).

    librdkafka finds each topic of a fetch response by walking its client's topic list
    (`rd_kafka_topic_find_by_topic_id`), and every fetch names every assigned partition, so
    one consumer's fetch of N topics costs ~N². Seen with perf during seed 004's profile: at
    10,000 one-partition queues, 83 % of the samples of the consumer's broker thread, which
    took ~70 % of a core while the event loop took ~65 %. Over S consumers a fetch costs
    (N/S)²; fetches are driven by the bytes arriving, so their total rate stays about the
    same and the total cost falls by up to S². The bound on batches waiting for the event
    loop and the prefetch memory are shared, so they stay those of one consumer.

    Measured so far (`KQS_INGEST_SHARDS`, default 1): at 10,000 queues × 20 messages, 8
    consumers sent no faster than 1, with 1 GB more RSS and half the queue-creation rate —
    each consumer asks for every topic's metadata when topics are assigned
    (`_learn_leaders`). The gain is to be shown where perf saw the cost, at the seed's scale.
    """

    def __init__(
        self,
        make: Callable[[threading.BoundedSemaphore, int], IngestConsumer],
        shards: int,
    ) -> None:
        """`make(in_flight, prefetch_kbytes)`: a new consumer with those shared bounds."""
        self._make = make
        self._shards: list[IngestConsumer | None] = [None] * max(1, shards)
        self._in_flight = threading.BoundedSemaphore(MAX_BATCHES_IN_FLIGHT)
        self._prefetch_kbytes = max(1024, DEFAULT_PREFETCH_KBYTES // len(self._shards))
        self._started = False

    @property
    def consumers(self) -> int:
        """How many consumers exist now."""
        return sum(shard is not None for shard in self._shards)

    def start(self) -> None:
        self._started = True
        for shard in self._shards:
            if shard is not None:
                shard.start()

    def stop(self) -> None:
        existing = [shard for shard in self._shards if shard is not None]
        # Each stop joins its thread and closes its client: side by side, not one by one.
        stopping = [threading.Thread(target=shard.stop) for shard in existing]
        for thread in stopping:
            thread.start()
        for thread in stopping:
            thread.join()

    def assign(self, topic: str, next_offsets: dict[int, int]) -> None:
        self._shard(topic).assign(topic, next_offsets)

    def unassign(self, topic: str, partitions: int) -> None:
        self._shard(topic).unassign(topic, partitions)

    def wake(self, topic: str, partition: int) -> None:
        self._shard(topic).wake(topic, partition)

    def commit(self, offsets: list[tuple[str, int, int]]) -> None:
        by_shard: dict[int, list[tuple[str, int, int]]] = {}
        for entry in offsets:
            by_shard.setdefault(self._index(entry[0]), []).append(entry)
        for index, entries in by_shard.items():
            self._shard_at(index).commit(entries)

    def _index(self, topic: str) -> int:
        return zlib.crc32(topic.encode()) % len(self._shards)

    def _shard(self, topic: str) -> IngestConsumer:
        return self._shard_at(self._index(topic))

    def _shard_at(self, index: int) -> IngestConsumer:
        shard = self._shards[index]
        if shard is None:
            shard = self._shards[index] = self._make(self._in_flight, self._prefetch_kbytes)
            if self._started:
                shard.start()
        return shard
