"""A request about a partition that no gateway serves (a rebalance moving it from one to the
next) waits for its next owner, up to `MOVING_WAIT_S`, instead of failing at once with
ServiceUnavailable. Seen before: a FIFO send right after CreateQueue, when the group's
second balancing round moved the queue's partitions, failed after its one client retry.
The in-process gateway of `tests/support/in_process_gateway.py`: a real `MessageService` and
`GroupOwnership` on the event loop, Kafka's clients replaced.
"""

from __future__ import annotations

import asyncio

import pytest

from gateway.common.errors import ServiceUnavailable
from gateway.sqs.messages import routing as messages_module
from lease_store.handles import ReceiptHandle, ReceiptHandleCodec
from tests.support.in_process_gateway import QUEUE, gateway_serving_the_queue
from topology.catalog import partition_keys


def a_handle_on_partition_0() -> str:
    pk = partition_keys(QUEUE)[0]
    return ReceiptHandleCodec(b"a receipt handle secret").encode(
        ReceiptHandle(pk.incarnation, pk.partition, 7, 1)
    )


async def test_a_delete_waits_for_a_partition_moving_between_gateways() -> None:
    # Given a gateway that does not serve the queue's partition, and no other gateway does
    messages, ownership = await gateway_serving_the_queue(served=False)

    # When a delete arrives, and the partition is assigned here a moment later
    deleting = asyncio.ensure_future(messages.delete_many(QUEUE, [a_handle_on_partition_0()]))
    await asyncio.sleep(0.2)
    waited = not deleting.done()
    ownership.assigned([(QUEUE.topic, 0)])

    # Then the delete waited, and was answered (already gone: success) once served here
    assert waited
    assert await asyncio.wait_for(deleting, 5) == [None]
    assert ownership.serves(QUEUE.topic, 0)


async def test_a_delete_is_unavailable_when_no_gateway_takes_the_partition_in_time(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a partition no gateway serves, and a short wait
    monkeypatch.setattr(messages_module, "MOVING_WAIT_S", 0.2)
    messages, _ = await gateway_serving_the_queue(served=False)

    # When a delete and a visibility change arrive
    (deleted,) = await messages.delete_many(QUEUE, [a_handle_on_partition_0()])
    (changed,) = await messages.change_visibility_many(QUEUE, [(a_handle_on_partition_0(), 30)])

    # Then each fails as ServiceUnavailable (the client retries), after the wait, and the
    # gateway's log names the partition that stayed without an owner
    assert isinstance(deleted, ServiceUnavailable)
    assert isinstance(changed, ServiceUnavailable)
    warnings = [
        r
        for r in caplog.records
        if r.levelname == "WARNING" and r.getMessage().startswith("no gateway serves")
    ]
    assert [(r.__dict__["queue"], r.__dict__["partition"]) for r in warnings] == [
        (QUEUE.key, 0),
        (QUEUE.key, 0),
    ]
