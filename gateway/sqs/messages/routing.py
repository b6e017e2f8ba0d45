"""Which gateway serves a partition, and reaching it: waits for a partition on the move,
forwarding to its owner, and settling changes whose partition moved while they were
confirmed."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TypeVar

from gateway.cluster.forwarding import Forwarder, NotServedHere
from gateway.common.errors import (
    OwnerGone,
    ReceiptHandleIsInvalid,
    ServiceUnavailable,
    SqsError,
)
from gateway.common.results import Received
from gateway.sqs.messages.state import MessageState, Taken
from gateway.sqs.queues import (
    queue_arn,
)
from lease_store.errors import LeaseError
from lease_store.handles import ReceiptHandle
from lease_store.keys import PartitionKey
from topology.catalog import QueueRecord, partition_keys
from topology.changelog import Confirmation
from topology.owners import Owner
from topology.producer import ProduceFailed

log = logging.getLogger("kqs.messages")


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


# Longest a receive waits for its leases' changelog records (`_leases_confirmed`) before it
# answers those still served here anyway: Kafka is away then, and a receive must not hang for
# its delivery timeout. Longer than the 6 s membership timeout (and the 1 s after it that a
# stalled loop waits): a gateway cut off from Kafka has found its partitions lost by then, and
# answers none of their leases.
LEASE_CONFIRM_S = 10.0


Entry = TypeVar("Entry")


T = TypeVar("T")


class Routing(MessageState):
    """Which gateway serves each partition, and reaching the others."""

    def _served_partition(self, record: QueueRecord) -> int | None:
        """Where a standard queue's message goes: any partition (the producer's choice, None)
        with one gateway; with several, one this gateway serves, in turn, when it serves any.

        A standard queue promises no order, so the partition is free. Produced to a partition
        another gateway serves, a message is receivable only once that owner's ingest fetch
        returns (up to `KQS_INGEST_FETCH_WAIT_MS`); produced to one served here, it is applied
        from its delivery report. Measured with `kqs serve --workers 2` (bench/results/archive/profile-journal.md, 2026-11-25 (0b1e1e5)):
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

    async def _leases_confirmed(
        self, record: QueueRecord, received: list[Received], taken: list[Taken]
    ) -> list[Received]:
        """With several gateways, the leases of `received` once the changelog has them,
        but for those taken on a partition that moved meanwhile (`_still_served`).

        A lease answered before its changelog record is in Kafka is not a lease the next
        owner knows of: a gateway stopped (SIGSTOP, a stalled VM) with the answer on its way
        loses the partition, whose next owner restores it without the lease and delivers the
        message again while the first consumer still holds it (the crash suite's hand-over
        and stop cycles). Waiting for the record closes that: either it is in Kafka before
        the next owner restores (which happens only after this gateway lost its membership),
        or the partition moved before it was, and the lease is not answered. One gateway
        never waits: nobody else restores its partitions."""
        # The changelog's acknowledgement only: a lease needs no WAL sync (one gateway does
        # not sync it either; a crash then costs a redelivery, as at-least-once allows).
        confirmation = self._changelog.hand_over() if self._changelog is not None else None
        if confirmation is not None:
            with contextlib.suppress(Exception):  # answered by `_still_served` all the same
                acknowledged = asyncio.shield(asyncio.wrap_future(confirmation))
                await asyncio.wait_for(acknowledged, LEASE_CONFIRM_S)
        return await self._still_served(record, received, taken)

    async def _still_served(
        self, record: QueueRecord, received: list[Received], taken: list[Taken]
    ) -> list[Received]:
        """The leases of `received` (runs of `taken`) whose partition is still served in the
        spell they were taken in, once the receive has waited for something after taking them
        (a forwarded receive, a dead-letter move); `taken` is updated to match.

        A gateway stopped in that wait past its session lost those partitions: their next
        owner restored them without these leases (still in this gateway's changelog queue
        then), and may have delivered and deleted the messages since. Answering them on
        waking would deliver them after their deletion (the crash suite's SIGSTOP run, fixed
        in adb1e98). Those leased on a moved partition are not answered; they are not lost: the next
        owner serves them (and should the partition come back to this gateway's kept copy,
        the lease ends with its visibility timeout)."""
        await self.ownership.settled()  # at once unless the loop stood still
        kept: list[Received] = []
        still: list[Taken] = []
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
            still.append(Taken(run.pk, run.spell, len(kept)))
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
        `_owner_elsewhere`); for the FIFO sends (`gateway/sqs/fifo.py`)."""
        owner = self._owner_elsewhere(record, pk, forward)
        return None if owner is None else (owner, self.forwarder_for(owner))

    def forwarder_for(self, owner: Owner) -> Forwarder:
        if self._forwarder is None:
            raise ServiceUnavailable("No channel to the gateway serving this partition.")
        return self._forwarder

    @property
    def one_gateway(self) -> bool:
        """Whether this gateway serves every partition (the default, `EveryPartition`)."""
        return self._everything_here

    def publish_note(self, pk: PartitionKey, kind: bytes, name: bytes, raw: bytes | None) -> None:
        """A note of the lease store (`lease_store/notes.py`) to the changelog, following
        (with several gateways, acknowledged by the next `group_sync.durable()`)."""
        if self._changelog is not None:
            self._changelog.note(pk, kind, name, raw)

    def _changes(self) -> contextlib.AbstractContextManager[Confirmation]:
        """Collects the lease changelog records of a change, to await their acknowledgement."""
        if self._changelog is None:
            return contextlib.nullcontext(Confirmation())
        return self._changelog.capture()

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
