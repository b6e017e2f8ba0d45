"""Session fixtures: one real Kafka broker, one gateway process, and both SQS protocols."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lease_store.clock import ManualClock
from lease_store.kv import KeyValueStore
from lease_store.store import LeaseStore
from tests.support.builders import T0, open_kv
from tests.support.harness import (
    GatewayProcess,
    KafkaCluster,
    NewQueue,
    json_client,
    kafka_for_tests,
    query_client,
)
from topology import broker

# How `scripts/test` spreads the suite over two pytest-xdist workers (`--dist loadgroup`):
# each module is a unit (its module-scoped brokers start once), and the modules that run
# several gateways or brokers, kill or stop them and bound how long recovery takes share
# one unit, so they run one after another on one worker as in a serial run and never beside
# each other. The suite waits on Kafka, timeouts and sleeps far more than it computes (a
# serial run keeps ~1 of the 2 cores busy), which is what the second worker uses.
_ONE_AFTER_ANOTHER = frozenset(
    {
        "test_crash",
        "test_crash_fifo",
        "test_e2e_cluster",
        "test_e2e_ownership",
        "test_e2e_workers",
        "test_e2e_move_tasks_failover",
        "test_e2e_move_tasks_group",
        "test_group_check",
    }
)
# The modules using the session's SparkSession: one worker starts one.
_SPARK = frozenset({"test_e2e_analytics", "test_spark_transforms"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        module = item.path.stem
        if module in _ONE_AFTER_ANOTHER:
            group = "multi-process"
        elif module in _SPARK:
            group = "spark"
        else:
            group = module
        item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with kafka_for_tests(tmp_path_factory.mktemp("broker")) as bootstrap:
        yield bootstrap


@pytest.fixture(scope="module")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """Three jar brokers in one KRaft cluster (replication factor 3, min.insync.replicas 2),
    for the test modules that ask for it; stopped with the module."""
    cluster = KafkaCluster(tmp_path_factory.mktemp("cluster"))
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def own_kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A broker of the module's own, for group-mode gateways: a group of gateways and the
    session's single gateway (fixture `gateway`) on one cluster would not be a deployment,
    since the single one serves (and reports the gauges of) every partition too."""
    with kafka_for_tests(tmp_path_factory.mktemp("own-broker")) as bootstrap:
        yield bootstrap


@pytest.fixture
def kafka_dir(tmp_path: Path) -> Iterator[Path]:
    """A data directory for a test's own jar broker, stopped afterwards whatever the test did."""
    path = tmp_path / "kafka"
    yield path
    broker.stop(path, timeout=10)  # never leave a JVM behind


@pytest.fixture(scope="session")
def gateway(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    process = GatewayProcess(tmp_path_factory.mktemp("gateway"), kafka_bootstrap)
    process.start()
    yield process
    process.stop()


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local[2] SparkSession (with Spark's Kafka connector) for the whole test run."""
    from spark_streaming import jars, jobs
    from spark_streaming.settings import AnalyticsSettings

    session = jobs.build_session(AnalyticsSettings(), jars.fetch(), master="local[2]")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real S3-compatible server (Versity S3 Gateway, posix backend) for the whole run."""
    from tests.support import clients_support

    if not clients_support.versitygw_built():
        clients_support.require_tool("go")
    with clients_support.s3_server(tmp_path_factory.mktemp("s3")) as endpoint:
        yield endpoint


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


@pytest.fixture(scope="module")
def scratch_urls() -> dict[str, str]:
    """Per test module (see `scratch_queue`): queues that no request may land in."""
    return {}


@pytest.fixture
def scratch_queue(protocol: str, new_queue: NewQueue, scratch_urls: dict[str, str]) -> str:
    """One queue per protocol for tests whose requests are all refused, so none lands in it."""
    if protocol not in scratch_urls:
        scratch_urls[protocol] = new_queue("scratch")
    return scratch_urls[protocol]


# -- lease-store unit tests: one fixture set, run per backend via `on_every_backend` -------


@pytest.fixture
def kv(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KeyValueStore]:
    store = open_kv(request.param, tmp_path / "kv")
    yield store
    store.close()


@pytest.fixture
def store(kv: KeyValueStore) -> LeaseStore:
    return LeaseStore(kv)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def gateway_data_dir(tmp_path: Path) -> Path:
    return tmp_path / "gateway"
