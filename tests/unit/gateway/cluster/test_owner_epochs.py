"""Which owner epoch a gateway publishes a partition's lease changes under
(`topology/changelog.py`): the one of its own latest record in `__kqs_owners`, set before it
serves the partition, for a group-mode take and for one gateway naming itself."""

from __future__ import annotations

import asyncio

from gateway.cluster.sole_gateway import claim_epochs, name_sole_owner
from lease_store.clock import ManualClock
from lease_store.keys import PartitionKey
from lease_store.memory import MemoryKeyValueStore
from lease_store.store import LeaseStore
from tests.support.in_process_gateway import (
    QUEUE,
    T0,
    RememberingDirectory,
    ownership_on_the_loop,
    registry_of,
    take,
)
from topology.catalog import partition_keys
from topology.standins import Log

PK = partition_keys(QUEUE)[0]


async def test_each_take_publishes_under_the_epoch_of_its_own_directory_record() -> None:
    # Given a directory whose next record lands at offset 7
    directory = RememberingDirectory()
    directory.position = 7
    epochs: list[tuple[PartitionKey, int]] = []
    log = Log()
    ownership = ownership_on_the_loop(
        registry_of(QUEUE, log),
        directory,
        LeaseStore(MemoryKeyValueStore()),
        ManualClock(T0),
        log,
        write_as=lambda pk, epoch: epochs.append((pk, epoch)),
    )
    # When the partition is taken, released, and taken again
    await take(ownership)
    assert epochs == [(PK, 8)]  # set before it was served
    await asyncio.to_thread(ownership.revoked, [(QUEUE.topic, 0)])
    await take(ownership)
    # Then each take publishes under the epoch of its own record (offset + 1)
    assert epochs == [(PK, 8), (PK, 9)]


async def test_one_gateway_publishes_under_the_epoch_of_the_record_naming_it() -> None:
    # Given a directory naming another gateway for the queue's partition, at offset 2
    directory = RememberingDirectory()
    directory.position = 2
    await name_sole_owner(directory, [(QUEUE.topic, 0)], "another-gateway")
    epochs: list[tuple[PartitionKey, int]] = []

    def write_as(pk: PartitionKey, epoch: int) -> None:
        epochs.append((pk, epoch))

    # When this gateway claims epochs before naming itself, and after
    claim_epochs(directory, [QUEUE], "this-gateway", write_as)
    assert epochs == []  # not named: nothing outranks the other gateway's word yet
    await name_sole_owner(directory, [(QUEUE.topic, 0)], "this-gateway")
    claim_epochs(directory, [QUEUE], "this-gateway", write_as)
    # Then it publishes under its own record's epoch
    assert epochs == [(PK, 4)]
