"""A replay task's send pipeline (gateway/sqs/replay/pipeline.py): batches settle oldest
first, the positions cover only a run of acknowledged batches, and a checkpoint's marks wait
for every batch sent before they were read."""

from __future__ import annotations

import asyncio

import pytest

from gateway.sqs.replay.pipeline import SendPipeline
from lease_store.records import StoredMessage
from topology.log_reader import LoggedMessage


def records(partition: int, *offsets: int) -> list[LoggedMessage]:
    message = StoredMessage(message_id="m", body=b"x", sent_ms=0, delay_s=0)
    return [LoggedMessage(partition, offset, message) for offset in offsets]


class Settled:
    """What the pipeline reported settled: the task's positions and count."""

    def __init__(self) -> None:
        self.positions: dict[int, int] = {}
        self.sent = 0

    def __call__(self, batch: list[LoggedMessage], sent: int) -> None:
        for logged in batch:
            self.positions[logged.partition] = logged.offset + 1
        self.sent += sent


async def test_batches_settle_oldest_first_and_add_waits_for_room() -> None:
    # Given a pipeline of two with a batch on its way
    settled = Settled()
    pipeline = SendPipeline(2, settled)
    loop = asyncio.get_running_loop()
    acks = [loop.create_future() for _ in range(3)]
    await pipeline.add(acks[0], records(0, 0, 1), 2)
    assert len(pipeline) == 1

    # When a second is added, it waits for room: the oldest's acknowledgement
    second = asyncio.ensure_future(pipeline.add(acks[1], records(0, 2), 1))
    await asyncio.sleep(0)
    assert not second.done()

    # Then the newest acknowledged first settles nothing; the oldest settles it alone
    acks[1].set_result(None)
    await asyncio.sleep(0)
    assert settled.positions == {} and not second.done()
    acks[0].set_result(None)
    await second
    assert settled.positions == {0: 2} and settled.sent == 2
    assert len(pipeline) == 1

    # And settling all reports the rest in order
    await pipeline.add(acks[2], records(1, 0), 1)  # room: the second settles on the way
    acks[2].set_result(None)
    await pipeline.settle()
    assert settled.positions == {0: 3, 1: 1} and settled.sent == 4
    assert len(pipeline) == 0


async def test_a_checkpoint_is_due_once_every_batch_sent_before_its_marks_is_settled() -> None:
    settled = Settled()
    pipeline = SendPipeline(4, settled)
    loop = asyncio.get_running_loop()
    first, second = loop.create_future(), loop.create_future()
    await pipeline.add(first, records(0, 0), 1)
    pipeline.mark({0: 10})  # read with the first batch on its way
    await pipeline.add(second, records(0, 1), 1)
    assert pipeline.due_checkpoint() is None
    second.set_result(None)
    await asyncio.sleep(0)
    assert pipeline.due_checkpoint() is None  # the first is not settled yet
    first.set_result(None)
    await pipeline.settle()
    assert pipeline.due_checkpoint() == {0: 10}
    assert pipeline.due_checkpoint() is None  # once per mark


async def test_abandon_settles_up_to_the_first_failure_and_waits_for_the_rest() -> None:
    settled = Settled()
    pipeline = SendPipeline(4, settled)
    loop = asyncio.get_running_loop()
    acks = [loop.create_future() for _ in range(3)]
    for i, ack in enumerate(acks):
        await pipeline.add(ack, records(0, i), 1)
    acks[0].set_result(None)
    acks[1].set_exception(RuntimeError("not acknowledged"))
    acks[2].set_result(None)
    with pytest.raises(RuntimeError):
        await pipeline.settle()
    await pipeline.abandon()
    assert settled.positions == {0: 1} and settled.sent == 1  # not past the failed batch
    assert len(pipeline) == 0


async def test_checkpoints_keep_up_while_batches_stay_on_their_way() -> None:
    # Given a pipeline of four, marks read with a batch on its way, and later marks
    settled = Settled()
    pipeline = SendPipeline(4, settled)
    loop = asyncio.get_running_loop()
    first, second = loop.create_future(), loop.create_future()
    await pipeline.add(first, records(0, 0), 1)
    pipeline.mark({0: 10})
    await pipeline.add(second, records(0, 1), 1)
    assert not pipeline.wants_marks()
    pipeline.mark({0: 20})  # ignored: the first marks wait for their checkpoint

    # When the first batch is acknowledged, no other being added
    first.set_result(None)
    await asyncio.sleep(0)

    # Then it is settled and the first marks' checkpoint is due
    assert pipeline.due_checkpoint() == {0: 10}
    assert settled.positions == {0: 1} and len(pipeline) == 1
    assert pipeline.wants_marks()
