"""Which queue partitions this gateway serves, and who serves the others.

`EveryPartition` is the single-gateway mode: this gateway owns every partition. In group mode
(`GroupOwnership`, `KQS_PARTITION_OWNERSHIP=group`) the ingest group decides
(`topology/ingest.py`) and this module carries out its decisions on the event loop (see
docs/ARCHITECTURE.md, "Several gateways: partition ownership"):

    assigned ──▶ restoring ──(local copy current, or rebuilt from the changelog;
                              this gateway published in __kqs_owners)──▶ serving
    serving ──(revoked: stop serving, flush the changelog; or lost: stop serving, drop
               the changelog records not in Kafka yet)──▶ not here

A partition is served only once it is in `_serving`; everything else about it is asked of its
owner (`owner`), or finds nobody while the group rebalances.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable

from gateway.cluster.lease_recovery import rebuild_targets
from gateway.cluster.pause_watch import PauseWatch
from lease_store.clock import Clock
from lease_store.keys import PartitionKey
from lease_store.store import LeaseStore
from topology.catalog import QueueLookup, QueueRecord, partition_keys
from topology.changelog import epoch_of
from topology.follower_producer import FollowerProducer
from topology.ingest import IngestConsumer, Partitions
from topology.owners import Owner, OwnersDirectory
from topology.rebuild import rebuild_leases

log = logging.getLogger("kqs.ownership")

# Longest wait for the changelog to reach Kafka before a revoked partition is let go.
RELEASE_FLUSH_S = 10.0
# Longest a revocation may block the ingest thread.
RELEASE_TIMEOUT_S = 30.0
# Pause before trying again to take partitions whose restore failed (Kafka unavailable).
RETRY_TAKE_S = 1.0


class EveryPartition:
    """One gateway: every partition of every queue is served here."""

    def serves(self, topic: str, partition: int) -> bool:
        return True

    def serving_since(self, topic: str, partition: int) -> int | None:
        return 0

    def owner(self, topic: str, partition: int) -> Owner | None:
        return None

    async def until_owned(self, record: QueueRecord, timeout_s: float) -> None:
        return None

    async def until_served(self, topic: str, partitions: Iterable[int], timeout_s: float) -> bool:
        return True

    async def until_moved(
        self, topic: str, partition: int, away_from: Owner | None, timeout_s: float
    ) -> bool:
        return True

    async def settled(self) -> None:
        return None  # nobody else can take a partition


class GroupOwnership:
    def __init__(
        self,
        me: Owner,
        directory: OwnersDirectory,
        registry: QueueLookup,
        leases: LeaseStore,
        follower: FollowerProducer,
        bootstrap: str,
        clock: Clock,
        on_served: Callable[[QueueRecord], None],
        pause_watch: PauseWatch | None = None,
        write_as: Callable[[PartitionKey, int], None] = lambda pk, epoch: None,
    ) -> None:
        """`on_served`: told when partitions of a queue start being served here (to wake
        the long polls parked on it). `write_as`: told the owner epoch a partition's lease
        changes are published under from now on (`LeaseChangelog.write_as`), before it is
        served."""
        self.me = me
        self._directory = directory
        self._registry = registry
        self._leases = leases
        self._follower = follower
        self._bootstrap = bootstrap
        self._clock = clock
        self._on_served = on_served
        self._write_as = write_as
        self._pause_watch = pause_watch or PauseWatch()
        # Each partition served here, by the number of the spell serving it (`serving_since`).
        self._serving: dict[tuple[str, int], int] = {}
        self._spells = 0
        # Assigned by the group, served or not yet, each by the number of the take that has
        # it: a partition revoked and given back meanwhile belongs to the later take, whose
        # look at the directory is the one that counts (`_restore_and_serve`).
        self._assigned: dict[tuple[str, int], int] = {}
        self._takes = 0
        self._ingest: IngestConsumer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        # Directory records on their way (`_serve`): a release waits for them, so that the
        # next owner's record, written after the group hands it the partition, comes later
        # in `__kqs_owners` than this gateway's and wins.
        self._publishing: set[asyncio.Future[list[int]]] = set()
        self._directory_moved = asyncio.Event()
        self._subscription_due = False
        # One restore at a time: a partition revoked mid-restore and assigned again must not
        # be rebuilt twice at once.
        self._restoring = asyncio.Lock()
        # Whether this gateway has joined the ingest group: had its first assignment (perhaps
        # empty) and serves what it gave. Until then `/health` says it is not ready. (With
        # cooperative rebalancing a joiner's first assignment is often empty: its share
        # follows in a second round, once the others have released it.)
        self._settled = False

    def start(self, ingest: IngestConsumer, loop: asyncio.AbstractEventLoop) -> None:
        self._ingest = ingest
        self._loop = loop
        self._pause_watch.start(loop)

    # -- what MessageService asks ----------------------------------------------------------

    def serves(self, topic: str, partition: int) -> bool:
        return (topic, partition) in self._serving

    def serving_since(self, topic: str, partition: int) -> int | None:
        """Which spell of serving the partition this is (None: not served here): a change
        made in one spell and confirmed in another, or after it, must not be answered as
        done, since the partition's next owner may have restored it without that change."""
        return self._serving.get((topic, partition))

    async def settled(self) -> None:
        """Before a change acts and before it answers: if this gateway stood still long
        enough to have lost its partitions, wait for the group's word (`PauseWatch`)."""
        await self._pause_watch.settled()

    @property
    def ready(self) -> bool:
        """Joined the ingest group and serving what it was given, or nothing to share yet."""
        return self._settled or not self._registry.all_active()

    @property
    def served(self) -> int:
        """How many queue partitions are served here now (`kqs_partitions_served`)."""
        return len(self._serving)

    def owner(self, topic: str, partition: int) -> Owner | None:
        """The gateway serving a partition that is not served here, if one is known."""
        owner = self._directory.owner(topic, partition)
        if owner is None or owner.gateway == self.me.gateway or not owner.endpoint:
            return None  # nobody, or a retired owner (gateway/cluster/hand_over.py): none serves it
        return owner

    async def until_owned(self, record: QueueRecord, timeout_s: float) -> None:
        """Wait (at most `timeout_s`) until every partition of a new queue has an owner, so
        that a send right after CreateQueue is applied by one."""
        owned = await self._until(
            lambda: all(
                self.serves(record.topic, pk.partition)
                or self._directory.owner(record.topic, pk.partition) is not None
                for pk in partition_keys(record)
            ),
            timeout_s,
        )
        if not owned:
            log.warning("new queue not owned in time", extra={"queue": record.key})

    async def until_served(self, topic: str, partitions: Iterable[int], timeout_s: float) -> bool:
        """Wait (at most `timeout_s`) while any of `partitions` is served by no gateway (taken
        from one, not yet served by the next: a rebalance), so that a request about it
        reaches its next owner instead of failing; False if one is still unserved."""
        wanted = list(partitions)
        return await self._until(
            lambda: all(self.serves(topic, p) or self.owner(topic, p) is not None for p in wanted),
            timeout_s,
        )

    async def until_moved(
        self, topic: str, partition: int, away_from: Owner | None, timeout_s: float
    ) -> bool:
        """Wait (at most `timeout_s`) until the partition is served here or the directory
        names a gateway other than `away_from` (None: this one), which let it go or cannot be
        reached, or names it again (a restart: the same id and endpoint, serving once more);
        False if nothing of that happened.

        The directory goes on naming a gateway that released (or died with) a partition
        until the next owner has restored it and published itself."""
        published = self._directory.version(topic, partition)

        def moved() -> bool:
            if self.serves(topic, partition):
                return True
            owner = self.owner(topic, partition)
            if owner is None:
                return False
            return owner != away_from or self._directory.version(topic, partition) > published

        return await self._until(moved, timeout_s)

    async def _until(self, condition: Callable[[], bool], timeout_s: float) -> bool:
        """Whether `condition` held within `timeout_s`, checked at each directory change
        (and every 50 ms: serving here does not always go through the directory first)."""
        deadline = time.monotonic() + timeout_s
        while not condition():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self._directory_moved.clear()
            try:
                await asyncio.wait_for(self._directory_moved.wait(), min(remaining, 0.05))
            except TimeoutError:
                pass
        return True

    # -- the catalog and the directory -----------------------------------------------------

    def queues_changed(self) -> None:
        """A queue was created or deleted: subscribe the ingest group to the new list, once
        per event-loop turn however many queues changed (thousands at start-up)."""
        if self._subscription_due or self._loop is None:
            return
        self._subscription_due = True
        self._loop.call_soon(self._subscribe)

    def _subscribe(self) -> None:
        self._subscription_due = False
        if self._ingest is not None:
            self._ingest.subscribe([r.topic for r in self._registry.all_active()])

    def directory_changed(self) -> None:
        self._directory_moved.set()

    # -- the ingest group's decisions (GroupListener, on the ingest thread) ------------------

    def assigned(self, partitions: Partitions) -> None:
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._take, partitions)

    def revoked(self, partitions: Partitions) -> None:
        assert self._loop is not None
        future = asyncio.run_coroutine_threadsafe(self._release(partitions), self._loop)
        future.result(timeout=RELEASE_TIMEOUT_S)

    def lost(self, partitions: Partitions) -> None:
        assert self._loop is not None
        future = asyncio.run_coroutine_threadsafe(self._let_go(partitions), self._loop)
        future.result(timeout=RELEASE_TIMEOUT_S)

    # -- on the event loop -----------------------------------------------------------------

    def _take(self, partitions: Partitions) -> None:
        if not partitions:
            # Nothing (yet): the first round of a join, or more gateways than partitions.
            self._settled = True
            return
        self._takes += 1
        self._assigned.update(dict.fromkeys(partitions, self._takes))
        task = asyncio.create_task(self._restore_and_serve(partitions, self._takes))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _restore_and_serve(self, partitions: Partitions, take: int) -> None:
        """Take `take`: restore the partitions whose copy here is stale, then serve them all
        (those still this take's: neither revoked since, nor given back to a later take)."""
        began = time.monotonic()
        while True:
            partitions = [p for p in partitions if self._assigned.get(p) == take]
            try:
                async with self._restoring:
                    await self._directory_caught_up()
                    current, stale = self._sort(partitions)
                    if stale:
                        await self._restore(stale)
                    served = await self._serve(current + stale, take)
                self._settled = True
                break
            except Exception:
                # Kafka unavailable, most likely: the group still gives them to this gateway.
                log.exception("partitions not taken yet", extra={"partitions": len(partitions)})
                await asyncio.sleep(RETRY_TAKE_S)
        log.info(
            "partitions served",
            extra={
                "partitions": len(served),
                "restored": len(served.intersection(stale)),
                "elapsed_s": round(time.monotonic() - began, 3),
            },
        )

    async def _directory_caught_up(self) -> None:
        """Read `__kqs_owners` to its end: a gateway that served a partition published itself
        before it served it, so its record is below the end now."""
        end = await self._directory.end_offset()
        while self._directory.position < end:
            self._directory_moved.clear()
            try:
                await asyncio.wait_for(self._directory_moved.wait(), 1.0)
            except TimeoutError:
                pass

    def _sort(self, partitions: Partitions) -> tuple[Partitions, Partitions]:
        """(partitions whose local copy is current, partitions to restore): the copy is
        current when this gateway served the partition last, or nobody ever served it."""
        current: Partitions = []
        stale: Partitions = []
        for topic, partition in partitions:
            last = self._directory.owner(topic, partition)
            if last is None or last.gateway == self.me.gateway:
                current.append((topic, partition))
            else:
                stale.append((topic, partition))
        return current, stale

    async def _restore(self, partitions: Partitions) -> None:
        """Rebuild the partitions' lease state from `__kqs_leases` and their queue topics."""
        records: dict[str, QueueRecord] = {}
        wanted: set[tuple[str, int]] = set()
        for topic, partition in partitions:
            record = self._registry.by_topic(topic)
            if record is None:
                continue  # deleted meanwhile
            records[topic] = record
            wanted.add((topic, partition))
        targets = [
            t for t in rebuild_targets(records.values()) if (t.topic, t.pk.partition) in wanted
        ]
        # Said when it begins, too: the end's log line alone cannot tell a restore that hung
        # from one that began late (say, for partitions a leaving gateway handed over).
        log.info("restoring partitions from the changelog", extra={"partitions": len(targets)})
        for target in targets:
            self._leases.drop_partition(target.pk, offsets=False)
        stop = threading.Event()
        rebuilding = asyncio.get_running_loop().run_in_executor(
            None,
            functools.partial(
                rebuild_leases,
                self._bootstrap,
                self._leases.kv,
                targets,
                self._clock.now_ms(),
                stop=stop,
            ),
        )
        try:
            stats = await asyncio.shield(rebuilding)
        except asyncio.CancelledError:
            # Cancelled (a shutdown): the thread writes into the lease store, which is closed
            # next, so it is stopped and waited for. What it wrote is incomplete, but the
            # partitions stay stale (this gateway never published itself for them), so the
            # next take restores them again from the start.
            stop.set()
            # Whatever it ended with (stopped, or a Kafka error meanwhile), the shutdown goes
            # on: this task must end cancelled, not be retried as a failed take.
            with contextlib.suppress(Exception):
                await rebuilding
            log.info("restore stopped before its end", extra={"partitions": len(targets)})
            raise
        finally:
            for target in targets:
                self._leases.forget_cached(target.pk)
        log.info(
            "partitions restored from the changelog",
            extra={"partitions": len(targets), "live_messages": stats.live_messages},
        )

    async def _serve(self, partitions: Partitions, take: int) -> set[tuple[str, int]]:
        """Publish this gateway as the partitions' owner, then serve them; returns those
        served.

        Only those still `take`'s: one revoked while it restored, served by another gateway
        and given back (a later take, waiting for this one) would otherwise be served from
        the copy this take sorted as current or restored, without what the other gateway
        did meanwhile (a message it deleted, delivered again). The later take sorts it again.
        """
        assert self._ingest is not None
        taken = [
            (topic, partition)
            for topic, partition in partitions
            if self._registry.by_topic(topic) is not None
            and self._assigned.get((topic, partition)) == take
        ]  # not deleted, nor revoked while restoring
        publishing = asyncio.gather(*(self._directory.publish(t, p, self.me) for t, p in taken))
        self._publishing.add(publishing)
        try:
            published = dict(zip(taken, await publishing, strict=True))
        finally:
            self._publishing.discard(publishing)
        by_topic: dict[str, dict[int, int]] = {}
        served: dict[str, QueueRecord] = {}
        for topic, partition in taken:
            record = self._registry.by_topic(topic)
            if record is None or self._assigned.get((topic, partition)) != take:
                continue
            pk = partition_keys(record)[partition]
            if (topic, partition) not in self._serving:
                self._spells += 1
                self._serving[(topic, partition)] = self._spells
                # This take's directory record outranks every former owner's: their records
                # still on their way (woken from a stall) lose to this gateway's.
                self._write_as(pk, epoch_of(published[(topic, partition)]))
            by_topic.setdefault(topic, {})[partition] = self._leases.applied_offset(pk) + 1
            served[topic] = record
        for topic, next_offsets in by_topic.items():
            self._ingest.assign(topic, next_offsets)
        for record in served.values():
            self._on_served(record)
        return {(topic, p) for topic, offsets in by_topic.items() for p in offsets}

    async def _release(self, partitions: Partitions) -> None:
        """Stop serving, then make sure every lease change of the partitions is in Kafka,
        and so is any directory record naming this gateway for them."""
        self._drop(partitions)
        if self._publishing:
            # A revocation can arrive while `_serve` publishes: that record must not reach
            # the directory after the next owner's, or everyone forwards to this gateway.
            await asyncio.gather(*self._publishing, return_exceptions=True)
        loop = asyncio.get_running_loop()
        remaining = await loop.run_in_executor(None, self._follower.flush, RELEASE_FLUSH_S)
        if remaining:
            self._drop_unsent(
                "changelog not flushed before partitions were released", partitions, remaining
            )
        log.info("partitions released", extra={"partitions": len(partitions)})

    async def _let_go(self, partitions: Partitions) -> None:
        """The group gave the partitions to others without asking (this gateway's session
        expired: its broker or its network was away): stop serving them, then drop the
        changelog records Kafka has not taken yet (see `FollowerProducer.drop_unsent`)."""
        self._drop(partitions)
        self._drop_unsent("partitions lost", partitions)

    def _drop_unsent(self, why: str, partitions: Partitions, unflushed: int | None = None) -> None:
        noted = self._follower.drop_unsent()
        log.warning(
            "changelog records not in Kafka yet dropped",
            extra={
                "why": why,
                "partitions": len(partitions),
                "not_handed_over": noted,
                "unflushed": unflushed,
            },
        )

    def _drop(self, partitions: Partitions) -> None:
        for partition in partitions:
            self._assigned.pop(partition, None)
            self._serving.pop(partition, None)

    async def release_all(self) -> None:
        """At shutdown, before the ingest consumer leaves the group."""
        self._pause_watch.stop()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            # A cancelled restore ends once its rebuild thread stops writing (`_restore`).
            _, running = await asyncio.wait(tasks, timeout=RELEASE_TIMEOUT_S)
            if running:
                log.warning("restores still running at shutdown", extra={"tasks": len(running)})
        await self._release(sorted(self._assigned.keys() | self._serving.keys()))
