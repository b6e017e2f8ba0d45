"""Which producer a standard queue's send joins on a crowded gateway.

The bulk producer lingers for fuller produce requests; sends to a queue whose consumers are
waiting for messages skip it (`MessageService._bulk_for`). These tests drive a real
`MessageService` on the event loop with an injected clock; only Kafka's producer is a
stand-in (`bench/micro/standins.py`) that notes each record's `bulk` choice.
"""

from __future__ import annotations

import asyncio
from typing import Any

from bench.micro.standins import InstantProducer, Log
from gateway.messages import WANTED_FOR_MS, MessageService
from gateway.waiters import QueueSignals
from lease_store.clock import ManualClock
from lease_store.handles import ReceiptHandleCodec
from lease_store.memory import MemoryKeyValueStore
from lease_store.records import StoredMessage
from lease_store.store import LeaseStore
from tests.test_moved_while_confirming import T0, registry_of
from topology.catalog import QueueRecord
from topology.producer import Delivered

ORDERS = QueueRecord("000000000000", "orders", "ab" * 16, 1)
AUDIT = QueueRecord("000000000000", "audit", "cd" * 16, 1)


class CrowdedProducer(InstantProducer):
    """Acknowledges at once, yet reports the gateway crowded; notes each record's choice."""

    def __init__(self, log: Log) -> None:
        super().__init__(log)
        self.bulk_choices: list[tuple[str, bool]] = []

    def crowded(self) -> bool:
        return True

    def start(self, topic: str, *args: Any, **kwargs: Any) -> asyncio.Future[Delivered]:
        self.bulk_choices.append((topic, bool(kwargs.get("bulk", False))))
        return super().start(topic, *args, **kwargs)


def gateway(clock: ManualClock, signals: QueueSignals) -> tuple[MessageService, CrowdedProducer]:
    log = Log()
    producer = CrowdedProducer(log)
    registry = registry_of(ORDERS, log)
    registry.apply(AUDIT, 1)
    messages = MessageService(
        clock,
        producer,
        LeaseStore(MemoryKeyValueStore()),
        registry,
        signals,
        ReceiptHandleCodec(b"a receipt handle secret"),
        "us-east-1",
    )
    return messages, producer


def message(n: int, clock: ManualClock) -> StoredMessage:
    return StoredMessage(f"m-{n}", b"body", sent_ms=clock.now_ms())


async def test_sends_skip_the_bulk_producer_while_a_receive_recently_found_the_queue_empty() -> (
    None
):
    clock = ManualClock(T0)
    messages, producer = gateway(clock, QueueSignals())

    # Given a crowded gateway and a queue nobody has received from
    await messages.send(ORDERS, message(1, clock))
    # When a short poll finds the queue empty (its one message taken first)
    assert len(await messages.receive(ORDERS, 10, 30, 0)) == 1
    assert await messages.receive(ORDERS, 10, 30, 0) == []
    # Then the next sends to it skip the bulk producer (a batch makes one choice), while
    # sends to another queue still join it
    await messages.send_many(ORDERS, [message(2, clock), message(3, clock)])
    await messages.send(AUDIT, message(4, clock))
    # And once no receive has found it empty for the whole window, they join it again
    clock.advance(WANTED_FOR_MS)
    await messages.send(ORDERS, message(5, clock))

    assert producer.bulk_choices == [
        (ORDERS.topic, True),
        (ORDERS.topic, False),
        (ORDERS.topic, False),
        (AUDIT.topic, True),
        (ORDERS.topic, True),
    ]


async def test_sends_skip_the_bulk_producer_while_a_long_poll_is_parked_on_the_queue() -> None:
    clock = ManualClock(T0)
    signals = QueueSignals()
    messages, producer = gateway(clock, signals)

    # Given a long poll parked on the queue, its first look older than the window
    parked = asyncio.create_task(messages.receive(ORDERS, 1, 30, 20))
    for _ in range(100):  # bounded: a few loop turns
        if signals.waiting(ORDERS.key):
            break
        await asyncio.sleep(0)
    clock.advance(WANTED_FOR_MS)
    # When a message is sent to the queue
    await messages.send(ORDERS, message(1, clock))

    # Then it skipped the bulk producer, and the parked receive got it
    assert producer.bulk_choices == [(ORDERS.topic, False)]
    [received] = await asyncio.wait_for(parked, 5)
    assert received.delivery.message.message_id == "m-1"
