"""Real processes and real clients for end-to-end tests.

* a Kafka broker: `KQS_KAFKA_BOOTSTRAP` if set, else a testcontainers Kafka where a Docker
  engine answers, else the jar broker of `topology.embedded.broker` (what CI uses);
* a gateway: `kqs serve` as its own process, so tests can SIGKILL and restart it;
* SQS clients: boto3 speaking JSON 1.0, and botocore speaking Query with the last SQS model
  that used it (botocore 1.34.89), fetched from PyPI once into the cache.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import gzip
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import boto3
import botocore.session
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

from topology.embedded import broker, broker_config, file_lock

QUERY_BOTOCORE_VERSION = "1.34.89"
# `new_queue(prefix, **attributes) -> queue URL`, the conftest fixture's type.
NewQueue = Callable[..., str]
ACCOUNT_ID = "000000000000"
CREDENTIALS = {"aws_access_key_id": "test", "aws_secret_access_key": "test"}
REGION = "us-east-1"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _docker_answers() -> bool:
    if not os.environ.get("DOCKER_HOST") and not Path("/var/run/docker.sock").exists():
        return False
    try:
        import docker

        with contextlib.closing(docker.from_env(timeout=2)) as client:
            client.ping()
        return True
    except Exception:  # noqa: BLE001 - any failure means "no Docker here"
        return False


# The log directory of each jar broker `kafka_for_tests` started, by bootstrap: a gateway on
# one of them syncs its queue topics' segments itself, as `kqs serve` does on its embedded
# broker (same machine; topology/segment_sync.py).
LOG_DIRS: dict[str, Path] = {}


@contextlib.contextmanager
def kafka_for_tests(work_dir: Path) -> Iterator[str]:
    """Yield a bootstrap address of a real Kafka broker for the test session."""
    configured = os.environ.get("KQS_KAFKA_BOOTSTRAP")
    if configured:
        yield configured
        return
    if _docker_answers():
        from testcontainers.kafka import KafkaContainer

        with KafkaContainer().with_kraft() as container:
            yield str(container.get_bootstrap_server())
        return
    data_dir = work_dir / "kafka"
    info = broker.start(data_dir, port=free_port(), controller_port=free_port())
    LOG_DIRS[info.bootstrap] = broker_config.log_dir(data_dir)
    try:
        yield info.bootstrap
    finally:
        broker.stop(data_dir)
        LOG_DIRS.pop(info.bootstrap, None)


class KafkaCluster:
    """`size` jar brokers forming one KRaft cluster on 127.0.0.1 (combined broker and
    controller nodes, every node a voter), with `replication_factor` replicas per topic and
    `min.insync.replicas` = `min_insync_replicas`: what `compose/` runs, without Docker.

    `secure`: every node's port a SASL_SSL listener (and an SSL one of its own) with the
    authorizer on, replicating over SASL_SSL as the super user (`SecureListeners`);
    `gateway_login`: the `KQS_KAFKA_*` settings a gateway logs in with then."""

    def __init__(
        self,
        work_dir: Path,
        size: int = 3,
        replication_factor: int = 3,
        min_insync_replicas: int = 2,
        heap: str = "512m",
        secure: broker_config.SecureListeners | None = None,
        gateway_login: Mapping[str, str] | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        """`host`: the address every node listens on (another than 127.0.0.1 for a gateway in
        a network namespace of its own, `tests/support/crash_netns.py`)."""
        self.host = host
        self.ports = [free_port() for _ in range(size)]
        self.controller_ports = [free_port() for _ in range(size)]
        voters = ",".join(f"{i + 1}@{host}:{port}" for i, port in enumerate(self.controller_ports))
        cluster_id = broker.new_cluster_id()
        self.nodes = [
            broker_config.ClusterNode(
                i + 1, voters, cluster_id, replication_factor, min_insync_replicas
            )
            for i in range(size)
        ]
        self.data_dirs = [work_dir / f"kafka-{i + 1}" for i in range(size)]
        self.heap = heap
        self.secure = [
            dataclasses.replace(secure, ssl_port=free_port()) if secure else None
            for _ in range(size)
        ]
        self.gateway_login = dict(gateway_login or {})

    @property
    def login(self) -> dict[str, str]:
        """What the tests' own Kafka clients add to log in (the super user's), or nothing."""
        return self.secure[0].admin_client() if self.secure[0] else {}

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{self.host}:{port}" for port in self.ports)

    def start(self) -> None:
        """Start every node at once: none is ready before a quorum of them runs."""
        errors: list[BaseException] = []

        def start_node(index: int) -> None:
            try:
                self.restart(index)
            except BaseException as exc:  # noqa: BLE001 - reported below, for every node
                errors.append(exc)

        threads = [threading.Thread(target=start_node, args=(i,)) for i in range(len(self.nodes))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            self.stop()
            raise errors[0]

    def restart(self, index: int) -> None:
        """Start node `index` (again), on its ports and data directory."""
        broker.start(
            self.data_dirs[index],
            port=self.ports[index],
            controller_port=self.controller_ports[index],
            host=self.host,
            heap=self.heap,
            cluster=self.nodes[index],
            secure=self.secure[index],
        )

    def kill(self, index: int) -> None:
        """SIGKILL node `index`, as a crash would."""
        broker.kill(self.data_dirs[index])

    def stop(self) -> None:
        for data_dir in self.data_dirs:
            broker.stop(data_dir, timeout=10)


class GatewayProcess:
    """`kqs serve` in a child process, against an existing Kafka cluster."""

    def __init__(
        self,
        data_dir: Path,
        bootstrap: str,
        port: int | None = None,
        env: Mapping[str, str] | None = None,
        args: Sequence[str] = (),
        tls_ca: Path | None = None,
        host: str = "127.0.0.1",
        wrap: Sequence[str] = (),
    ) -> None:
        """`bootstrap` empty: the gateway starts its embedded broker (set KQS_KAFKA_PORT and
        KQS_KAFKA_CONTROLLER_PORT in `env`). `tls_ca`: the gateway serves HTTPS (its
        `--tls-cert` in `args`) with a certificate for `localhost` this CA signed. `host`:
        where clients reach it (it listens there unless `args` says `--host`). `wrap`: a
        command the gateway runs under (`ip netns exec <name>`; it execs the gateway, so the
        process is the gateway's and signals reach it)."""
        self.data_dir = data_dir
        self.bootstrap = bootstrap
        self.extra_env = dict(env or {})  # e.g. KQS_IAM_CONFIG
        self.extra_args = list(args)  # e.g. --workers 2
        if host != "127.0.0.1" and "--host" not in self.extra_args:
            self.extra_args += ["--host", host]
        self.wrap = list(wrap)
        self.port = port or free_port()
        self.tls_ca = tls_ca
        self.endpoint = f"https://localhost:{self.port}" if tls_ca else f"http://{host}:{self.port}"
        self.log_path = data_dir / "gateway.log"
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 60.0) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "KQS_KAFKA_BOOTSTRAP": self.bootstrap,
            "KQS_OFFSET_COMMIT_INTERVAL_S": "0.5",
            # The suite runs independent single gateways on one broker (the session's and
            # each test's own), each with queues of its own: said in their logs, not refused
            # (gateway/cluster/group_check.py). Tests of the refusal set "refuse".
            "KQS_SHARED_CLUSTER": "warn",
            **(
                {"KQS_SEGMENT_SYNC_DIR": str(LOG_DIRS[self.bootstrap])}
                if self.bootstrap in LOG_DIRS
                else {}
            ),
            **self.extra_env,
        }
        with self.log_path.open("ab") as log:
            self._proc = subprocess.Popen(
                [
                    *self.wrap,
                    sys.executable,
                    "-m",
                    "gateway.cli.main",
                    "serve",
                    "--port",
                    str(self.port),
                    "--data-dir",
                    str(self.data_dir),
                    *self.extra_args,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"gateway exited early; see {self.log_path}:\n{self.log_tail()}")
            with contextlib.suppress(OSError):
                context = ssl.create_default_context(cafile=self.tls_ca) if self.tls_ca else None
                with urllib.request.urlopen(
                    f"{self.endpoint}/health", timeout=1, context=context
                ) as response:
                    if response.status == 200:
                        return
            time.sleep(0.1)
        # Fixtures only stop a gateway that started: don't leave this one running.
        self._proc.kill()
        self._proc.wait(timeout=10)
        raise TimeoutError(f"gateway not ready after {timeout_s}s; see {self.log_path}")

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def kill(self) -> None:
        """SIGKILL: no shutdown hooks, no flushes, as in a crash."""
        assert self._proc is not None
        self._proc.kill()
        self._proc.wait(timeout=10)

    def terminate(self, timeout_s: float = 40.0) -> int:
        assert self._proc is not None
        self._proc.send_signal(signal.SIGTERM)
        return self._proc.wait(timeout=timeout_s)

    def send_signal(self, sig: signal.Signals) -> None:
        """Signal the process without waiting (see `wait`), e.g. to act during shutdown."""
        assert self._proc is not None
        self._proc.send_signal(sig)

    def wait(self, timeout_s: float = 40.0) -> int:
        """The exit code, once the process has exited."""
        assert self._proc is not None
        return self._proc.wait(timeout=timeout_s)

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self.terminate()

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


@contextlib.contextmanager
def gateway_pair(
    work: Callable[[str], Path],
    bootstrap: str,
    secret: str,
    partitions: int,
    env: Mapping[str, str] | None = None,
) -> Iterator[list[GatewayProcess]]:
    """Two gateways sharing the queues' partitions (`KQS_PARTITION_OWNERSHIP=group`, one
    receipt secret, `partitions` per new queue, and `env`); `work(name)` makes each one's data
    directory."""
    env = {
        **(env or {}),
        "KQS_PARTITION_OWNERSHIP": "group",
        "KQS_RECEIPT_SECRET": secret,
        "KQS_PARTITIONS": str(partitions),
    }
    pair = [GatewayProcess(work(f"gateway-{name}"), bootstrap, env=env) for name in "ab"]
    try:
        for process in pair:
            process.start()
        yield pair
    finally:
        for process in pair:
            process.stop()


def _query_model_dir() -> Path:
    """The SQS service model of botocore 1.34.89, the last one whose protocol is Query.

    Fetched on first use, which on a fresh machine is during the test run: both pytest-xdist
    workers may ask at once, so the fetch holds a lock and `complete` is written last (a
    worker never reads a model file another one is still writing)."""
    cache = Path(os.environ.get("KQS_CACHE_DIR", Path.home() / ".cache" / "kqs"))
    base = cache / f"botocore-{QUERY_BOTOCORE_VERSION}-sqs"
    complete = base / "complete"
    if complete.exists():
        return base / "data"
    cache.mkdir(parents=True, exist_ok=True)
    with file_lock.exclusive(cache / f"{base.name}.lock"):
        if not complete.exists():
            _fetch_query_model(base)
            complete.touch()
    return base / "data"


def _fetch_query_model(base: Path) -> None:
    base.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--dest",
            str(base),
            f"botocore=={QUERY_BOTOCORE_VERSION}",
        ],
        check=True,
    )
    wheel = glob.glob(str(base / f"botocore-{QUERY_BOTOCORE_VERSION}-*.whl"))[0]
    model_dir = base / "data" / "sqs" / "2012-11-05"
    model_dir.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as archive:
        for name in ("service-2.json.gz", "endpoint-rule-set-1.json.gz", "paginators-1.json"):
            raw = archive.read(f"botocore/data/sqs/2012-11-05/{name}")
            target = model_dir / name.removesuffix(".gz")
            target.write_bytes(gzip.decompress(raw) if name.endswith(".gz") else raw)


_CLIENT_CONFIG = Config(retries={"max_attempts": 1}, read_timeout=60)
# One attempt per call, for tests that time failures: botocore's `max_attempts` counts
# retries, so `_CLIENT_CONFIG` still retries a failed call (a 5xx, a refused connection) once.
NO_RETRIES = Config(retries={"total_max_attempts": 1}, read_timeout=60)


def json_client(
    endpoint: str,
    config: Config = _CLIENT_CONFIG,
    credentials: Mapping[str, str] = CREDENTIALS,
    region: str = REGION,
) -> Any:
    client = boto3.session.Session().client(
        "sqs", endpoint_url=endpoint, region_name=region, config=config, **credentials
    )
    assert client.meta.service_model.protocol == "json"
    return client


def client_for(
    protocol: str,
    endpoint: str,
    credentials: Mapping[str, str] = CREDENTIALS,
    region: str = REGION,
    config: Config = _CLIENT_CONFIG,
) -> Any:
    """An SQS client speaking `protocol` ("json" or "query") with these credentials."""
    make = json_client if protocol == "json" else query_client
    return make(endpoint, config, credentials, region)


def query_client(
    endpoint: str,
    config: Config = _CLIENT_CONFIG,
    credentials: Mapping[str, str] = CREDENTIALS,
    region: str = REGION,
) -> Any:
    session = botocore.session.Session()
    session.get_component("data_loader").search_paths.insert(0, str(_query_model_dir()))
    client = session.create_client(
        "sqs", endpoint_url=endpoint, region_name=region, config=config, **credentials
    )
    assert client.meta.service_model.protocol == "query"
    return client


def signed_headers(
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    method: str = "POST",
    region: str = REGION,
) -> dict[str, str]:
    """`headers` plus a SigV4 signature with the test credentials, for raw HTTP requests."""
    request = AWSRequest(method=method, url=url, data=body, headers=dict(headers))
    SigV4Auth(
        Credentials(CREDENTIALS["aws_access_key_id"], CREDENTIALS["aws_secret_access_key"]),
        "sqs",
        region,
    ).add_auth(request)
    return dict(request.prepare().headers)


def visible_and_in_flight(sqs: Any, url: str) -> tuple[int, int]:
    """The queue's ApproximateNumberOfMessages and ...NotVisible, as numbers."""
    attributes = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return (
        int(attributes["ApproximateNumberOfMessages"]),
        int(attributes["ApproximateNumberOfMessagesNotVisible"]),
    )


_T = TypeVar("_T")


def eventually(check: Callable[[], _T | None], what: str, timeout_s: float) -> _T:
    """Poll `check` until it gives a value (not None); fail naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not seen within {timeout_s} s: {what}")
        time.sleep(0.05)
