"""A replay task outlives a SIGKILL of its gateway, and sends no source message twice."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.harness import GatewayProcess
from tests.support.replay import latest_task, replay_client, replayed_origins, wait_until_ended

MESSAGES = 1200
RATE = 300  # a second: the task runs ~4 s


@pytest.fixture
def own_gateway(kafka_bootstrap: str, tmp_path: Path) -> Iterator[GatewayProcess]:
    """A gateway of the test alone, checkpointing its replays every 2 s: a kill between
    two checkpoints leaves records sent since the last, which the next runner must find."""
    gateway = GatewayProcess(
        tmp_path / "gateway", kafka_bootstrap, env={"KQS_REPLAY_CHECKPOINT_S": "2"}
    )
    gateway.start()
    yield gateway
    gateway.stop()


def test_a_replay_task_runs_on_after_a_sigkill_and_replays_nothing_twice(
    own_gateway: GatewayProcess, kafka_bootstrap: str, protocol: str
) -> None:
    # Given a queue of 1200 messages replayed slowly into another queue
    kqs = replay_client(protocol, own_gateway.endpoint)
    source_name, destination_name = (
        f"{p}-{uuid.uuid4().hex[:12]}" for p in ("kill-src", "kill-dst")
    )
    source = kqs.create_queue(QueueName=source_name)["QueueUrl"]
    destination = kqs.create_queue(QueueName=destination_name)["QueueUrl"]
    since_ms = int(time.time() * 1000) - 1000
    for start in range(0, MESSAGES, 10):
        kqs.send_message_batch(
            QueueUrl=source,
            Entries=[{"Id": str(i), "MessageBody": f"m{start + i}"} for i in range(10)],
        )
    kqs.start_message_replay_task(
        QueueUrl=source,
        SinceTimestamp=since_ms,
        DestinationQueueUrl=destination,
        MaxNumberOfMessagesPerSecond=RATE,
    )
    deadline = time.monotonic() + 20
    while latest_task(kqs, source)["ApproximateNumberOfMessagesReplayed"] < RATE * 2:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.5)  # past a batch or two since the last checkpoint

    # When the gateway is SIGKILLed mid-task and started again
    own_gateway.kill()
    own_gateway.start()
    kqs = replay_client(protocol, own_gateway.endpoint)

    # Then the task runs on to the end, and every source record is in the destination once
    task = wait_until_ended(kqs, source, timeout_s=60)
    assert task["Status"] == "COMPLETED", task
    assert task["ApproximateNumberOfMessagesReplayed"] == MESSAGES
    found = replayed_origins(kafka_bootstrap, destination_name)
    assert len(found) == MESSAGES
    assert set(found.values()) == {1}, [k for k, n in found.items() if n > 1][:10]
    assert "message replay task run on" in own_gateway.log_path.read_text()
