"""A delete, visibility change or FIFO send forwarded to a partition's owner that let the
partition go (409) or could not be reached is tried once more where the partition's next
owner serves it, instead of answering ServiceUnavailable at once.

While a partition moves, the owners directory goes on naming the gateway that released it
(or died) until the next owner has restored it and published itself; the crash suite's
hand-over runs saw dozens of deletes refused so per run. The in-process gateway of
`tests/support/in_process_gateway.py`: a real `MessageService` and `GroupOwnership` on the event
loop; the other gateways answer through `AnsweringForwarder`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

import pytest

from gateway.cluster.ownership import GroupOwnership
from gateway.common.errors import OwnerGone, ServiceUnavailable
from gateway.sqs.fifo import FifoService
from gateway.sqs.messages import routing as messages_module
from gateway.sqs.messages.service import MessageService
from lease_store.errors import MessageNotInflight
from lease_store.handles import ReceiptHandle, ReceiptHandleCodec
from lease_store.records import StoredMessage
from tests.support.in_process_gateway import (
    NEXT,
    QUEUE,
    T0,
    AnsweringForwarder,
    RememberingDirectory,
    gateway_serving_the_queue,
    take,
)
from topology.catalog import QueueRecord, partition_keys
from topology.owners import Owner

GONE = Owner("gateway-gone", "http://127.0.0.1:3")
OTHER = Owner("gateway-other", "http://127.0.0.1:4")
THREE_PARTITIONS = QueueRecord("000000000000", "spread", "cd" * 16, 3)
FIFO = QueueRecord("000000000000", "orders.fifo", "ef" * 16, 1)

T = TypeVar("T")


def gone() -> OwnerGone:
    """What `Forwarder.call` raises for a 409 or an owner it cannot reach."""
    return OwnerGone("The gateway serving this queue partition could not be reached.", GONE)


def handle_on(queue: QueueRecord, partition: int, offset: int = 7) -> str:
    pk = partition_keys(queue)[partition]
    return ReceiptHandleCodec(b"a receipt handle secret").encode(
        ReceiptHandle(pk.incarnation, pk.partition, offset, 1)
    )


async def named(directory: RememberingDirectory, queue: QueueRecord, owners: list[Owner]) -> None:
    """The directory names `owners[p]` as the owner of partition p."""
    for partition, owner in enumerate(owners):
        await directory.publish(queue.topic, partition, owner)


async def moves_to(
    directory: RememberingDirectory,
    ownership: GroupOwnership,
    queue: QueueRecord,
    partition: int,
    owner: Owner,
) -> None:
    """The next owner publishes itself, as every gateway then reads in `__kqs_owners`."""
    await directory.publish(queue.topic, partition, owner)
    ownership.directory_changed()


async def still_waiting(request: Awaitable[T]) -> asyncio.Future[T]:
    pending = asyncio.ensure_future(request)
    await asyncio.sleep(0.1)
    assert not pending.done(), "answered before the partition had a next owner"
    return pending


async def a_gateway_where_partition_0_is_named(
    owner: Owner, forwarder: AnsweringForwarder, queue: QueueRecord = QUEUE
) -> tuple[MessageService, GroupOwnership, RememberingDirectory]:
    directory = RememberingDirectory()
    messages, ownership = await gateway_serving_the_queue(
        directory, served=False, forwarder=forwarder, queue=queue
    )
    await named(directory, queue, [owner])
    return messages, ownership, directory


async def test_a_delete_refused_by_an_owner_gone_is_made_by_the_next_owner() -> None:
    # Given a partition whose named owner has let it go
    forwarder = AnsweringForwarder({GONE: gone()})
    messages, ownership, directory = await a_gateway_where_partition_0_is_named(GONE, forwarder)
    handle = handle_on(QUEUE, 0)

    # When a delete is refused there, and the next owner publishes itself a moment later
    deleting = await still_waiting(messages.delete_many(QUEUE, [handle]))
    await moves_to(directory, ownership, QUEUE, 0, NEXT)

    # Then the delete is made by the next owner
    assert await asyncio.wait_for(deleting, 5) == [None]
    assert forwarder.calls == [("delete", GONE, handle), ("delete", NEXT, handle)]


async def test_an_owner_gone_that_restarts_and_serves_again_gets_the_retry() -> None:
    # Given a partition whose named owner cannot be reached (it died)
    forwarder = AnsweringForwarder({GONE: gone()})
    messages, ownership, directory = await a_gateway_where_partition_0_is_named(GONE, forwarder)
    handle = handle_on(QUEUE, 0)

    # When a delete is refused there, and the same gateway, restarted, publishes itself again
    # (its id and endpoint unchanged)
    deleting = await still_waiting(messages.delete_many(QUEUE, [handle]))
    del forwarder.answers[GONE]
    await moves_to(directory, ownership, QUEUE, 0, GONE)

    # Then the delete is made by it, without waiting out the whole wait
    assert await asyncio.wait_for(deleting, 5) == [None]
    assert forwarder.calls == [("delete", GONE, handle), ("delete", GONE, handle)]


async def test_a_visibility_change_refused_by_an_owner_gone_is_made_by_the_next_owner() -> None:
    forwarder = AnsweringForwarder({GONE: gone()})
    messages, ownership, directory = await a_gateway_where_partition_0_is_named(GONE, forwarder)
    handle = handle_on(QUEUE, 0)

    changing = await still_waiting(messages.change_visibility_many(QUEUE, [(handle, 30)]))
    await moves_to(directory, ownership, QUEUE, 0, NEXT)

    assert await asyncio.wait_for(changing, 5) == [None]
    assert forwarder.calls == [
        ("change_visibility", GONE, handle),
        ("change_visibility", NEXT, handle),
    ]


async def test_a_delete_refused_by_an_owner_gone_is_made_here_once_the_partition_comes_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a partition whose named owner has let it go (restoring it here from Kafka is
    # not what this is about: the restore is left out)
    forwarder = AnsweringForwarder({GONE: gone()})
    messages, ownership, _ = await a_gateway_where_partition_0_is_named(GONE, forwarder)

    async def restored(partitions: object) -> None:
        return None

    monkeypatch.setattr(ownership, "_restore", restored)
    handle = handle_on(QUEUE, 0)

    # When a delete is refused there, and the group gives the partition to this gateway
    deleting = await still_waiting(messages.delete_many(QUEUE, [handle]))
    await take(ownership)

    # Then the delete is made here (the message was not here: deleted already, a success)
    assert await asyncio.wait_for(deleting, 5) == [None]
    assert forwarder.calls == [("delete", GONE, handle)]


async def test_only_the_entries_whose_owner_was_gone_are_tried_again() -> None:
    # Given a queue whose partition 0 is served here, partition 1 by a gateway that answers
    # (the message is not in flight there), and partition 2 by one that let it go
    forwarder = AnsweringForwarder({OTHER: MessageNotInflight("not in flight"), GONE: gone()})
    directory = RememberingDirectory()
    messages, ownership = await gateway_serving_the_queue(
        directory, forwarder=forwarder, queue=THREE_PARTITIONS
    )
    await named(directory, THREE_PARTITIONS, [ownership.me, OTHER, GONE])
    await messages.send(THREE_PARTITIONS, StoredMessage("m-1", b"body", sent_ms=T0))
    [received] = await messages.receive(THREE_PARTITIONS, 1, 30, 0)
    here = received.receipt_handle
    answered, moving = handle_on(THREE_PARTITIONS, 1), handle_on(THREE_PARTITIONS, 2)

    # When a batch of visibility changes names all three, and partition 2 moves on
    changing = await still_waiting(
        messages.change_visibility_many(
            THREE_PARTITIONS, [(here, 30), (answered, 30), (moving, 30)]
        )
    )
    await moves_to(directory, ownership, THREE_PARTITIONS, 2, NEXT)
    outcomes = await asyncio.wait_for(changing, 5)

    # Then the owner's own answer stands, and only the entry whose owner was gone went again
    assert [type(outcome) for outcome in outcomes] == [type(None), MessageNotInflight, type(None)]
    assert forwarder.calls == [
        ("change_visibility", OTHER, answered),
        ("change_visibility", GONE, moving),
        ("change_visibility", NEXT, moving),
    ]


async def test_an_owner_gone_and_no_next_owner_in_time_is_unavailable(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a partition whose named owner is gone, no other taking it, and a short wait
    monkeypatch.setattr(messages_module, "OWNER_GONE_WAIT_S", 0.2)
    forwarder = AnsweringForwarder({GONE: gone()})
    messages, _, _ = await a_gateway_where_partition_0_is_named(GONE, forwarder)
    handle = handle_on(QUEUE, 0)

    # When a delete arrives
    (outcome,) = await messages.delete_many(QUEUE, [handle])

    # Then it is ServiceUnavailable (the client retries), tried only once, and said so
    assert isinstance(outcome, ServiceUnavailable)
    assert forwarder.calls == [("delete", GONE, handle)]
    assert any(r.getMessage().startswith("owner of the partition gone") for r in caplog.records)


async def test_a_forwarded_delete_is_never_forwarded_again() -> None:
    # Given a gateway that no longer serves a partition another gateway forwarded a delete
    # of to it
    forwarder = AnsweringForwarder()
    messages, _, _ = await a_gateway_where_partition_0_is_named(NEXT, forwarder)

    # When the forwarded delete arrives
    with pytest.raises(Exception) as refused:
        await messages.delete_here(QUEUE, handle_on(QUEUE, 0))

    # Then it is refused as not served here (409 to the sender), not passed on
    assert type(refused.value).__name__ == "NotServedHere"
    assert forwarder.calls == []


async def test_a_fifo_send_refused_by_an_owner_gone_is_sent_by_the_next_owner() -> None:
    # Given a FIFO queue whose partition's named owner has let it go
    forwarder = AnsweringForwarder({GONE: gone()})
    messages, ownership, directory = await a_gateway_where_partition_0_is_named(
        GONE, forwarder, FIFO
    )
    message = StoredMessage(
        "m-1",
        b"body",
        sent_ms=T0,
        message_group_id="g",
        deduplication_id="d-1",
        deduplication_scope="queue",
    )

    # When the send is refused there, and the next owner publishes itself
    fifo = FifoService(messages, messages._leases, messages._clock)
    sending = await still_waiting(fifo.send(FIFO, message))
    await moves_to(directory, ownership, FIFO, 0, NEXT)

    # Then the next owner (deduplicating by the same id) sent it
    sent = await asyncio.wait_for(sending, 5)
    assert sent.message_id == "m-1"
    assert forwarder.calls == [("fifo_send", GONE, "m-1"), ("fifo_send", NEXT, "m-1")]


async def test_a_fifo_receive_with_an_attempt_id_refused_by_a_home_gone_is_made_at_the_next() -> (
    None
):
    # Given a FIFO queue whose attempt home (the owner of partition 0) has let it go
    forwarder = AnsweringForwarder({GONE: gone()})
    messages, ownership, directory = await a_gateway_where_partition_0_is_named(
        GONE, forwarder, FIFO
    )

    # When a receive with a ReceiveRequestAttemptId is refused there, and the next owner
    # publishes itself
    fifo = FifoService(messages, messages._leases, messages._clock)
    receiving = await still_waiting(fifo.receive(FIFO, "attempt-1", 10, 30, 0))
    await moves_to(directory, ownership, FIFO, 0, NEXT)

    # Then the next home answered it (not ServiceUnavailable to the client)
    assert await asyncio.wait_for(receiving, 5) == []
    assert forwarder.calls == [
        ("receive_attempt", GONE, "attempt-1"),
        ("receive_attempt", NEXT, "attempt-1"),
    ]


async def test_counts_refused_by_an_owner_gone_are_taken_from_the_next_owner() -> None:
    # Given a partition whose named owner has let it go (a rebalance)
    forwarder = AnsweringForwarder({GONE: gone()})
    messages, ownership, directory = await a_gateway_where_partition_0_is_named(GONE, forwarder)

    # When the queue's counters are asked for (GetQueueAttributes), and the next owner
    # publishes itself a moment later
    counting = await still_waiting(messages.queue_counts(QUEUE))
    await moves_to(directory, ownership, QUEUE, 0, NEXT)

    # Then they are the next owner's, not ServiceUnavailable
    counts = await asyncio.wait_for(counting, 5)
    assert counts.visible == 1
    assert forwarder.calls == [("counts", GONE, "0"), ("counts", NEXT, "0")]
