"""A partition revoked while its new owner's directory record is on its way is released only
once that record is in `__kqs_owners`, so the next owner's record comes after it and wins
(else every gateway would forward the partition's requests to one that no longer serves it).
A shutdown during a restore stops the rebuild thread before the lease store closes.
"""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest

import gateway.cluster.ownership
from lease_store.kv import KeyValueStore
from lease_store.rebuild import RebuildStats
from tests.support.in_process_gateway import (
    ME,
    QUEUE,
    RememberingDirectory,
    gateway_serving_the_queue,
)
from topology.catalog import QueueRecord
from topology.owners import Owner
from topology.rebuild import RebuildStopped, RebuildTarget

TWO_PARTITIONS = QueueRecord("000000000000", "pair", "cd" * 16, 2)


class HeldDirectory(RememberingDirectory):
    """Publishes only once the test lets it."""

    def __init__(self) -> None:
        super().__init__()
        self.held = asyncio.Event()
        self.let_through = asyncio.Event()
        self.published: list[tuple[str, int]] = []

    async def publish(self, topic: str, partition: int, owner: Owner) -> int:
        self.held.set()
        await self.let_through.wait()
        offset = await super().publish(topic, partition, owner)
        self.published.append((topic, partition))
        return offset


async def test_a_revocation_during_the_directory_record_waits_for_it() -> None:
    # Given a partition being taken, its directory record on its way
    directory = HeldDirectory()
    _, ownership = await gateway_serving_the_queue(directory, served=False)
    ownership.assigned([(QUEUE.topic, 0)])
    await asyncio.wait_for(directory.held.wait(), 5)

    # When the group revokes it meanwhile (on the ingest thread, which waits for the release)
    revoking = asyncio.ensure_future(asyncio.to_thread(ownership.revoked, [(QUEUE.topic, 0)]))
    await asyncio.sleep(0.1)

    # Then the release waits for the record, and the partition is not served afterwards
    assert not revoking.done()
    directory.let_through.set()
    await asyncio.wait_for(revoking, 5)
    assert directory.published == [(QUEUE.topic, 0)]
    assert directory.owner(QUEUE.topic, 0) == ME
    assert not ownership.serves(QUEUE.topic, 0)


class BlockingRebuild:
    """Stands in for `rebuild_leases`: writes until told to stop, as a long restore does."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.stopped_by_event = False
        self.returned = threading.Event()

    def __call__(
        self,
        bootstrap: str,
        kv: KeyValueStore,
        targets: list[RebuildTarget],
        now_ms: int,
        stop: threading.Event | None = None,
    ) -> RebuildStats:
        try:
            self.started.set()
            self.stopped_by_event = (stop or threading.Event()).wait(10)
            raise RebuildStopped("stopped")
        finally:
            self.returned.set()


async def test_a_shutdown_during_a_restore_waits_for_the_rebuild_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a partition last served by another gateway, so that taking it restores it
    directory = RememberingDirectory()
    await directory.publish(QUEUE.topic, 0, Owner("gateway-there", "http://127.0.0.1:2"))
    rebuild = BlockingRebuild()
    monkeypatch.setattr(gateway.cluster.ownership, "rebuild_leases", rebuild)
    _, ownership = await gateway_serving_the_queue(directory, served=False)
    ownership.assigned([(QUEUE.topic, 0)])
    assert await asyncio.to_thread(rebuild.started.wait, 5)

    # When the gateway shuts down while the rebuild thread runs
    await asyncio.wait_for(ownership.release_all(), 15)

    # Then the thread was told to stop and had returned before the release ended (the lease
    # store closes next), and the partition is not served
    assert rebuild.stopped_by_event
    assert rebuild.returned.is_set()
    assert not ownership.serves(QUEUE.topic, 0)


class HeldEndDirectory(RememberingDirectory):
    """Answers where `__kqs_owners` ends only once the test lets it (a take waits there)."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = asyncio.Event()
        self.let_through = asyncio.Event()

    async def end_offset(self) -> int:
        self.asked.set()
        await self.let_through.wait()
        return await super().end_offset()


async def test_a_take_logs_the_partitions_it_served_not_those_revoked_meanwhile(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given two partitions being taken, the take waiting for the directory
    caplog.set_level(logging.INFO, logger="kqs.ownership")
    directory = HeldEndDirectory()
    _, ownership = await gateway_serving_the_queue(directory, served=False, queue=TWO_PARTITIONS)
    ownership.assigned([(TWO_PARTITIONS.topic, 0), (TWO_PARTITIONS.topic, 1)])
    await asyncio.wait_for(directory.asked.wait(), 5)

    # When the group revokes one of them meanwhile, and the take goes on
    await asyncio.to_thread(ownership.revoked, [(TWO_PARTITIONS.topic, 1)])
    directory.let_through.set()
    served = [r for r in caplog.records if r.getMessage() == "partitions served"]
    for _ in range(100):  # bounded: a few loop turns
        if served:
            break
        await asyncio.sleep(0)
        served = [r for r in caplog.records if r.getMessage() == "partitions served"]

    # Then only the one it kept is served, and the log says one
    assert ownership.serves(TWO_PARTITIONS.topic, 0)
    assert not ownership.serves(TWO_PARTITIONS.topic, 1)
    assert [r.__dict__["partitions"] for r in served] == [1]
