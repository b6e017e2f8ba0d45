"""The tiers (each test's marker and xdist group come from its folder), and the shared
fixtures: one real Kafka broker, one gateway process, and both SQS protocols."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

from tests.support.harness import (
    GatewayProcess,
    KafkaCluster,
    NewQueue,
    json_client,
    kafka_for_tests,
    query_client,
)
from tests.support.secure_kafka import grant_gateway_acls, secure_cluster
from topology.embedded import broker

TESTS = Path(__file__).resolve().parent
# The tiers, one folder each; every test gets its tier's marker (`pytest -m unit`, ...):
#   unit/         no broker, no gateway process; mirrors the packages (unit/gateway/<room>/, ...)
#   integration/  a real Kafka broker (or a Spark session), no gateway process
#   e2e/          gateway processes over HTTP, both protocols
#   crash/        the crash suite: gateways and brokers killed and stopped under load
#   clients/      the SQS client libraries (Java, Node, Go, Python) against a gateway
TIERS = ("unit", "integration", "e2e", "crash", "clients")

# How `scripts/test` spreads the suite over two pytest-xdist workers (`--dist loadgroup`): each
# module is a unit (its module-scoped brokers start once), and the folders below share one
# unit each. The crash suite kills and stops gateways and brokers under load and bounds how
# long recovery takes: its modules run one after another on one worker, never beside each
# other, while the other worker takes the rest of the suite. The modules using the session's
# SparkSession and those starting Spark applications of their own (the spark/ folders) run
# one after another on one worker: beside each other, their JVMs took twice as long. The suite waits on
# Kafka, timeouts and sleeps far more than it computes (a serial run keeps ~1 of the 2 cores
# busy), which is what the second worker uses.
SHARED_GROUPS = {
    "crash": "crash",
    "integration/spark": "spark",
    "e2e/spark": "spark",
}


def group_of(where: PurePosixPath) -> str:
    """The xdist group of the test module at `where` (relative to tests/)."""
    folder = where.parent.as_posix()
    for shared, group in SHARED_GROUPS.items():
        if folder == shared or folder.startswith(f"{shared}/"):
            return group
    return where.with_suffix("").as_posix()


class FolderGroups(LoadScopeScheduling):  # type: ignore[misc]  # xdist has no type hints
    """`--dist loadgroup` with each test's group taken from its folder (`group_of`).

    xdist's own loadgroup reads `xdist_group` marks through a suffix it appends to each test
    id, which pytest 9.2 no longer keeps: every test was then scheduled on its own
    (pytest-dev/pytest-xdist#1386). The group is the scheduler's unit, as in loadgroup."""

    def _split_scope(self, nodeid: str) -> str:
        path = PurePosixPath(nodeid.split("::", 1)[0])
        return group_of(path.relative_to("tests")) if path.parts[0] == "tests" else nodeid


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadgroup":
        return None
    # Groups in collection order, not largest (most tests) first: the crash suite (tests/crash,
    # second after tests/clients) has few tests but the longest run, so it starts at once on
    # one worker while the other works through the rest, instead of running alone at the end.
    config.option.loadscopereorder = False
    return FolderGroups(config, log)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = item.path.resolve()
        where = path.relative_to(TESTS) if path.is_relative_to(TESTS) else path
        if len(where.parts) < 2 or where.parts[0] not in TIERS:
            tiers = ", ".join(f"tests/{t}/" for t in TIERS)
            raise pytest.UsageError(f"{item.nodeid}: a test lives in one of {tiers}")
        item.add_marker(getattr(pytest.mark, where.parts[0]))


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with kafka_for_tests(tmp_path_factory.mktemp("broker")) as bootstrap:
        yield bootstrap


@pytest.fixture(scope="module")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """Three jar brokers in one KRaft cluster (replication factor 3, min.insync.replicas 2),
    for the test modules that ask for it; stopped with the module. KQS_TEST_SECURE_CLUSTER=1:
    SASL_SSL listeners with the authorizer on, gateways logging in with only the documented
    ACLs (`cluster.gateway_login`): a heavier run, off by default."""
    work = tmp_path_factory.mktemp("cluster")
    cluster = (
        secure_cluster(work) if os.environ.get("KQS_TEST_SECURE_CLUSTER") else KafkaCluster(work)
    )
    cluster.start()
    if cluster.gateway_login:
        grant_gateway_acls(cluster)
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


@pytest.fixture
def gateway_data_dir(tmp_path: Path) -> Path:
    return tmp_path / "gateway"
