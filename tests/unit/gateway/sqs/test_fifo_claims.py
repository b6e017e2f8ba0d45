"""FIFO deduplication of scope `queue` across gateways (`lease_store/fifo_claims.py`), and
receive attempts kept in the lease store: one gateway in group mode serving some of a
queue's partitions, the others' owners answering through a scripted channel
(`tests/support/in_process_gateway.py`)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from gateway.common.errors import ServiceUnavailable
from gateway.sqs.fifo import FifoService
from gateway.sqs.messages.service import MessageService
from lease_store import fifo, notes
from lease_store.fifo_claims import Claim, claim_partition
from lease_store.records import StoredMessage
from tests.support.in_process_gateway import (
    NEXT,
    T0,
    AnsweringForwarder,
    RememberingDirectory,
    gateway_serving_the_queue,
    take,
)
from topology.catalog import QueueRecord, group_partition, partition_keys

FIFO = QueueRecord("000000000000", "claims.fifo", "dd" * 16, 2)
DEDUP = next(f"d-{i}" for i in range(100) if claim_partition(f"d-{i}", 2) == 0)
GROUP_HERE = next(f"g-{i}" for i in range(100) if group_partition(f"g-{i}", 2) == 0)
GROUP_THERE = next(f"g-{i}" for i in range(100) if group_partition(f"g-{i}", 2) == 1)


def a_send(message_id: str, group: str, body: bytes = b"body") -> StoredMessage:
    return StoredMessage(
        message_id,
        body,
        sent_ms=T0,
        message_group_id=group,
        deduplication_id=DEDUP,
        deduplication_scope=fifo.SCOPE_QUEUE,
    )


async def serving_partition_0_with_1_at_next(
    forwarder: AnsweringForwarder,
) -> MessageService:
    """This gateway serves the claim partition (0); NEXT serves partition 1."""
    directory = RememberingDirectory()
    messages, ownership = await gateway_serving_the_queue(
        directory, forwarder=forwarder, queue=FIFO
    )
    await take(ownership, FIFO, 0)
    await directory.publish(FIFO.topic, 1, NEXT)
    ownership.directory_changed()
    return messages


def claim_of(messages: MessageService) -> Claim | None:
    noted = messages._leases.note(
        partition_keys(FIFO)[0], notes.KIND_CLAIM, DEDUP.encode(), T0, 60_000
    )
    return Claim.decode(noted[1]) if noted is not None else None


async def test_an_id_claimed_for_another_gateways_group_is_a_duplicate_in_a_group_here() -> None:
    # Given a send whose group lives on the partition another gateway serves
    forwarder = AnsweringForwarder()
    messages = await serving_partition_0_with_1_at_next(forwarder)
    service = FifoService(messages, messages._leases, messages._clock)
    first = await service.send(FIFO, a_send("m-1", GROUP_THERE))

    # When the same deduplication id is sent with a group whose partition is served here
    second = await service.send(FIFO, a_send("m-2", GROUP_HERE, b"another body"))

    # Then the first was claimed here and sent there, once; the second is its duplicate
    # and nothing was sent here
    assert forwarder.claimed_sends == ["m-1"]
    assert (second.message_id, int(second.sequence_number), second.duplicate) == (
        "m-1",
        int(first.sequence_number),
        True,
    )
    assert messages._leases.applied_offset(partition_keys(FIFO)[0]) == -1
    claim = claim_of(messages)
    assert claim is not None and claim.confirmed and claim.partition == 1


async def test_a_claim_whose_send_failed_admits_only_the_same_message_again() -> None:
    # Given a claim whose send to the group's partition failed
    forwarder = AnsweringForwarder({NEXT: ServiceUnavailable("gone for a moment")})
    messages = await serving_partition_0_with_1_at_next(forwarder)
    service = FifoService(messages, messages._leases, messages._clock)
    with pytest.raises(ServiceUnavailable):
        await service.send(FIFO, a_send("m-1", GROUP_THERE))
    claim = claim_of(messages)
    assert claim is not None and not claim.confirmed

    # When another message under the same id is sent, then the first one again (its
    # client's retry: a new MessageId, the same group and body)
    del forwarder.answers[NEXT]
    with pytest.raises(ServiceUnavailable):
        await service.send(FIFO, a_send("m-other", GROUP_HERE, b"another body"))
    retried = await service.send(FIFO, replace(a_send("m-2", GROUP_THERE), sent_ms=T0 + 9))

    # Then the other is refused (the claimed message may be in the log), and the retry is
    # sent under the claim's MessageId, which the group partition's ingest keeps once
    assert retried.message_id == "m-1"
    assert forwarder.claimed_sends == ["m-1"]
    confirmed = claim_of(messages)
    assert confirmed is not None and confirmed.confirmed


async def test_a_claim_whose_message_landed_unanswered_makes_another_message_its_duplicate() -> (
    None
):
    # Given a claim whose send failed as far as the claim's gateway knows, though the message
    # reached its partition there (the owner's window holds it: its answer was lost)
    forwarder = AnsweringForwarder({NEXT: ServiceUnavailable("the answer was lost")})
    messages = await serving_partition_0_with_1_at_next(forwarder)
    service = FifoService(messages, messages._leases, messages._clock)
    with pytest.raises(ServiceUnavailable):
        await service.send(FIFO, a_send("m-1", GROUP_THERE))
    del forwarder.answers[NEXT]
    forwarder.entries[DEDUP.encode()] = fifo.DedupEntry(T0, 41, "m-1")

    # When another message is sent under the same id
    sent = await service.send(FIFO, a_send("m-other", GROUP_HERE, b"another body"))

    # Then it is the claimed message's duplicate, and the claim now has its offset
    assert (sent.message_id, int(sent.sequence_number), sent.duplicate) == ("m-1", 41, True)
    assert ("fifo_entry", NEXT, DEDUP) in forwarder.calls
    claim = claim_of(messages)
    assert claim is not None and claim.offset == 41


async def test_concurrent_sends_of_one_id_in_two_groups_here_give_one_message() -> None:
    # Given both partitions served here (one gateway of a group-mode deployment)
    messages, ownership = await gateway_serving_the_queue(queue=FIFO)
    await take(ownership, FIFO, 1)
    service = FifoService(messages, messages._leases, messages._clock)

    # When one id is sent in two groups at once
    sent = await asyncio.gather(
        service.send(FIFO, a_send("m-1", GROUP_HERE)),
        service.send(FIFO, a_send("m-2", GROUP_THERE, b"another body")),
    )

    # Then one message was enqueued, and both answers name it
    assert {s.message_id for s in sent} == {"m-1"}
    assert sorted(s.duplicate for s in sent) == [False, True]
    keys = partition_keys(FIFO)
    applied = [messages._leases.applied_offset(pk) for pk in keys]
    assert sorted(applied) == [-1, 0]


async def test_a_receive_attempt_is_answered_again_by_a_restarted_fifo_service() -> None:
    # Given a FIFO message received with a ReceiveRequestAttemptId
    messages, _ = await gateway_serving_the_queue(queue=replace(FIFO, partitions=1))
    queue = replace(FIFO, partitions=1)
    first_run = FifoService(messages, messages._leases, messages._clock)
    await first_run.send(queue, a_send("m-1", GROUP_HERE))
    received = await first_run.receive(queue, "attempt-1", 10, 30, 0)
    assert [r.delivery.message.message_id for r in received] == ["m-1"]

    # When the gateway's FIFO service starts again (nothing in memory) and the receive is
    # retried with the same id
    restarted = FifoService(messages, messages._leases, messages._clock)
    again = await restarted.receive(queue, "attempt-1", 10, 30, 0)

    # Then it gets the same message with the same receipt handle
    assert [r.receipt_handle for r in again] == [r.receipt_handle for r in received]
