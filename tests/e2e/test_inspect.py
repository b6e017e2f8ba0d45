"""`kqs inspect` against a running gateway: Kafka offsets and lease store state agree."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.common.config import Settings
from tests.support.harness import GatewayProcess, json_client


@pytest.fixture
def own_gateway(kafka_bootstrap: str, tmp_path: Path) -> Iterator[GatewayProcess]:
    process = GatewayProcess(tmp_path / "gateway", kafka_bootstrap)
    process.start()
    yield process
    process.stop()


def _inspect(gateway: GatewayProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "gateway.cli.main",
            "inspect",
            "--data-dir",
            str(gateway.data_dir),
            "--kafka-bootstrap",
            gateway.bootstrap,
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _inspect_json(gateway: GatewayProcess, *args: str) -> dict[str, Any]:
    result = _inspect(gateway, "--json", *args)
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def _until_committed(gateway: GatewayProcess, queue: str, offset: int) -> dict[str, Any]:
    """The report once the gateway has committed `offset` as the ingest group's offset."""
    deadline = time.monotonic() + 20
    while True:
        report = _inspect_json(gateway, "--queue", queue)
        if report["queues"][0]["partitions"][0]["committed_offset"] == offset:
            return report
        assert time.monotonic() < deadline, f"offset {offset} never committed: {report}"
        time.sleep(0.5)


def test_inspect_shows_offsets_state_and_counts(own_gateway: GatewayProcess) -> None:
    # Given a queue with 5 messages sent, 2 received (one of them then deleted) and 1 delayed
    sqs = json_client(own_gateway.endpoint)
    name = f"inspect-{uuid.uuid4().hex[:8]}"
    url = sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "45"})["QueueUrl"]
    sqs.tag_queue(QueueUrl=url, Tags={"team": "ops"})
    empty_name = f"inspect-empty-{uuid.uuid4().hex[:8]}"
    sqs.create_queue(QueueName=empty_name)
    ids = [sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")["MessageId"] for i in range(5)]
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2, VisibilityTimeout=600)
    by_id = {m["MessageId"]: m for m in received["Messages"]}
    assert set(by_id) == set(ids[:2])  # the oldest two: offsets 0 and 1
    sqs.delete_message(QueueUrl=url, ReceiptHandle=by_id[ids[0]]["ReceiptHandle"])
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=600)

    # When inspect runs beside the running gateway (once its backlog commit caught up, and
    # the messages are past their young time: inspect reads only what the store has written)
    time.sleep(Settings().lease_young_ms / 1000 + 0.5)
    report = _until_committed(own_gateway, name, 1)

    # Then Kafka's offsets, the lease store's state and the counts are all there
    assert report["account_id"] == "000000000000"
    assert report["lease_store"] == str(own_gateway.data_dir / "leases")
    [queue] = report["queues"]
    assert queue["name"] == name
    assert queue["url"].endswith(f"/000000000000/{name}")
    assert queue["topic"] == f"kqs.000000000000.{name}.{queue['incarnation']}"
    assert queue["partition_count"] == 1
    assert queue["attributes"]["VisibilityTimeout"] == "45"
    assert queue["attributes"]["QueueArn"] == f"arn:aws:sqs:us-east-1:000000000000:{name}"
    assert queue["tags"] == {"team": "ops"}
    # (encryption as this gateway, which has no master key, reports it, and what it asks)
    assert report["keys"].startswith("none")
    assert queue["attributes"]["SqsManagedSseEnabled"] == "false"
    assert queue["stored_attributes"] == {"SqsManagedSseEnabled": "true"}
    assert queue["counts"] == {"visible": 3, "in_flight": 1, "delayed": 1}
    assert queue["partitions"] == [
        {
            "partition": 0,
            "log_start_offset": 0,
            "log_end_offset": 6,  # 6 records sent
            "committed_offset": 1,  # = backlog start, published by the gateway
            "applied_offset": 5,  # every record ingested
            "backlog_start": 1,  # offset 0 was deleted
            "purged_before_offset": 0,
            "visible": 3,
            "in_flight": 1,
            "delayed": 1,
        }
    ]

    # and without --queue it lists every queue of the account, the empty one included
    everything = _inspect_json(own_gateway)
    listed = {q["name"]: q for q in everything["queues"]}
    assert {name, empty_name} <= set(listed)
    assert listed[empty_name]["counts"] == {"visible": 0, "in_flight": 0, "delayed": 0}
    assert listed[empty_name]["partitions"][0]["log_end_offset"] == 0
    assert listed[empty_name]["partitions"][0]["committed_offset"] is None

    # and the default output is a table with the same figures
    table = _inspect(own_gateway, "--queue", name)
    assert table.returncode == 0, table.stderr
    print(table.stdout)  # noqa: T201 - shows what the table looks like
    assert f"{name}   {queue['url']}" in table.stdout
    assert "3 visible, 1 in flight, 1 delayed" in table.stdout
    assert "log start" in table.stdout and "backlog start" in table.stdout


def test_inspect_after_the_gateway_stopped_and_for_unknown_queues(
    own_gateway: GatewayProcess,
) -> None:
    # Given a queue with two messages, one of them received, and a stopped gateway
    sqs = json_client(own_gateway.endpoint)
    name = f"inspect-stopped-{uuid.uuid4().hex[:8]}"
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    for body in ("a", "b"):
        sqs.send_message(QueueUrl=url, MessageBody=body)
    sqs.receive_message(QueueUrl=url, VisibilityTimeout=600)
    assert own_gateway.terminate() == 0

    # When inspect reads the data directory alone, Then the state is what the gateway left
    [queue] = _inspect_json(own_gateway, "--queue", name)["queues"]
    assert queue["counts"] == {"visible": 1, "in_flight": 1, "delayed": 0}
    assert queue["partitions"][0]["applied_offset"] == 1
    assert queue["partitions"][0]["log_end_offset"] == 2

    # and a queue that does not exist is an error, with exit code 1
    missing = _inspect(own_gateway, "--queue", "no-such-queue")
    assert missing.returncode == 1
    assert "no-such-queue" in missing.stderr
