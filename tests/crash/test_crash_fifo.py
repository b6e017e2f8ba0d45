"""Crash suite, FIFO workload: SIGKILL the gateway, then the Kafka broker, under FIFO load,
and account for every message, every group's order and every deduplicated retry (see
`tests/support/crash_workload_fifo.py`). Sizes as in `test_crash.py` (`KQS_CRASH_SIZE`)."""

from __future__ import annotations

import random
import time
import uuid
from pathlib import Path

import pytest

from tests.support.crash_suite import SIZE, assert_empty, report, wait_until_empty
from tests.support.crash_workload_fifo import VISIBILITY_TIMEOUT_S, FifoVerdict, FifoWorkload
from tests.support.harness import GatewayProcess, free_port, json_client
from topology.embedded import broker


def _fifo_queues(endpoint: str, count: int) -> list[str]:
    sqs = json_client(endpoint)
    return [
        sqs.create_queue(
            QueueName=f"crashfifo-{i}-{uuid.uuid4().hex[:8]}.fifo",
            Attributes={"FifoQueue": "true", "VisibilityTimeout": str(VISIBILITY_TIMEOUT_S)},
        )["QueueUrl"]
        for i in range(count)
    ]


def _finish(workload: FifoWorkload, endpoint: str, urls: list[str], cycles: str) -> None:
    workload.stop_producing()
    workload.drain(timeout_s=24 * VISIBILITY_TIMEOUT_S)
    report(f"acknowledged but not yet deleted after the drain: {len(workload.ledger.undeleted())}")
    wait_until_empty(endpoint, urls, timeout_s=6 * VISIBILITY_TIMEOUT_S)
    workload.stop()
    verdict = workload.ledger.verdict()
    report(f"{cycles}; {verdict.summary()}")
    _assert_accounted(verdict)
    assert_empty(endpoint, urls)


def _assert_accounted(verdict: FifoVerdict) -> None:
    assert verdict.crashed == [], "\n".join(verdict.crashed)
    assert verdict.acknowledged > 0
    assert verdict.lost == [], f"acknowledged but never delivered: {verdict.lost[:20]}"
    assert verdict.enqueued_twice == [], f"one send, two messages: {verdict.enqueued_twice[:20]}"
    assert verdict.wrong_id == [], f"delivered under another id: {verdict.wrong_id[:20]}"
    assert verdict.out_of_order == [], verdict.out_of_order[:20]
    assert verdict.corrupt == [], verdict.corrupt[:20]


@pytest.mark.slow
def test_fifo_gateway_sigkill_cycles(kafka_bootstrap: str, tmp_path: Path) -> None:
    gateway = GatewayProcess(tmp_path / "gateway", kafka_bootstrap, env={"KQS_PARTITIONS": "2"})
    gateway.start()
    rng = random.Random(11)
    workload: FifoWorkload | None = None
    try:
        urls = _fifo_queues(gateway.endpoint, SIZE.queues)
        workload = FifoWorkload(gateway.endpoint, urls, SIZE.producers, SIZE.consumers)
        workload.start()
        for _ in range(SIZE.gateway_kills):
            time.sleep(rng.uniform(1.0, 3.0))
            gateway.kill()
            gateway.start()
        _finish(workload, gateway.endpoint, urls, f"gateway SIGKILL cycles: {SIZE.gateway_kills}")
    finally:
        if workload is not None:
            workload.stop()
        gateway.stop()


@pytest.mark.slow
def test_fifo_broker_sigkill_cycles(kafka_dir: Path, tmp_path: Path) -> None:
    port, controller_port = free_port(), free_port()
    info = broker.start(kafka_dir, port=port, controller_port=controller_port)
    gateway = GatewayProcess(tmp_path / "gateway", info.bootstrap, env={"KQS_PARTITIONS": "2"})
    gateway.start()
    rng = random.Random(13)
    workload: FifoWorkload | None = None
    try:
        urls = _fifo_queues(gateway.endpoint, SIZE.queues)
        workload = FifoWorkload(gateway.endpoint, urls, SIZE.producers, SIZE.consumers)
        workload.start()
        for _ in range(SIZE.broker_kills):
            time.sleep(rng.uniform(2.0, 4.0))
            assert broker.kill(kafka_dir)
            time.sleep(rng.uniform(0.5, 3.0))
            broker.start(kafka_dir, port=port, controller_port=controller_port)
        _finish(workload, gateway.endpoint, urls, f"broker SIGKILL cycles: {SIZE.broker_kills}")
    finally:
        if workload is not None:
            workload.stop()
        gateway.stop()
