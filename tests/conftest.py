"""Session fixtures: one real Kafka broker, one gateway process, and both SQS protocols."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.harness import GatewayProcess, json_client, kafka_for_tests, query_client


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with kafka_for_tests(tmp_path_factory.mktemp("broker")) as bootstrap:
        yield bootstrap


@pytest.fixture(scope="session")
def gateway(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    process = GatewayProcess(tmp_path_factory.mktemp("gateway"), kafka_bootstrap)
    process.start()
    yield process
    process.stop()


@pytest.fixture(params=["json", "query"])
def protocol(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


@pytest.fixture
def sqs(gateway: GatewayProcess, protocol: str) -> Any:
    """An SQS client of the gateway, once per protocol: every behaviour test runs twice."""
    return json_client(gateway.endpoint) if protocol == "json" else query_client(gateway.endpoint)


@pytest.fixture
def new_queue(sqs: Any) -> Callable[..., str]:
    """Create a queue with a unique name; returns its URL."""

    def create(prefix: str = "q", **attributes: str) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        url: str = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
        return url

    return create


@pytest.fixture
def gateway_data_dir(tmp_path: Path) -> Path:
    return tmp_path / "gateway"
