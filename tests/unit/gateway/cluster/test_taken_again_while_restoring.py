"""A partition revoked and given back while a restore of this gateway was under way is served
from what its last owner left, not from the copy that restore began with.

A take restores the partitions whose local copy is stale and then serves all it was given.
While it restores (seconds, or longer when Kafka is slow), the group may revoke one of them,
let another gateway serve it (deletes acknowledged there), and give it back: the new
assignment starts a take of its own, which waits for the first. The first must not serve
that partition then: its copy, current when it looked, misses what the other gateway did
(a deleted message back, delivered again). The later take looks again and restores it.
The race is between the event loop's own steps: Kafka's clients are stand-ins, and the
restore itself is replaced by one the test lets finish.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from gateway.cluster.ownership import GroupOwnership
from lease_store.clock import ManualClock
from lease_store.memory import MemoryKeyValueStore
from lease_store.store import LeaseStore
from tests.support.in_process_gateway import (
    T0,
    RememberingDirectory,
    ownership_on_the_loop,
    registry_of,
)
from topology.catalog import QueueRecord
from topology.ingest import Partitions
from topology.owners import Owner
from topology.standins import Log

QUEUE = QueueRecord("000000000000", "orders", "ab" * 16, 2)
ELSEWHERE = Owner("gateway-elsewhere", "http://127.0.0.1:2")
P0 = (QUEUE.topic, 0)
P1 = (QUEUE.topic, 1)


class HeldRestores:
    """Stands in for `GroupOwnership._restore`: notes what it restores; the first one waits
    until the test lets it finish."""

    def __init__(self) -> None:
        self.restored: list[Partitions] = []
        self.first_may_finish = asyncio.Event()

    async def __call__(self, partitions: Partitions) -> None:
        first = not self.restored
        self.restored.append(sorted(partitions))
        if first:
            await self.first_may_finish.wait()


async def until(condition: Callable[[], object], what: str) -> None:
    for _ in range(200):  # bounded: a few loop turns
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError(what)


async def test_a_partition_given_back_during_a_restore_is_restored_again() -> None:
    # Given a gateway taking two partitions: P0 it served last (current), P1 another gateway
    # did (stale, restored first)
    directory = RememberingDirectory()
    ownership = ownership_of_the_queue(directory)
    directory._owners[P1] = ELSEWHERE
    restores = HeldRestores()
    ownership._restore = restores  # type: ignore[method-assign]
    ownership.assigned([P0, P1])
    await until(lambda: restores.restored, "restore not begun")

    # When, while P1 is restored, P0 is revoked, served elsewhere and given back
    await asyncio.to_thread(ownership.revoked, [P0])
    directory._owners[P0] = ELSEWHERE
    ownership.assigned([P0])
    await asyncio.sleep(0)
    restores.first_may_finish.set()
    await until(lambda: ownership.serves(*P0) and ownership.serves(*P1), "not served")
    await asyncio.gather(*ownership._tasks)  # the later take done too

    # Then P0 was restored from what the other gateway left before being served again
    assert restores.restored == [[P1], [P0]]


def ownership_of_the_queue(directory: RememberingDirectory) -> GroupOwnership:
    log = Log()
    return ownership_on_the_loop(
        registry_of(QUEUE, log),
        directory,
        LeaseStore(MemoryKeyValueStore()),
        ManualClock(T0),
        log,
    )
