"""FIFO queues at the gateway: the send rules, and deduplication before a send.

A FIFO message needs a MessageGroupId and a MessageDeduplicationId (or the queue's
ContentBasedDeduplication, the SHA-256 of the body); both are 1-128 printable ASCII
characters; a per-message DelaySeconds is refused (the queue's delay applies). Texts are
AWS's, as AWS users quote them and as moto and LocalStack answer.

Deduplication has two guards. Before producing, the sender looks up the scope key in the lease
store's window (`lease_store/fifo.py`) and answers a duplicate with the original's MessageId
and SequenceNumber; concurrent sends of one key on this gateway wait for the first. The lease
store's ingest then refuses any duplicate that reached the log anyway, and the sender, which
answers only after ingest, reports the original then too. With several gateways, an id of
scope `queue` is first claimed on the gateway serving its claim partition
(`lease_store/fifo_claims.py`), which then sends the message it admits.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from gateway.cluster.forwarding import decode_received, encode_received
from gateway.common.errors import (
    InvalidParameterValue,
    MissingParameter,
    OwnerGone,
    ServiceUnavailable,
)
from gateway.common.results import FifoSent, Received
from lease_store import fifo
from lease_store.clock import Clock
from lease_store.errors import LeaseError
from lease_store.fifo_claims import Claim, claim_partition
from lease_store.keys import PartitionKey
from lease_store.notes import KIND_ATTEMPT, KIND_CLAIM, encode_note
from lease_store.records import StoredMessage
from lease_store.store import LeaseStore
from topology.catalog import QueueRecord, group_partition, partition_keys
from topology.owners import Owner

if TYPE_CHECKING:
    from gateway.cluster.forwarding import Forwarder
    from gateway.sqs.messages.service import MessageService

# Deduplication entries are pruned this long after their window ended (see `prune`).
PRUNE_MARGIN_MS = 10 * 60 * 1000
# ReceiveRequestAttemptId: a retried receive within this long gets the same messages back.
ATTEMPT_WINDOW_MS = fifo.DEDUPLICATION_WINDOW_MS

_ID = re.compile(r"^[!-~]{1,128}$")  # alphanumeric and punctuation, 1 to 128


def _invalid_id(name: str, value: str) -> InvalidParameterValue:
    return InvalidParameterValue(
        f"Value {value} for parameter {name} is invalid. Reason: {name} can only include "
        "alphanumeric and punctuation characters. 1 to 128 in length."
    )


def _not_for_this_queue_type(name: str, value: object) -> InvalidParameterValue:
    # AWS's text, its grammar included (as AWS users quote it).
    return InvalidParameterValue(
        f"Value {value} for parameter {name} is invalid. Reason: The request include "
        "parameter that is not valid for this queue type."
    )


def check_attempt_id(attempt_id: str | None) -> None:
    """ReceiveRequestAttemptId takes the characters and length of the other FIFO ids."""
    if attempt_id is not None and not _ID.match(attempt_id):
        raise _invalid_id("ReceiveRequestAttemptId", attempt_id)


def check_standard_send(group_id: str | None, deduplication_id: str | None) -> None:
    """A standard queue takes no MessageDeduplicationId; a MessageGroupId (fair queues) follows
    the FIFO rules for it."""
    if deduplication_id is not None:
        raise _not_for_this_queue_type("MessageDeduplicationId", deduplication_id)
    if group_id is not None and not _ID.match(group_id):
        raise _invalid_id("MessageGroupId", group_id)


def check_fifo_send(
    record: QueueRecord,
    body: bytes,
    group_id: str | None,
    deduplication_id: str | None,
    delay_s: int | None,
) -> tuple[str, str, str]:
    """The rules of a send to a FIFO queue; returns (group, deduplication id, scope)."""
    if delay_s:
        raise _not_for_this_queue_type("DelaySeconds", delay_s)
    if group_id is None:
        raise MissingParameter.named("MessageGroupId")
    if not _ID.match(group_id):
        raise _invalid_id("MessageGroupId", group_id)
    if deduplication_id is None:
        if record.attributes.get("ContentBasedDeduplication") != "true":
            raise _missing_deduplication_id()
        deduplication_id = fifo.content_deduplication_id(body)
    elif not _ID.match(deduplication_id):
        raise _invalid_id("MessageDeduplicationId", deduplication_id)
    scope = record.attributes.get("DeduplicationScope", fifo.SCOPE_QUEUE)
    return group_id, deduplication_id, scope


def _missing_deduplication_id() -> InvalidParameterValue:
    return InvalidParameterValue(
        "The queue should either have ContentBasedDeduplication enabled or "
        "MessageDeduplicationId provided explicitly"
    )


def check_fifo_batch(record: QueueRecord, entries: Iterable[tuple[str | None, str | None]]) -> None:
    """A SendMessageBatch to a FIFO queue fails whole when an entry, given as (group,
    deduplication id), lacks the deduplication id the queue needs or its group (checked in
    that order, entry by entry). The texts and the code (InvalidParameterValue for both, not
    MissingParameter as a single send answers) are AWS's, as LocalStack's AWS-validated
    tests `test_send_batch_missing_*_for_fifo_queue` recorded them."""
    content_based = record.attributes.get("ContentBasedDeduplication") == "true"
    for group_id, deduplication_id in entries:
        if deduplication_id is None and not content_based:
            raise _missing_deduplication_id()
        if group_id is None:
            raise InvalidParameterValue("The request must contain the parameter MessageGroupId.")


class FifoService:
    """Sends to FIFO queues, deduplicated (see the module header), and the receive attempts
    a retried ReceiveMessage answers from."""

    def __init__(self, messages: MessageService, leases: LeaseStore, clock: Clock) -> None:
        self._messages = messages
        self._leases = leases
        self._clock = clock
        # (queue topic, scope key, a claim) -> the outcome of the send or claim in progress
        # (None: it failed)
        self._pending: dict[tuple[str, bytes, bool], asyncio.Future[FifoSent | None]] = {}
        # What a receive with a ReceiveRequestAttemptId got is a note of the queue's partition
        # 0 on its attempt home (see `receive`): in its lease store and changelog, so a retry
        # finds it after a restart of the home or on the next gateway serving partition 0.

    async def send(
        self,
        record: QueueRecord,
        message: StoredMessage,
        forward: bool = True,
        claimed: bool = False,
    ) -> FifoSent:
        """Send unless a duplicate. With several gateways, a send of scope `queue` is first
        claimed on the gateway serving its id's claim partition (`fifo_claims.py`), which
        then sends it `claimed`; every send is made on the gateway serving the message
        group's partition, whose lease store has the window (a forwarded send: `forward`
        False, never forwarded again by the same step).

        A send whose owner was gone (`OwnerGone`) is sent once more where the partition's
        next owner serves it. Safe even if the gone owner had produced it: the retry has the
        same deduplication id, the next owner's window comes from the partition's log (its
        restore replays it) and its claims from the changelog, and its ingest refuses a
        duplicate that reached the log anyway, answering the original's MessageId, as for
        the client's own retry."""
        try:
            return await self._send_once(record, message, forward, claimed)
        except OwnerGone as gone:
            target = self._target(record, message, claimed)
            if not await self._messages.until_moved(record, target.partition, gone.owner):
                raise
            return await self._send_once(record, message, forward, claimed)

    def _claims(self, message: StoredMessage, claimed: bool) -> bool:
        """Whether this send is to be claimed first (scope `queue`, several gateways)."""
        return (
            not claimed
            and message.deduplication_scope == fifo.SCOPE_QUEUE
            and not self._messages.one_gateway
        )

    def _target(self, record: QueueRecord, message: StoredMessage, claimed: bool) -> PartitionKey:
        """The partition of the message's group, or of its claim (`_claims`)."""
        partitions = partition_keys(record)
        if self._claims(message, claimed):
            assert message.deduplication_id is not None
            return partitions[claim_partition(message.deduplication_id, len(partitions))]
        return partitions[group_partition(message.message_group_id or "", len(partitions))]

    async def _send_once(
        self, record: QueueRecord, message: StoredMessage, forward: bool, claimed: bool
    ) -> FifoSent:
        assert message.deduplication_id is not None and message.deduplication_scope is not None
        target = self._target(record, message, claimed)
        if forward:  # a forwarded send: the sender waited
            await self._messages.until_served(record, [target])
        elsewhere = self._messages.owner_elsewhere(record, target, forward)
        if elsewhere is not None:
            owner, forwarder = elsewhere
            return await forwarder.fifo_send(owner, record.topic, message, claimed)
        key = fifo.scope_key(
            message.deduplication_id, message.deduplication_scope, message.message_group_id
        )
        claiming = self._claims(message, claimed)
        # Claims and sends of one key wait for each other apart: a claim's own send, made
        # here when its group partition is served here too, must not wait for the claim.
        pending_key = (record.topic, key, claiming)
        while (pending := self._pending.get(pending_key)) is not None:
            first = await asyncio.shield(pending)
            if first is not None:
                return FifoSent(first.message_id, first.sequence_number, duplicate=True)
        future: asyncio.Future[FifoSent | None] = asyncio.get_running_loop().create_future()
        self._pending[pending_key] = future
        outcome: FifoSent | None = None
        try:
            if claiming:
                outcome = await self._claim_and_send(record, target, key, message)
            else:
                outcome = await self._send_here(record, key, message, claimed)
            return outcome
        finally:
            del self._pending[pending_key]
            future.set_result(outcome)  # None when the send failed: a waiter sends itself

    async def _claim_and_send(
        self, record: QueueRecord, claim_pk: PartitionKey, key: bytes, message: StoredMessage
    ) -> FifoSent:
        """On the gateway serving the claim partition: the claim's decision
        (`lease_store/fifo_claims.py`), then the send to the group partition it admits."""
        now_ms = self._clock.now_ms()
        noted = self._leases.note(claim_pk, KIND_CLAIM, key, now_ms, fifo.DEDUPLICATION_WINDOW_MS)
        claim = Claim.decode(noted[1]) if noted is not None else None
        if claim is not None and claim.confirmed:
            return FifoSent(claim.message_id, fifo.sequence_number(claim.offset), True)
        if claim is not None and not claim.same_message(message):
            # The claimed message's send failed or its gateway stopped before it was
            # answered: a duplicate of it if it reached its partition, else only a send of
            # that message again (its client's retry) settles it.
            entry = await self._claimed_entry(record, claim, key)
            if entry is None or entry.message_id != claim.message_id:
                raise ServiceUnavailable(
                    "A message with this MessageDeduplicationId is being sent; try again."
                )
            self._confirm(record, claim_pk, key, claim.with_offset(entry.offset))
            return FifoSent(entry.message_id, fifo.sequence_number(entry.offset), True)
        if noted is None or claim is None:
            claim = Claim.of(message, self._target(record, message, claimed=True).partition)
            raw = self._leases.write_note(
                claim_pk, KIND_CLAIM, key, now_ms, claim.encode(), sync=False
            )
        else:
            # Published again: the first try may have failed before the changelog had it.
            raw = encode_note(*noted)
        self._messages.publish_note(claim_pk, KIND_CLAIM, key, raw)
        # Durable before the message is sent: the WAL synced and, with several gateways,
        # the changelog's acknowledgement (one of each for the writes of this loop turn).
        await self._messages.group_sync.durable()
        sent = await self.send(record, claim.resend(message), claimed=True)
        confirmed = replace(claim, message_id=sent.message_id)
        self._confirm(record, claim_pk, key, confirmed.with_offset(int(sent.sequence_number)))
        return sent

    def _confirm(
        self, record: QueueRecord, claim_pk: PartitionKey, key: bytes, claim: Claim
    ) -> None:
        """A claim's offset, once known. Following, not awaited: a next owner that misses it
        finds the claim unconfirmed, which the claimed message settles (fifo_claims.py)."""
        if self._messages.ownership.serves(record.topic, claim_pk.partition):
            rewritten = self._leases.rewrite_note(claim_pk, KIND_CLAIM, key, claim.encode())
            if rewritten is not None:
                self._messages.publish_note(claim_pk, KIND_CLAIM, key, rewritten)

    async def _claimed_entry(
        self, record: QueueRecord, claim: Claim, key: bytes
    ) -> fifo.DedupEntry | None:
        """The window entry of `key` in the claimed message's partition, from its owner."""
        elsewhere = self._messages.owner_elsewhere(
            record, partition_keys(record)[claim.partition], True
        )
        if elsewhere is None:
            return self.entry_here(record, claim.partition, key)
        owner, forwarder = elsewhere
        return await forwarder.fifo_entry(owner, record.topic, claim.partition, key)

    def entry_here(self, record: QueueRecord, partition: int, key: bytes) -> fifo.DedupEntry | None:
        """The window entry of `key` in a partition served here (`NotServedHere` if not)."""
        (served,) = self._messages.served_here(record, [partition])
        pk = partition_keys(record)[served]
        return self._leases.deduplication_entry(pk, key, self._clock.now_ms())

    async def _send_here(
        self, record: QueueRecord, key: bytes, message: StoredMessage, claimed: bool
    ) -> FifoSent:
        """On the gateway serving the group partition: the window, then the send."""
        keys = partition_keys(record)
        if claimed or message.deduplication_scope == fifo.SCOPE_MESSAGE_GROUP:
            # A group lives on one partition, and its duplicates with it; a claimed message
            # was decided by its claim, and only copies of it may be in its partition.
            keys = (keys[group_partition(message.message_group_id or "", len(keys))],)
        now_ms = self._clock.now_ms()
        for pk in keys:
            entry = self._leases.deduplication_entry(pk, key, now_ms)
            if entry is not None:
                return FifoSent(entry.message_id, fifo.sequence_number(entry.offset), True)
        delivered = await self._messages.send(record, message)
        pk = partition_keys(record)[delivered.partition]
        entry = self._leases.deduplication_entry(pk, key, self._clock.now_ms())
        if entry is not None and entry.offset != delivered.offset:
            # Ingest found an original this gateway did not know of: the record was dropped.
            return FifoSent(entry.message_id, fifo.sequence_number(entry.offset), True)
        return FifoSent(message.message_id, fifo.sequence_number(delivered.offset), False)

    def prune(self, record: QueueRecord) -> None:
        """Forget the queue's deduplication entries, claims and receive attempts older than
        their window and its released group locks (a periodic sweep; none is needed, all
        would pile up)."""
        now_ms = self._clock.now_ms()
        for pk in partition_keys(record):
            if not self._messages.ownership.serves(record.topic, pk.partition):
                continue  # another gateway's to prune
            # Kept PRUNE_MARGIN_MS longer than the window: ingest that lags behind the log
            # (catching up after an outage) must still find the entry a duplicate follows.
            self._leases.prune_deduplication(pk, now_ms - PRUNE_MARGIN_MS)
            self._leases.prune_group_locks(pk, now_ms)
            # Claims and receive attempts are read only within their window.
            for kind in (KIND_CLAIM, KIND_ATTEMPT):
                before_ms = now_ms - fifo.DEDUPLICATION_WINDOW_MS
                for name in self._leases.prune_notes(pk, kind, before_ms):
                    self._messages.publish_note(pk, kind, name, None)

    async def receive(
        self,
        record: QueueRecord,
        attempt_id: str,
        max_messages: int,
        visibility_s: int,
        wait_s: int,
        forward: bool = True,
    ) -> list[Received]:
        """A FIFO receive that names a ReceiveRequestAttemptId.

        The attempts are remembered by the gateway serving the queue's partition 0, its
        attempt home: a receive reaching any other gateway is forwarded there (`forward`
        False: one forwarded here, never forwarded again), so a retry finds what the first
        try received wherever each try arrived. The home's receive itself takes messages
        from every partition, asking their owners as any receive does.

        A home that let partition 0 go or could not be reached (`OwnerGone`) is passed over
        once: the receive is made at the next home once it serves the partition, as the
        client's own retry would be (the attempts the gone home remembered went with it, so
        that receive takes messages anew; any the gone home had leased come back after
        their visibility timeout).
        """
        try:
            return await self._receive_once(
                record, attempt_id, max_messages, visibility_s, wait_s, forward
            )
        except OwnerGone as gone:
            home = partition_keys(record)[0]
            if not await self._messages.until_moved(record, home.partition, gone.owner):
                raise
            return await self._receive_once(
                record, attempt_id, max_messages, visibility_s, wait_s, forward
            )

    async def _receive_once(
        self,
        record: QueueRecord,
        attempt_id: str,
        max_messages: int,
        visibility_s: int,
        wait_s: int,
        forward: bool,
    ) -> list[Received]:
        home = partition_keys(record)[0]
        if forward:
            await self._messages.until_served(record, [home])
        elsewhere = self._messages.owner_elsewhere(record, home, forward)
        if elsewhere is not None:
            owner, forwarder = elsewhere
            return await forwarder.receive_attempt(
                owner, record.topic, attempt_id, max_messages, visibility_s, wait_s
            )
        received = await self._attempt(record, attempt_id, visibility_s)
        if received is None:
            received = await self._messages.receive(record, max_messages, visibility_s, wait_s)
            self._remember_attempt(record, attempt_id, received)
        return received

    async def _attempt(
        self, record: QueueRecord, attempt_id: str, visibility_s: int
    ) -> list[Received] | None:
        """What an earlier receive with this ReceiveRequestAttemptId got, if within 5 minutes.

        Only the messages still as that receive left them (not deleted, not received again
        since) are given back, with the same receipt handles, their visibility timeout
        started again ("a retry within the deduplication interval resets the visibility
        timeout", the API reference); None when none are. Messages on partitions other
        gateways serve are checked and restarted by their owners.
        """
        home = partition_keys(record)[0]
        now_ms = self._clock.now_ms()
        noted = self._leases.note(
            home, KIND_ATTEMPT, attempt_id.encode(), now_ms, ATTEMPT_WINDOW_MS
        )
        if noted is None:
            return None
        earlier = [decode_received(raw) for raw in json.loads(noted[1])]
        handles = [received.receipt_handle for received in earlier]
        current = self.restart_here(record, handles, visibility_s)
        by_owner: dict[Owner, tuple[Forwarder, list[int]]] = {}
        for i, kept in enumerate(current):
            if kept is not None:
                continue
            pk, _ = self._messages.locate(record, handles[i])
            try:
                elsewhere = self._messages.owner_elsewhere(record, pk, True)
            except ServiceUnavailable:
                continue  # nobody serves it during a rebalance: not given back this time
            if elsewhere is not None:
                owner, forwarder = elsewhere
                by_owner.setdefault(owner, (forwarder, []))[1].append(i)
        for owner, (forwarder, indexes) in by_owner.items():
            try:
                answers = await forwarder.restart_attempt(
                    owner, record.topic, [handles[i] for i in indexes], visibility_s
                )
            except ServiceUnavailable:
                continue  # moving or gone: its messages are not given back this time
            for i, answer in zip(indexes, answers, strict=True):
                current[i] = answer
        still = [received for received, kept in zip(earlier, current, strict=True) if kept]
        return still or None

    def restart_here(
        self, record: QueueRecord, receipt_handles: list[str], visibility_s: int
    ) -> list[bool | None]:
        """For each handle on a partition served here: whether its message is still as the
        receive that issued it left it, its visibility timeout then started again; None for
        a handle of a partition served elsewhere."""
        now_ms = self._clock.now_ms()
        answers: list[bool | None] = []
        for receipt_handle in receipt_handles:
            pk, handle = self._messages.locate(record, receipt_handle)
            if not self._messages.ownership.serves(record.topic, pk.partition):
                answers.append(None)
                continue
            fact = self._leases.fact(pk, handle.offset)
            if fact is None or fact.receive_count != handle.epoch:
                answers.append(False)
                continue
            with contextlib.suppress(LeaseError):  # past the 12 hours: keeps its lease as is
                self._leases.change_visibility(
                    pk, handle.offset, handle.epoch, now_ms, visibility_s * 1000, sync=False
                )
            answers.append(True)
        return answers

    def _remember_attempt(
        self, record: QueueRecord, attempt_id: str, received: list[Received]
    ) -> None:
        if received:
            home = partition_keys(record)[0]
            value = json.dumps(
                [encode_received(r.delivery, r.receipt_handle) for r in received]
            ).encode()
            name = attempt_id.encode()
            raw = self._leases.write_note(
                home, KIND_ATTEMPT, name, self._clock.now_ms(), value, sync=False
            )
            self._messages.publish_note(home, KIND_ATTEMPT, name, raw)
