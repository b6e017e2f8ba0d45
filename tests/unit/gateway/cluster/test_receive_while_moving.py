"""A receive meets a partition that stops being served here while it runs.

The in-process gateway of `tests/support/in_process_gateway.py`: a real `MessageService` and
`GroupOwnership` on the event loop, Kafka's clients replaced.
"""

from __future__ import annotations

import asyncio
import json

from gateway.cluster.ownership import GroupOwnership
from gateway.sqs.messages.service import MessageService
from gateway.sqs.queues import queue_arn
from lease_store.clock import ManualClock
from lease_store.keys import PartitionKey
from lease_store.records import StoredMessage
from lease_store.types import Delivery
from tests.support.in_process_gateway import T0, gateway_serving_the_queue, take
from topology.catalog import QueueRecord

DLQ = QueueRecord("000000000000", "orders-dlq", "ef" * 16, 1)
SOURCE = QueueRecord(
    "000000000000",
    "orders",
    "cd" * 16,
    2,
    attributes={
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": queue_arn(DLQ), "maxReceiveCount": 1})
    },
)


async def serving_both_partitions(
    clock: ManualClock | None = None,
) -> tuple[MessageService, GroupOwnership]:
    messages, ownership = await gateway_serving_the_queue(queue=SOURCE, clock=clock, also=[DLQ])
    await take(ownership, SOURCE, 1)
    return messages, ownership


async def send(messages: MessageService, body: str) -> int:
    """Send a message (to the served partitions in turn); the partition it went to."""
    delivered = await messages.send(SOURCE, StoredMessage(body, body.encode(), sent_ms=T0))
    return delivered.partition


async def test_a_forwarded_receive_answers_from_the_partitions_still_served_here() -> None:
    # Given a message on each of two partitions served here
    messages, ownership = await serving_both_partitions()
    on = {await send(messages, "first"): "first", await send(messages, "second"): "second"}
    assert sorted(on) == [0, 1]

    # When one partition is revoked, and a receive forwarded here names both
    await asyncio.to_thread(ownership.revoked, [(SOURCE.topic, 1)])
    received, _ = await messages.receive_here(SOURCE, [0, 1], 10, 30_000)

    # Then the partition still served answers (the other one's part only is left out)
    assert [r.delivery.message.message_id for r in received] == [on[0]]


async def test_a_receive_skips_a_partition_released_during_a_dead_letter_move() -> None:
    # Given a message past its maxReceiveCount on partition 1 and a fresh one on partition 0
    clock = ManualClock(T0)
    messages, ownership = await serving_both_partitions(clock)
    assert await send(messages, "done") == 0
    assert await send(messages, "past-max") == 1
    first = await messages.receive(SOURCE, 10, 30, 0)
    (done,) = [r for r in first if r.delivery.message.message_id == "done"]
    await messages.delete(SOURCE, done.receipt_handle)
    clock.advance(31_000)  # "past-max" visible again, received once already
    assert await send(messages, "fresh") == 0

    # ... and the group revoking partition 0 while a dead-letter move awaits Kafka
    move = messages._dead_letter

    async def moving_while_revoked(
        source: QueueRecord, dlq: QueueRecord, pk: PartitionKey, moves: list[Delivery]
    ) -> None:
        await move(source, dlq, pk, moves)
        await asyncio.to_thread(ownership.revoked, [(SOURCE.topic, 0)])

    messages._dead_letter = moving_while_revoked  # type: ignore[method-assign]

    # When a receive moves "past-max" (partition 1 comes first in this receive's turn)
    received = await messages.receive(SOURCE, 10, 30, 0)

    # Then nothing is taken from partition 0, which its next owner may have restored by now
    assert not ownership.serves(SOURCE.topic, 0)
    assert [r.delivery.message.message_id for r in received] == []
