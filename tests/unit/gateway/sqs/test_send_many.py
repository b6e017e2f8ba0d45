"""`MessageService.send_many` (SendMessageBatch): each message's outcome in order, and the
answer in the event-loop turn after the delivery reports.

A real `MessageService` with the memory lease store; Kafka's producer is the in-process
stand-in of `bench/micro/standins.py`, which reports the records produced in one turn
together in the next, as librdkafka's poll thread hands them over.
"""

from __future__ import annotations

import asyncio
from typing import Any

from confluent_kafka import KafkaError

from gateway.sqs.messages.service import MessageService
from gateway.sqs.waiters import QueueSignals
from lease_store.clock import ManualClock
from lease_store.handles import ReceiptHandleCodec
from lease_store.memory import MemoryKeyValueStore
from lease_store.records import StoredMessage
from lease_store.store import LeaseStore
from tests.support.in_process_gateway import T0, registry_of
from topology.catalog import QueueRecord
from topology.producer import Delivered, ProduceFailed
from topology.standins import InstantProducer, Log

ORDERS = QueueRecord("000000000000", "orders", "ab" * 16, 1)


class PickyProducer(InstantProducer):
    """Refuses the body b"refused" at once; the broker fails the body b"failed" (its report,
    in the next turn, says so; it takes no offset)."""

    def start(self, topic: str, value: bytes | None, *args: Any, **kwargs: Any) -> Any:
        if value == b"refused":
            raise BufferError("Local: Queue full")
        if value == b"failed":
            future: asyncio.Future[Delivered] = asyncio.get_running_loop().create_future()
            timed_out = ProduceFailed(KafkaError(KafkaError._MSG_TIMED_OUT))
            future.get_loop().call_soon(future.set_exception, timed_out)
            return future
        return super().start(topic, value, *args, **kwargs)


def gateway() -> tuple[MessageService, ManualClock]:
    clock = ManualClock(T0)
    log = Log()
    messages = MessageService(
        clock,
        PickyProducer(log),
        LeaseStore(MemoryKeyValueStore()),
        registry_of(ORDERS, log),
        QueueSignals(),
        ReceiptHandleCodec(b"a receipt handle secret"),
        "us-east-1",
    )
    return messages, clock


def message(body: bytes, clock: ManualClock) -> StoredMessage:
    return StoredMessage(f"id-{body.decode()}", body, sent_ms=clock.now_ms())


async def test_each_message_of_a_batch_has_its_own_outcome_in_order() -> None:
    messages, clock = gateway()
    bodies = [b"one", b"refused", b"failed", b"two"]
    outcomes = await messages.send_many(ORDERS, [message(b, clock) for b in bodies])
    assert [type(o).__name__ for o in outcomes] == [
        "Delivered",
        "BufferError",
        "ProduceFailed",
        "Delivered",
    ]
    assert isinstance(outcomes[0], Delivered) and isinstance(outcomes[3], Delivered)
    assert outcomes[3].offset > outcomes[0].offset
    # The two delivered are receivable now; the other two never were.
    received = await messages.receive(ORDERS, 10, 30, 0)
    assert sorted(r.delivery.message.body for r in received) == [b"one", b"two"]


async def test_a_batch_is_answered_in_the_turn_after_its_delivery_reports() -> None:
    """The reports of the batch's records come together one turn after they were produced;
    the batch resumes in the turn after that (through `asyncio.wait` it was one more)."""
    messages, clock = gateway()
    turns = 0

    async def count_turns() -> None:
        nonlocal turns
        while True:
            await asyncio.sleep(0)
            turns += 1

    counter = asyncio.create_task(count_turns())
    await asyncio.sleep(0)  # the counter runs once per turn from here
    before = turns
    outcomes = await messages.send_many(ORDERS, [message(b"m%d" % i, clock) for i in range(10)])
    took = turns - before
    counter.cancel()
    assert all(isinstance(o, Delivered) for o in outcomes)
    assert took == 2
