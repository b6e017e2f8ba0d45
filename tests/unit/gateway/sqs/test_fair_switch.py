"""When a gateway treats a standard queue's partition as fair (groups take turns) without
having sent its grouped messages itself: after a restart (the partition's stored state says
so), on a partition taken over from another gateway (its restore replays the grouped
records: `tests/unit/lease_store/test_lease_rebuild.py`), and for grouped records another
producer wrote. The real `MessageService` and lease store, Kafka's clients replaced
(`tests/support/in_process_gateway.py`).
"""

from __future__ import annotations

from gateway.sqs.messages.service import MessageService
from lease_store.records import StoredMessage
from tests.support.builders import a_message
from tests.support.in_process_gateway import QUEUE, gateway_serving_the_queue
from topology.catalog import partition_keys


def a_flood_then_a_quiet_message() -> list[tuple[int, StoredMessage]]:
    """30 messages of a flooding group, then one of a quiet group, at offsets 0..30."""
    flood = [(i, a_message(f"noisy-{i}", message_group_id="noisy")) for i in range(30)]
    return [*flood, (30, a_message("quiet", message_group_id="quiet"))]


async def received_ids(messages: MessageService) -> list[str]:
    received = await messages.receive(QUEUE, 10, 30, 0)
    return [r.delivery.message.message_id for r in received]


async def test_grouped_messages_in_the_store_make_the_queue_fair_from_the_first_receive() -> None:
    # Given grouped messages this gateway did not send, already in its lease store (kept
    # across a restart, say: `PartitionState.grouped` is stored with the partition)
    messages, _ = await gateway_serving_the_queue()
    messages._leases.ingest(partition_keys(QUEUE)[0], a_flood_then_a_quiet_message())

    # When one receive of 10 is made
    ids = await received_ids(messages)

    # Then the quiet group's message passes the flood at once
    assert "quiet" in ids
    assert messages._leases.grouped(partition_keys(QUEUE)[0])


async def test_grouped_records_read_by_ingest_make_the_queue_fair_at_once() -> None:
    # Given grouped records another producer wrote, read by this gateway's ingest
    messages, _ = await gateway_serving_the_queue()
    messages.on_ingested(QUEUE.topic, 0, a_flood_then_a_quiet_message())

    # When one receive of 10 is made
    ids = await received_ids(messages)

    # Then the quiet group's message is among them
    assert "quiet" in ids


async def test_messages_without_groups_leave_the_queue_plain() -> None:
    messages, _ = await gateway_serving_the_queue()
    messages.on_ingested(QUEUE.topic, 0, [(i, a_message(f"m-{i}")) for i in range(12)])

    assert await received_ids(messages) == [f"m-{i}" for i in range(10)]
    assert not messages._leases.grouped(partition_keys(QUEUE)[0])
