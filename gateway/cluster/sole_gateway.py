"""One gateway (`KQS_PARTITION_OWNERSHIP=all`) in the owners directory, so that its lease
state is never mistaken for a store nobody had, in either direction.

A group-mode gateway trusts its local copy of a partition that nobody is named for in
`__kqs_owners` (`GroupOwnership._sort`: a partition never served). One gateway serves every
partition without the group, so unless it says so, gateways started in group mode on a
cluster it served would serve its queues from empty copies: every deleted message back. And
one gateway trusts its own store at start, so one restarted on a cluster that group-mode
gateways served since would serve what they changed from its old copy.

So one gateway names itself (no endpoint: nobody forwards to it) for every partition before
it serves, and for every queue created while it runs; at start, a partition the directory
names another gateway for means its store is older than the changelog, and it is rebuilt
from the changelog and the queue topics (as when the store is lost). Group-mode gateways
then restore what it served from the changelog, which holds all but the changes of its last
moments when it was killed (docs/architecture/cluster.md).

Independent single gateways on one cluster (`KQS_SHARED_CLUSTER=warn`, each with queues of
its own) skip all of this: none of them serves the others' queues' state.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from confluent_kafka import KafkaException

from lease_store.keys import PartitionKey
from topology.catalog import QueueRecord, partition_keys
from topology.changelog import epoch_of
from topology.owners import Owner, OwnersDirectory
from topology.producer import ProduceFailed

log = logging.getLogger("kqs.ownership")


def sole_owner(gateway_id: str) -> Owner:
    """How one gateway is named: no endpoint, as nothing is forwarded to it."""
    return Owner(gateway_id, "")


def served_elsewhere(
    directory: OwnersDirectory, records: Iterable[QueueRecord], gateway_id: str
) -> int:
    """How many partitions of these queues the directory names another gateway for."""
    return sum(
        1
        for record in records
        for pk in partition_keys(record)
        if (owner := directory.owner(record.topic, pk.partition)) is not None
        and owner.gateway != gateway_id
    )


def forget_stale_store(lease_dir: Path, elsewhere: int) -> None:
    """Remove a lease store that other gateways' changes have overtaken: the store is then
    rebuilt from the changelog. Until this gateway names itself again (after the rebuild),
    the next start finds the same and does the same."""
    if not lease_dir.exists():
        return
    log.warning(
        "other gateways served this gateway's queues since it last ran: its lease store is "
        "rebuilt from the changelog",
        extra={"partitions": elsewhere, "lease_dir": str(lease_dir)},
    )
    shutil.rmtree(lease_dir)


def unnamed(
    directory: OwnersDirectory, records: Iterable[QueueRecord], gateway_id: str
) -> list[tuple[str, int]]:
    """The partitions of `records` the directory does not name this gateway for."""
    me = sole_owner(gateway_id)
    return [
        (record.topic, pk.partition)
        for record in records
        for pk in partition_keys(record)
        if directory.owner(record.topic, pk.partition) != me
    ]


async def name_sole_owner(
    directory: OwnersDirectory,
    partitions: list[tuple[str, int]],
    gateway_id: str,
    wait: bool = True,
) -> None:
    """Name this gateway for these partitions (each record acknowledged). `wait=False`: in
    the background, a failure is logged, not raised (a new queue's naming)."""
    me = sole_owner(gateway_id)
    try:
        await asyncio.gather(*(directory.publish(topic, p, me) for topic, p in partitions))
    except (ProduceFailed, KafkaException) as exc:
        if wait:
            raise
        log.warning(
            "not named in the owners directory: group-mode gateways started after this one "
            "would not restore these partitions from the changelog",
            extra={"partitions": len(partitions), "error": str(exc)},
        )
        return
    if partitions:
        log.info("named in the owners directory", extra={"partitions": len(partitions)})


def claim_epochs(
    directory: OwnersDirectory,
    records: Iterable[QueueRecord],
    gateway_id: str,
    write_as: Callable[[PartitionKey, int], None],
) -> None:
    """Publish the lease changes of the partitions the directory names this gateway for
    under the epoch of that record (`topology/changelog.py`), as a group-mode owner does:
    a restore by the gateways that come after it weighs them against theirs by epoch."""
    me = sole_owner(gateway_id)
    for record in records:
        for pk in partition_keys(record):
            if directory.owner(record.topic, pk.partition) == me:
                write_as(pk, epoch_of(directory.version(record.topic, pk.partition)))


async def name_new_queue(
    directory: OwnersDirectory,
    record: QueueRecord,
    partitions: list[tuple[str, int]],
    gateway_id: str,
    write_as: Callable[[PartitionKey, int], None],
) -> None:
    """A queue created while this gateway runs: named in the background, its lease changes
    published under that record's epoch once named (before: epoch 0, which nothing older
    of a new queue outranks)."""
    await name_sole_owner(directory, partitions, gateway_id, wait=False)
    claim_epochs(directory, [record], gateway_id, write_as)
