"""DeleteMessage and ChangeMessageVisibility, single and batched, here or at the owner."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Sequence

from gateway.cluster.forwarding import NotServedHere
from gateway.common.errors import (
    InvalidParameterValue,
    OwnerGone,
    SqsError,
)
from gateway.sqs.messages.receive import Receiving
from gateway.sqs.queues import (
    is_fifo,
)
from lease_store.errors import LeaseError
from lease_store.handles import ReceiptHandle
from lease_store.keys import PartitionKey
from topology.catalog import QueueRecord

log = logging.getLogger("kqs.messages")


class Changing(Receiving):
    """Deletes and visibility changes, here or at the owner, confirmed before answered."""

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
                    self._check_fifo_handle_current(pk, handle, receipt_handle)
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
        # empty queue it would poll it sooner, for nothing (bench/results/archive/profile-journal.md,
        # 2026-11-29 (730104f)).
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
                    self._check_fifo_handle_current(pk, handle, receipt_handle)
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

    def _check_fifo_handle_current(
        self, pk: PartitionKey, handle: ReceiptHandle, receipt_handle: str
    ) -> None:
        """On a FIFO queue only the current lease's handle deletes its message or changes its
        visibility.

        A handle whose lease ended (the message visible again, or received again since) is
        InvalidParameterValue "... Reason: The receipt handle has expired." (AWS's
        troubleshooting guide; AWS SDK maintainers: "FIFO queues will reject DeleteMessage
        requests when the receipt handle is expired"; LocalStack checked it against AWS), so
        a consumer that was too slow cannot touch a message another consumer now holds. A
        message already gone is left to the usual answers (a delete succeeds again).
        """
        fact = self._leases.fact(pk, handle.offset)
        if fact is None:
            return
        if fact.receive_count != handle.epoch or fact.visible_at_ms <= self._clock.now_ms():
            raise InvalidParameterValue(
                f"Value {receipt_handle} for parameter ReceiptHandle is invalid. Reason: The "
                "receipt handle has expired."
            )
