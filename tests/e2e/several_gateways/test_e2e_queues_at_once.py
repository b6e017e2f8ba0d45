"""Queues created and used at once through several gateways deliver no message twice inside
its lease and lose none (issue 55).

A new queue's partitions are shared out between the gateways while its first messages are
sent and received: a record must be applied by one gateway only, in one spell of owning its
partition. Each run alternates the two protocols over its queues (`queues_at_once.py`); the
visibility timeout (300 s) outlasts the run, and nothing is deleted, so any second delivery
is one inside a lease. Sizes: `KQS_AT_ONCE_QUEUES` x `KQS_AT_ONCE_MESSAGES` (the issue's
measurement: 24 x 40).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.harness import GatewayProcess, free_port
from tests.support.queues_at_once import use_queues_at_once

# Opt-in (KQS_AT_ONCE_TEST=1): on df5905c it did not reproduce the double delivery it was written
# for (2 runs of 24 x 40), and test_group_check.py runs the same use of queues at once
# through two group-mode gateways in every run; this one adds ~45 s of `--workers 2` to CI.
pytestmark = pytest.mark.skipif(
    os.environ.get("KQS_AT_ONCE_TEST") != "1",
    reason="set KQS_AT_ONCE_TEST=1 (kqs serve --workers 2 with queues created and used at once)",
)

QUEUES = int(os.environ.get("KQS_AT_ONCE_QUEUES", "8"))
MESSAGES = int(os.environ.get("KQS_AT_ONCE_MESSAGES", "10"))
PARTITIONS = 4


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[GatewayProcess]:
    """`kqs serve --workers 2` on its own data directory and embedded broker."""
    supervisor = GatewayProcess(
        tmp_path / "data",
        "",
        env={
            "KQS_KAFKA_PORT": str(free_port()),
            "KQS_KAFKA_CONTROLLER_PORT": str(free_port()),
            "KQS_PARTITIONS": str(PARTITIONS),
        },
        args=("--workers", "2"),
    )
    supervisor.start(timeout_s=120)
    yield supervisor
    supervisor.stop()


def test_workers_deliver_nothing_twice_inside_its_lease(workers: GatewayProcess) -> None:
    outcome = use_queues_at_once([workers.endpoint], QUEUES, MESSAGES, prefix="workers")
    assert outcome.twice == 0 and not outcome.missing, outcome.report()
