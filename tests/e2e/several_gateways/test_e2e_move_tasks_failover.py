"""A message move task outlives its home gateway: two group-mode gateways of each test alone
(on this module's own broker, so that no other gateway is in their group), both protocols.
The home of a running task stops; the other gateway becomes the DLQ's home and runs the task
on from what `__kqs_move_tasks` says."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.support.group_mode import receive_all
from tests.support.harness import client_for, gateway_pair
from tests.support.harness import visible_and_in_flight as counts
from tests.support.move_tasks import (
    PARTITIONS,
    SECRET,
    a_dead_letter_queue_on_both_gateways,
    arn_of,
    eventually,
    home_and_other,
    latest_once,
    tasks_through,
)


@pytest.fixture(scope="module")
def kafka_bootstrap(own_kafka_bootstrap: str) -> str:
    return own_kafka_bootstrap


def test_a_running_task_runs_on_at_the_next_home_when_its_home_stops(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory, protocol: str
) -> None:
    # Given a pair of gateways of this test alone, and a slow task (two messages a second)
    # over ten messages on both DLQ partitions, started through the home, that has moved some
    with gateway_pair(tmp_path_factory.mktemp, kafka_bootstrap, SECRET, PARTITIONS) as pair:
        clients = [client_for(protocol, g.endpoint) for g in pair]
        bodies = [f"carried-{i}" for i in range(10)]
        dlq, topic, source = a_dead_letter_queue_on_both_gateways(
            pair, clients, kafka_bootstrap, bodies
        )
        home, other = home_and_other(pair, kafka_bootstrap, topic)
        handle = clients[home].start_message_move_task(
            SourceArn=arn_of(dlq), MaxNumberOfMessagesPerSecond=2
        )["TaskHandle"]

        def moving() -> dict[str, Any] | None:
            latest = tasks_through(clients[other], dlq)[0]
            return latest if latest["ApproximateNumberOfMessagesMoved"] >= 2 else None

        eventually(moving, "messages moved")

        # When the home stops (SIGTERM), leaving the queue's partitions to the other gateway
        assert pair[home].terminate() == 0

        # Then the other gateway, the new home, runs the task on to its end: every message is
        # moved back to its source exactly once, and the task is listed with its handle until
        # it completes
        def listed() -> dict[str, Any] | None:
            try:
                found = tasks_through(clients[other], dlq)
            except ClientError:
                return None  # the partitions still moving
            return found[0] if found else None

        carried = eventually(listed, "the task listed by the new home")
        assert carried["Status"] == "COMPLETED" or carried["TaskHandle"] == handle
        done = latest_once(clients[other], dlq, "COMPLETED")
        assert done["ApproximateNumberOfMessagesMoved"] == 10
        assert counts(clients[other], dlq) == (0, 0)
        got = receive_all([clients[other]], source, 10)
        assert sorted(got) == sorted(bodies)
        assert all(len(handles) == 1 for handles in got.values()), got
