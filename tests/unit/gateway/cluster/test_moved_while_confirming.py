"""A change confirmed after its partition moved to another gateway is not answered as done.

With several gateways, a partition's next owner restores it from the changelog. A gateway
that learns late that the group took its partition (its broker was down: the change's
changelog record waits in librdkafka's queue and reaches Kafka after the new owner read it)
must not tell its client that a delete succeeded: the new owner still has the message, and
would deliver it again. These tests drive a real `MessageService` and `GroupOwnership` on
the event loop; only Kafka's clients are stand-ins (`bench/micro/standins.py`), since the
race they pin down is between the loop's own steps.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Sequence

import pytest
from confluent_kafka import KafkaError

from gateway.cluster.ownership import GroupOwnership
from gateway.cluster.pause_watch import PauseWatch
from gateway.common.errors import OwnerGone, ServiceUnavailable
from gateway.common.results import Received
from gateway.observability.events import EventSink
from gateway.sqs.group_sync import GroupSync
from gateway.sqs.messages.service import MessageService
from lease_store.keys import PartitionKey
from lease_store.records import StoredMessage
from tests.support.clocks import Monotonic
from tests.support.in_process_gateway import (
    NEXT,
    QUEUE,
    T0,
    AnsweringForwarder,
    RememberingDirectory,
    gateway_serving_the_queue,
    take,
)
from topology.catalog import QueueRecord
from topology.owners import Owner, OwnersDirectory
from topology.producer import ProduceFailed


class CountedDeletes(EventSink):
    """Notes the MessageIds each `deleted` event counts."""

    def __init__(self) -> None:
        self.deleted_ids: list[str] = []

    def deleted(self, record: QueueRecord, message_ids: Sequence[str]) -> None:
        self.deleted_ids.extend(message_ids)


def confirmations_held(messages: MessageService) -> concurrent.futures.Future[None]:
    """Make every change wait for a confirmation the test gives (as the changelog's
    acknowledgement is awaited with several gateways)."""
    confirmation: concurrent.futures.Future[None] = concurrent.futures.Future()
    messages.group_sync = GroupSync(lambda: confirmation)
    return confirmation


async def lose(ownership: GroupOwnership) -> None:
    """The group's loss of the partition, told on the ingest thread as librdkafka does."""
    await asyncio.to_thread(ownership.lost, [(QUEUE.topic, 0)])


async def next_owner_publishes(ownership: GroupOwnership, directory: OwnersDirectory) -> None:
    await directory.publish(QUEUE.topic, 0, NEXT)
    ownership.directory_changed()


async def one_in_flight(messages: MessageService) -> str:
    await messages.send(QUEUE, StoredMessage("m-1", b"body", sent_ms=T0))
    [received] = await messages.receive(QUEUE, 1, 30, 0)
    return received.receipt_handle


async def test_a_delete_confirmed_while_the_partition_is_served_succeeds() -> None:
    events = CountedDeletes()
    messages, _ = await gateway_serving_the_queue(events=events)
    handle = await one_in_flight(messages)
    confirmation = confirmations_held(messages)

    deleting = asyncio.create_task(messages.delete(QUEUE, handle))
    await asyncio.sleep(0.01)
    confirmation.set_result(None)
    await deleting

    assert messages.counts(QUEUE).in_flight == 0
    assert events.deleted_ids == ["m-1"]  # counted once, here


async def test_a_delete_confirmed_after_the_partition_was_lost_is_answered_unavailable() -> None:
    # Given a message in flight on a partition served here
    events = CountedDeletes()
    messages, ownership = await gateway_serving_the_queue(events=events)
    handle = await one_in_flight(messages)

    # When the group's loss of the partition arrives while a delete another gateway
    # forwarded here waits for its confirmation, which comes after that
    confirmation = confirmations_held(messages)
    deleting = asyncio.create_task(messages.delete_here(QUEUE, handle))
    await lose(ownership)
    confirmation.set_result(None)

    # Then that gateway is told the partition moved (it tries the next owner), not that the
    # delete is done; and which message was removed here, uncounted: only the next owner
    # knows whether it still had it
    with pytest.raises(OwnerGone) as gone:
        await deleting
    assert gone.value.removed == "m-1"
    assert events.deleted_ids == []


@pytest.mark.parametrize("next_owner_had_it", [True, False])
@pytest.mark.parametrize("record", ["acknowledged late", "dropped with the partition"])
async def test_a_delete_unconfirmed_when_the_partition_was_lost_goes_to_its_next_owner(
    next_owner_had_it: bool, record: str
) -> None:
    # Given a message in flight on a partition served here, and a gateway that can take
    # deletes (which restored the partition before this removal reached the changelog, and
    # so still had the message, or after)
    forwarder = AnsweringForwarder()
    if not next_owner_had_it:
        forwarder.had_it_no_more.add(NEXT)
    directory = RememberingDirectory()
    events = CountedDeletes()
    messages, ownership = await gateway_serving_the_queue(
        directory, forwarder=forwarder, events=events
    )
    handle = await one_in_flight(messages)

    # When the partition is lost while a client's delete waits for its confirmation, which
    # then comes (the record reached Kafka late), or fails (the loss dropped the record: a
    # gateway woken after its session expired), and the next owner publishes itself after
    confirmation = confirmations_held(messages)
    deleting = asyncio.create_task(messages.delete(QUEUE, handle))
    await lose(ownership)
    if record == "acknowledged late":
        confirmation.set_result(None)
    else:
        confirmation.set_exception(dropped_record())
    await asyncio.sleep(0.1)
    waited = not deleting.done()
    await next_owner_publishes(ownership, directory)

    # Then the delete waited for the next owner and was made there (not refused as Kafka
    # being unavailable)
    await asyncio.wait_for(deleting, 5)
    assert waited
    assert forwarder.calls == [("delete", NEXT, handle)]
    # and the message counts as deleted once: by the next owner when it removed it, here
    # when it had it no more (this gateway's removal was the one that counted)
    assert events.deleted_ids == ([] if next_owner_had_it else ["m-1"])


async def test_a_change_confirmed_after_the_partition_was_lost_and_taken_again_fails() -> None:
    # Given a message in flight on a partition served here
    messages, ownership = await gateway_serving_the_queue()
    handle = await one_in_flight(messages)

    # When the partition is lost and taken again (a new spell) before the change is confirmed
    confirmation = confirmations_held(messages)
    changing = asyncio.create_task(messages.change_visibility(QUEUE, handle, 60, forward=False))
    await lose(ownership)
    await take(ownership)
    confirmation.set_result(None)

    # Then the change is not answered as made: another owner may have served it in between
    with pytest.raises(ServiceUnavailable):
        await changing


async def test_a_change_confirmed_after_the_partition_came_back_is_made_again_here() -> None:
    # Given a message in flight on a partition served here
    messages, ownership = await gateway_serving_the_queue()
    handle = await one_in_flight(messages)

    # When a client's visibility change made in one spell is confirmed in the next
    confirmation = confirmations_held(messages)
    changing = asyncio.create_task(messages.change_visibility(QUEUE, handle, 60))
    await lose(ownership)
    await take(ownership)
    confirmation.set_result(None)

    # Then it is made again in the spell now serving the partition, and answered as done
    await asyncio.wait_for(changing, 5)
    assert messages.counts(QUEUE).in_flight == 1


def dropped_record() -> ProduceFailed:
    """What a confirmation fails with when the changelog record it waits for is dropped
    (`FollowerProducer.drop_unsent`: librdkafka's purge)."""
    return ProduceFailed(KafkaError(KafkaError._PURGE_QUEUE))


async def test_a_visibility_change_whose_record_was_dropped_with_the_lost_partition_goes_to_its_next_owner() -> (
    None
):
    forwarder = AnsweringForwarder()
    directory = RememberingDirectory()
    messages, ownership = await gateway_serving_the_queue(directory, forwarder=forwarder)
    handle = await one_in_flight(messages)

    confirmation = confirmations_held(messages)
    changing = asyncio.create_task(messages.change_visibility(QUEUE, handle, 60))
    await lose(ownership)
    confirmation.set_exception(dropped_record())
    await asyncio.sleep(0.1)
    await next_owner_publishes(ownership, directory)

    await asyncio.wait_for(changing, 5)
    assert forwarder.calls == [("change_visibility", NEXT, handle)]


async def test_a_delete_whose_confirmation_fails_while_the_partition_is_served_fails() -> None:
    # Given a message in flight on a partition served here
    events = CountedDeletes()
    messages, _ = await gateway_serving_the_queue(events=events)
    handle = await one_in_flight(messages)

    # When the changelog does not acknowledge the delete's record, the partition still here
    confirmation = confirmations_held(messages)
    deleting = asyncio.create_task(messages.delete(QUEUE, handle))
    await asyncio.sleep(0.01)
    confirmation.set_exception(dropped_record())

    # Then the client hears of the failure (and retries); the removal, made here, counts once
    with pytest.raises(ProduceFailed):
        await deleting
    assert events.deleted_ids == ["m-1"]


async def test_a_delete_whose_record_timed_out_is_answered_so_even_if_the_partition_moved() -> None:
    # Given a message in flight on a partition served here, and a gateway that can take
    # deletes
    forwarder = AnsweringForwarder()
    messages, ownership = await gateway_serving_the_queue(forwarder=forwarder)
    handle = await one_in_flight(messages)

    # When the delete's record is not acknowledged in the delivery timeout (the broker away)
    # and the partition was lost meanwhile
    confirmation = confirmations_held(messages)
    deleting = asyncio.create_task(messages.delete(QUEUE, handle))
    await lose(ownership)
    confirmation.set_exception(ProduceFailed(KafkaError(KafkaError._MSG_TIMED_OUT)))

    # Then the client hears of that failure at once (it retries), rather than after a wait
    # for the next owner on top of the delivery timeout
    with pytest.raises(ProduceFailed):
        await asyncio.wait_for(deleting, 1)
    assert forwarder.calls == []


async def test_a_delete_read_on_waking_from_a_stall_waits_for_the_loss_and_goes_to_the_next_owner() -> (
    None
):
    # Given a message in flight on a partition served here, and a gateway that can take
    # deletes
    clock = Monotonic()
    forwarder = AnsweringForwarder()
    directory = RememberingDirectory()
    messages, ownership = await gateway_serving_the_queue(
        directory, forwarder=forwarder, pause_watch=PauseWatch(clock, settle_s=0.3)
    )
    handle = await one_in_flight(messages)
    confirmation = confirmations_held(messages)
    confirmation.set_result(None)  # Kafka would take the delete's changelog record at once

    # When the gateway stood still past its session (the group gave its partition to
    # another), and on waking reads a delete from its socket before the loss reaches it
    clock.now += 7.0
    deleting = asyncio.create_task(messages.delete(QUEUE, handle))
    await asyncio.sleep(0.05)
    await lose(ownership)
    await next_owner_publishes(ownership, directory)

    # Then the delete is made at the next owner, not here (where it would be answered as
    # done, and undone by the next owner, which restored the partition without it)
    await asyncio.wait_for(deleting, 5)
    assert forwarder.calls == [("delete", NEXT, handle)]
    assert messages.counts(QUEUE).in_flight == 0  # nothing served here


async def test_a_delete_confirmed_on_waking_from_a_stall_waits_for_the_loss_and_goes_to_the_next_owner() -> (
    None
):
    # Given a message in flight on a partition served here
    clock = Monotonic()
    forwarder = AnsweringForwarder()
    directory = RememberingDirectory()
    events = CountedDeletes()
    messages, ownership = await gateway_serving_the_queue(
        directory, forwarder=forwarder, events=events, pause_watch=PauseWatch(clock, settle_s=0.3)
    )
    handle = await one_in_flight(messages)

    # When a delete made here waits for its confirmation, the gateway stands still past its
    # session, and on waking the confirmation comes before the loss
    confirmation = confirmations_held(messages)
    deleting = asyncio.create_task(messages.delete(QUEUE, handle))
    await asyncio.sleep(0.01)
    clock.now += 7.0
    confirmation.set_result(None)
    await asyncio.sleep(0.05)
    assert not deleting.done()
    await lose(ownership)
    await next_owner_publishes(ownership, directory)

    # Then it is not answered as done here: it is made again at the next owner, which
    # counts it
    await asyncio.wait_for(deleting, 5)
    assert forwarder.calls == [("delete", NEXT, handle)]
    assert events.deleted_ids == []


async def test_a_change_after_a_stall_the_group_did_not_act_on_is_made_here_after_the_wait() -> (
    None
):
    # Given a message in flight on a partition served here
    clock = Monotonic()
    forwarder = AnsweringForwarder()
    messages, _ = await gateway_serving_the_queue(
        forwarder=forwarder, pause_watch=PauseWatch(clock, settle_s=0.3)
    )
    handle = await one_in_flight(messages)

    # When the gateway stood still, but no loss follows (the group kept its partitions)
    clock.now += 4.0
    loop = asyncio.get_running_loop()
    began = loop.time()
    await messages.change_visibility(QUEUE, handle, 0)

    # Then the change waited the settle time, then was made here
    assert loop.time() - began >= 0.25
    assert forwarder.calls == []
    assert messages.counts(QUEUE).visible == 1


async def test_a_receive_read_on_waking_from_a_stall_takes_nothing_from_the_lost_partition() -> (
    None
):
    # Given a visible message on a partition served here
    clock = Monotonic()
    messages, ownership = await gateway_serving_the_queue(
        pause_watch=PauseWatch(clock, settle_s=0.3)
    )
    await messages.send(QUEUE, StoredMessage("m-1", b"body", sent_ms=T0))

    # When the gateway stood still past its session and, on waking, reads a receive from its
    # socket before the loss of the partition reaches it
    clock.now += 7.0
    receiving = asyncio.create_task(messages.receive(QUEUE, 1, 30, 0))
    await asyncio.sleep(0.05)
    await lose(ownership)

    # Then it leases nothing there: the next owner serves that message (a lease taken here
    # would reach the changelog after that owner's own records)
    assert await asyncio.wait_for(receiving, 5) == []


class HeldReceives(AnsweringForwarder):
    """Other gateways whose receives answer (with nothing) only when the test says."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = asyncio.Event()
        self.answer = asyncio.Event()

    async def receive(
        self,
        owners: dict[Owner, list[PartitionKey]],
        topic: str,
        wanted: int,
        visibility_ms: int,
    ) -> tuple[list[Received], int]:
        self.asked.set()
        await self.answer.wait()
        return [], 0


async def test_a_receive_that_stood_still_waiting_for_other_gateways_does_not_answer_leases_taken_on_a_lost_partition() -> (
    None
):
    # Given a queue of two partitions, the first served here (a visible message on it), the
    # second by another gateway
    two = QueueRecord("000000000000", "orders", "ab" * 16, 2)
    clock = Monotonic()
    forwarder = HeldReceives()
    directory = RememberingDirectory()
    messages, ownership = await gateway_serving_the_queue(
        directory, queue=two, forwarder=forwarder, pause_watch=PauseWatch(clock, settle_s=0.3)
    )
    await directory.publish(two.topic, 1, NEXT)
    ownership.directory_changed()
    await messages.send(two, StoredMessage("m-1", b"body", sent_ms=T0))

    # When a receive leased it here and, while it waits for the other gateway's answer, this
    # gateway stands still past its session; on waking the answer comes before the loss
    receiving = asyncio.create_task(messages.receive(two, 2, 30, 0))
    await asyncio.wait_for(forwarder.asked.wait(), 5)
    clock.now += 7.0
    forwarder.answer.set()
    await asyncio.sleep(0.05)
    assert not receiving.done()
    await asyncio.to_thread(ownership.lost, [(two.topic, 0)])

    # Then the lease taken here is not answered: the next owner restored the partition
    # without it and may have delivered and deleted the message meanwhile
    assert await asyncio.wait_for(receiving, 5) == []


async def test_a_receive_that_waited_for_other_gateways_without_a_stall_answers_its_leases() -> (
    None
):
    # Given a queue of two partitions, the first served here (a visible message on it), the
    # second by another gateway
    two = QueueRecord("000000000000", "orders", "ab" * 16, 2)
    forwarder = HeldReceives()
    directory = RememberingDirectory()
    messages, ownership = await gateway_serving_the_queue(
        directory, queue=two, forwarder=forwarder, pause_watch=PauseWatch(Monotonic())
    )
    await directory.publish(two.topic, 1, NEXT)
    ownership.directory_changed()
    await messages.send(two, StoredMessage("m-1", b"body", sent_ms=T0))

    # When a receive leased it here and the other gateway answers (nothing) in time
    receiving = asyncio.create_task(messages.receive(two, 2, 30, 0))
    await asyncio.wait_for(forwarder.asked.wait(), 5)
    forwarder.answer.set()

    # Then its lease is answered
    [received] = await asyncio.wait_for(receiving, 5)
    assert received.delivery.message.message_id == "m-1"
