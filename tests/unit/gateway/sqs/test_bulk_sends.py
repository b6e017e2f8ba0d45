"""Which producer a standard queue's send joins on a crowded gateway.

The bulk and fill producers linger for fuller produce requests; sends to a queue whose
consumers are waiting for messages skip them, sends to a queue nobody receives from join the
fill producer, the rest the bulk one (`MessageService._linger_for`). These tests drive a real
`MessageService` on the event loop with an injected clock; only Kafka's producer is a
stand-in (`bench/micro/standins.py`) that notes each record's choice.
"""

from __future__ import annotations

import asyncio
from typing import Any

from gateway.sqs.messages.send import WANTED_FOR_MS
from gateway.sqs.messages.service import MessageService
from gateway.sqs.waiters import QueueSignals
from lease_store.clock import ManualClock
from lease_store.handles import ReceiptHandleCodec
from lease_store.memory import MemoryKeyValueStore
from lease_store.records import StoredMessage
from lease_store.store import LeaseStore
from tests.support.in_process_gateway import T0, registry_of
from topology.catalog import QueueRecord
from topology.producer import Delivered, Linger
from topology.standins import InstantProducer, Log

ORDERS = QueueRecord("000000000000", "orders", "ab" * 16, 1)
AUDIT = QueueRecord("000000000000", "audit", "cd" * 16, 1)
EVENTS_FIFO = QueueRecord("000000000000", "events.fifo", "ef" * 16, 1, {"FifoQueue": "true"})


class CrowdedProducer(InstantProducer):
    """Acknowledges at once, yet reports the gateway crowded; notes each record's choice."""

    def __init__(self, log: Log) -> None:
        super().__init__(log)
        self.choices: list[tuple[str, Linger]] = []

    def crowded(self) -> bool:
        return True

    def start(self, topic: str, *args: Any, **kwargs: Any) -> asyncio.Future[Delivered]:
        self.choices.append((topic, kwargs.get("linger", Linger.PROMPT)))
        return super().start(topic, *args, **kwargs)


def gateway(clock: ManualClock, signals: QueueSignals) -> tuple[MessageService, CrowdedProducer]:
    log = Log()
    producer = CrowdedProducer(log)
    registry = registry_of(ORDERS, log)
    registry.apply(AUDIT, 1)
    registry.apply(EVENTS_FIFO, 2)
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


async def test_sends_skip_the_linger_while_a_receive_recently_found_the_queue_empty() -> None:
    clock = ManualClock(T0)
    messages, producer = gateway(clock, QueueSignals())

    # Given a crowded gateway and a queue nobody has received from: its sends fill it
    await messages.send(ORDERS, message(1, clock))
    # When a short poll finds the queue empty (its one message taken first)
    assert len(await messages.receive(ORDERS, 10, 30, 0)) == 1
    assert await messages.receive(ORDERS, 10, 30, 0) == []
    # Then the next sends to it skip the linger (a batch makes one choice), while sends to
    # another queue nobody receives from join the fill producer
    await messages.send_many(ORDERS, [message(2, clock), message(3, clock)])
    await messages.send(AUDIT, message(4, clock))
    # And once no receive has found it empty for the whole window, but its consumer still
    # takes messages, they join the bulk producer
    clock.advance(WANTED_FOR_MS)
    assert len(await messages.receive(ORDERS, 10, 30, 0)) == 2
    await messages.send(ORDERS, message(5, clock))
    # And once nobody has received from it for the whole window, the fill producer again
    clock.advance(WANTED_FOR_MS)
    await messages.send(ORDERS, message(6, clock))

    assert producer.choices == [
        (ORDERS.topic, Linger.FILL),
        (ORDERS.topic, Linger.PROMPT),
        (ORDERS.topic, Linger.PROMPT),
        (AUDIT.topic, Linger.FILL),
        (ORDERS.topic, Linger.BULK),
        (ORDERS.topic, Linger.FILL),
    ]


async def test_a_fifo_queues_sends_always_join_the_prompt_producer() -> None:
    clock = ManualClock(T0)
    messages, producer = gateway(clock, QueueSignals())

    # Given a crowded gateway and a FIFO queue nobody has received from
    # When messages of a group are sent to it
    await messages.send_many(
        EVENTS_FIFO,
        [
            StoredMessage(f"f-{n}", b"body", sent_ms=clock.now_ms(), message_group_id="g")
            for n in range(2)
        ],
    )

    # Then they skipped the fill producer: a group's records keep their order in one producer
    assert producer.choices == [(EVENTS_FIFO.topic, Linger.PROMPT)] * 2


async def test_sends_skip_the_linger_while_a_long_poll_is_parked_on_the_queue() -> None:
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

    # Then it skipped the linger, and the parked receive got it
    assert producer.choices == [(ORDERS.topic, Linger.PROMPT)]
    [received] = await asyncio.wait_for(parked, 5)
    assert received.delivery.message.message_id == "m-1"
