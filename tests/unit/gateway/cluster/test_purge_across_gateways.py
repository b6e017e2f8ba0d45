"""PurgeQueue with the queue's partitions served by other gateways: a purge that failed
there does not hold back the client's retry, and a partition that moved while it was purged
is purged where it went. A real `MessageService` and `GroupOwnership` on the event loop; the
other gateways are `AnsweringForwarder`'s answers."""

from __future__ import annotations

import asyncio

import pytest

from gateway.cluster.ownership import GroupOwnership
from gateway.common.errors import OwnerGone, PurgeQueueInProgress, ServiceUnavailable
from gateway.sqs.messages.service import MessageService
from tests.support.in_process_gateway import (
    NEXT,
    QUEUE,
    AnsweringForwarder,
    RememberingDirectory,
    gateway_serving_the_queue,
)
from topology.owners import Owner

THIRD = Owner("gateway-third", "http://127.0.0.1:3")


async def served_by(
    owner: Owner, forwarder: AnsweringForwarder
) -> tuple[MessageService, GroupOwnership, RememberingDirectory]:
    """A gateway on which partition 0 of `QUEUE` is served by `owner`."""
    directory = RememberingDirectory()
    messages, ownership = await gateway_serving_the_queue(
        directory, served=False, forwarder=forwarder
    )
    await directory.publish(QUEUE.topic, 0, owner)
    ownership.directory_changed()
    return messages, ownership, directory


async def test_a_purge_that_failed_at_another_gateway_may_be_retried_at_once() -> None:
    # Given a queue whose partition another gateway serves, which fails the first purge
    forwarder = AnsweringForwarder({NEXT: ServiceUnavailable("Kafka did not answer")})
    messages, _, _ = await served_by(NEXT, forwarder)
    with pytest.raises(ServiceUnavailable):
        await messages.purge(QUEUE)

    # When the client retries it at once (as every SDK retries a 503)
    del forwarder.answers[NEXT]
    await messages.purge(QUEUE)

    # Then the retry purged (it was not refused as a purge in progress), and only a purge
    # that succeeded holds the next one back for 60 s
    assert [call[0] for call in forwarder.calls] == ["purge", "purge"]
    with pytest.raises(PurgeQueueInProgress):
        await messages.purge(QUEUE)


async def test_a_partition_that_moved_while_purged_is_purged_where_it_went() -> None:
    # Given a queue whose partition another gateway serves, which lets it go as the purge
    # reaches it (a rebalance)
    forwarder = AnsweringForwarder({NEXT: OwnerGone("the partition moved", NEXT)})
    messages, ownership, directory = await served_by(NEXT, forwarder)

    # When the purge runs and the partition's next owner publishes itself meanwhile
    purging = asyncio.create_task(messages.purge(QUEUE))
    await asyncio.sleep(0.1)
    await directory.publish(QUEUE.topic, 0, THIRD)
    ownership.directory_changed()
    await asyncio.wait_for(purging, 5)

    # Then the purge succeeded, made at the next owner (the client is not told to retry)
    assert [(call[0], call[1]) for call in forwarder.calls] == [("purge", NEXT), ("purge", THIRD)]
