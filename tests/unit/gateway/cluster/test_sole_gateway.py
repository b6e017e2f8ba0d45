"""One gateway in the owners directory (`gateway/cluster/sole_gateway.py`): which of its
partitions other gateways served since, and which it still has to name itself for."""

from __future__ import annotations

from pathlib import Path

from gateway.cluster.sole_gateway import (
    forget_stale_store,
    name_sole_owner,
    served_elsewhere,
    sole_owner,
    unnamed,
)
from tests.support.in_process_gateway import NEXT, RememberingDirectory
from topology.catalog import QueueRecord

ORDERS = QueueRecord("000000000000", "orders", "ab" * 16, 2)
BILLING = QueueRecord("000000000000", "billing", "cd" * 16, 1)


async def test_partitions_nobody_is_named_for_are_named_and_then_not_again() -> None:
    # Given a directory that names nobody
    directory = RememberingDirectory()
    wanted = unnamed(directory, [ORDERS, BILLING], "single")
    assert wanted == [(ORDERS.topic, 0), (ORDERS.topic, 1), (BILLING.topic, 0)]

    # When one gateway names itself for them
    await name_sole_owner(directory, wanted, "single")

    # Then each names it, with no endpoint (nothing is forwarded to it), once
    assert directory.owner(ORDERS.topic, 1) == sole_owner("single")
    assert sole_owner("single").endpoint == ""
    assert unnamed(directory, [ORDERS, BILLING], "single") == []
    assert directory.position == 3


async def test_a_partition_another_gateway_served_last_makes_the_store_stale(
    tmp_path: Path,
) -> None:
    # Given one gateway named for its queues, and a group-mode gateway for one partition since
    directory = RememberingDirectory()
    await name_sole_owner(directory, unnamed(directory, [ORDERS, BILLING], "single"), "single")
    assert served_elsewhere(directory, [ORDERS, BILLING], "single") == 0
    await directory.publish(ORDERS.topic, 1, NEXT)

    # Then that partition is served elsewhere, and the store is removed to be rebuilt
    assert served_elsewhere(directory, [ORDERS, BILLING], "single") == 1
    assert unnamed(directory, [ORDERS], "single") == [(ORDERS.topic, 1)]
    store = tmp_path / "leases"
    (store / "CURRENT").parent.mkdir()
    (store / "CURRENT").write_text("MANIFEST-000001\n")
    forget_stale_store(store, 1)
    assert not store.exists()
    forget_stale_store(store, 1)  # nothing left to remove: no error
