"""`kqs serve --workers 2`: two gateway processes on one port with the embedded broker.

Each test runs its own `kqs serve` on its own data directory and embedded broker (the shared
test broker's catalog holds every other module's queues, which a hand-over would touch).
Queues have four partitions so that both workers serve some of each; clients open a new
connection per call, which the kernel spreads over the workers. The module's pool serves
HTTPS (`--tls-cert`), so what a worker asks of another crosses TLS too (the workers' own
ports); the hand-over tests run plain HTTP. Both protocols. Every wait is bounded polling.
"""

from __future__ import annotations

import collections
import os
import signal
import time
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from botocore.config import Config

from gateway.common.config import Settings
from tests.support.certificates import CertificateAuthority
from tests.support.harness import GatewayProcess, client_for, free_port, visible_and_in_flight
from tests.support.harness import eventually as harness_eventually

BOUND_S = 60.0
# Until a message's lease-store keys are written, and the gateway's period for writing them.
YOUNG_S = Settings().lease_young_ms / 1000 + 0.5
PARTITIONS = 4
PROTOCOLS = ["json", "query"]

eventually = partial(harness_eventually, timeout_s=BOUND_S)


def kqs_serve(
    data_dir: Path, kafka_ports: tuple[int, int], *args: str, tls_ca: Path | None = None
) -> GatewayProcess:
    """`kqs serve` with its embedded broker on `kafka_ports` (the same data directory keeps
    the same broker across restarts, as it would for a user); `tls_ca`: the CA of the
    `--tls-cert` in `args`."""
    return GatewayProcess(
        data_dir,
        "",
        env={
            "KQS_KAFKA_PORT": str(kafka_ports[0]),
            "KQS_KAFKA_CONTROLLER_PORT": str(kafka_ports[1]),
            "KQS_PARTITIONS": str(PARTITIONS),
        },
        args=args,
        tls_ca=tls_ca,
    )


@pytest.fixture
def kafka_ports() -> tuple[int, int]:
    return free_port(), free_port()


@pytest.fixture(scope="module")
def workers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """One `kqs serve --workers 2` for the module's tests (a killed worker comes back),
    serving HTTPS: one certificate for `localhost` and 127.0.0.1 (the workers' own ports are
    reached at 127.0.0.1), which the workers trust for each other as their own."""
    work = tmp_path_factory.mktemp("workers")
    ca = CertificateAuthority(work / "tls")
    server = ca.pem("localhost", ("localhost", "127.0.0.1"), server=True)
    tls = ("--tls-cert", str(server.cert), "--tls-key", str(server.key))
    supervisor = kqs_serve(
        work / "data", (free_port(), free_port()), "--workers", "2", *tls, tls_ca=ca.cert
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AWS_CA_BUNDLE", str(ca.cert))  # the clients' `verify=`
        supervisor.start(timeout_s=120)
        yield supervisor
        supervisor.stop()


def children_of(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def worker_pids(supervisor: GatewayProcess) -> list[int]:
    assert supervisor.pid is not None
    return [
        pid
        for pid in children_of(supervisor.pid)
        if b"--pool-worker" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]


def fresh_client(protocol: str, endpoint: str) -> Any:
    """One connection per client, and one client per call: calls land on either worker."""
    return client_for(
        protocol,
        endpoint,
        config=Config(max_pool_connections=1, retries={"max_attempts": 8, "mode": "standard"}),
    )


def counts(protocol: str, endpoint: str, url: str) -> tuple[int, int]:
    return visible_and_in_flight(fresh_client(protocol, endpoint), url)


def send(protocol: str, endpoint: str, url: str, bodies: list[str]) -> None:
    for start in range(0, len(bodies), 10):
        entries = [
            {"Id": str(i), "MessageBody": body} for i, body in enumerate(bodies[start : start + 10])
        ]
        answer = fresh_client(protocol, endpoint).send_message_batch(QueueUrl=url, Entries=entries)
        assert not answer.get("Failed")


def receive_all(
    protocol: str, endpoint: str, url: str, expected: int, visibility_s: int = 600
) -> dict[str, str]:
    """Receive until `expected` distinct messages came back; body -> receipt handle. Fails on
    a message received twice (none is visible again within `visibility_s`)."""
    seen: collections.Counter[str] = collections.Counter()
    handles: dict[str, str] = {}
    deadline = time.monotonic() + BOUND_S
    while len(handles) < expected and time.monotonic() < deadline:
        answer = fresh_client(protocol, endpoint).receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=min(10, expected - len(handles)),
            VisibilityTimeout=visibility_s,
            WaitTimeSeconds=1,
        )
        for message in answer.get("Messages", []):
            seen[message["Body"]] += 1
            handles[message["Body"]] = message["ReceiptHandle"]
    assert not [body for body, n in seen.items() if n > 1], "a message was delivered twice"
    assert len(handles) == expected, f"received {len(handles)} of {expected}"
    return handles


def delete(protocol: str, endpoint: str, url: str, handles: list[str]) -> None:
    for start in range(0, len(handles), 10):
        entries = [
            {"Id": str(i), "ReceiptHandle": h} for i, h in enumerate(handles[start : start + 10])
        ]
        answer = fresh_client(protocol, endpoint).delete_message_batch(
            QueueUrl=url, Entries=entries
        )
        assert not answer.get("Failed"), answer.get("Failed")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_two_workers_share_the_port_and_the_partitions(
    workers: GatewayProcess, protocol: str
) -> None:
    assert len(worker_pids(workers)) == 2
    assert workers.endpoint.startswith("https://")
    url = fresh_client(protocol, workers.endpoint).create_queue(
        QueueName=f"workers-{uuid.uuid4().hex[:8]}"
    )["QueueUrl"]
    bodies = [f"m{i}" for i in range(60)]
    send(protocol, workers.endpoint, url, bodies)
    handles = receive_all(protocol, workers.endpoint, url, 60)
    assert sorted(handles) == sorted(bodies)
    assert eventually(
        lambda: counts(protocol, workers.endpoint, url) == (0, 60) or None, "60 in flight"
    )
    delete(protocol, workers.endpoint, url, list(handles.values()))
    eventually(lambda: counts(protocol, workers.endpoint, url) == (0, 0) or None, "queue empty")
    # Both workers listen, and both serve partitions of the queue (so the counts above were
    # asked of the other worker too, over HTTPS, and no call met an untrusted certificate).
    log = workers.log_path.read_text()
    assert "certificate is not trusted" not in log
    assert {'"worker": 0', '"worker": 1'} <= {
        part
        for line in log.splitlines()
        if '"msg": "partitions served"' in line
        for part in ('"worker": 0', '"worker": 1')
        if part in line
    }


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_killed_worker_is_started_again_and_nothing_is_lost(
    workers: GatewayProcess, protocol: str
) -> None:
    url = fresh_client(protocol, workers.endpoint).create_queue(
        QueueName=f"workers-kill-{uuid.uuid4().hex[:8]}"
    )["QueueUrl"]
    send(protocol, workers.endpoint, url, [f"before-{i}" for i in range(20)])
    before = worker_pids(workers)
    os.kill(before[0], signal.SIGKILL)
    eventually(
        lambda: (len(pids := worker_pids(workers)) == 2 and before[0] not in pids) or None,
        "the killed worker started again",
    )
    send(protocol, workers.endpoint, url, [f"after-{i}" for i in range(20)])
    handles = receive_all(protocol, workers.endpoint, url, 40)
    delete(protocol, workers.endpoint, url, list(handles.values()))
    eventually(lambda: counts(protocol, workers.endpoint, url) == (0, 0) or None, "queue empty")
    assert "worker exited: restarting it" in workers.log_path.read_text()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_one_gateway_hands_over_to_workers_and_back(
    tmp_path: Path, kafka_ports: tuple[int, int], protocol: str
) -> None:
    """One gateway is SIGKILLed (its changelog may lack its last changes; its WAL has them,
    once the messages are past their young time: a lease taken in a message's first second
    may go with a crash, `lease_store/young.py`), workers take its data directory over, then
    one gateway again: at each step exactly the messages neither deleted nor in flight are
    received, and in-flight ones stay hidden."""
    data = tmp_path / "data"
    single = kqs_serve(data, kafka_ports)
    single.start(timeout_s=120)
    try:
        url = fresh_client(protocol, single.endpoint).create_queue(QueueName="handed-over")[
            "QueueUrl"
        ]
        send(protocol, single.endpoint, url, [f"m{i}" for i in range(30)])
        held = receive_all(protocol, single.endpoint, url, 20)
        deleted = sorted(held)[:10]
        delete(protocol, single.endpoint, url, [held[body] for body in deleted])
        in_flight = {body: held[body] for body in sorted(held)[10:]}
        time.sleep(YOUNG_S)  # the leases written (the deletes are synced at once)
    finally:
        single.kill()

    pool = kqs_serve(data, kafka_ports, "--workers", "2")
    pool.start(timeout_s=120)
    try:
        assert not (data / "leases").exists()
        eventually(lambda: counts(protocol, pool.endpoint, url) == (10, 10) or None, "10 + 10")
        never_received = receive_all(protocol, pool.endpoint, url, 10)
        assert not set(never_received) & (set(deleted) | set(in_flight))
        # The first gateway's receipt handles work on the workers.
        delete(protocol, pool.endpoint, url, list(in_flight.values()))
        delete(protocol, pool.endpoint, url, list(never_received.values())[:5])
        still_held = set(never_received) - set(list(never_received)[:5])
        eventually(lambda: counts(protocol, pool.endpoint, url) == (0, 5) or None, "0 + 5")
    finally:
        pool.terminate(timeout_s=60)

    single = kqs_serve(data, kafka_ports)
    single.start(timeout_s=120)
    try:
        assert not (data / "workers").exists()
        eventually(lambda: counts(protocol, single.endpoint, url) == (0, 5) or None, "0 + 5 back")
        answer = fresh_client(protocol, single.endpoint).receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1
        )
        assert not answer.get("Messages"), "a deleted or held message came back"
        assert len(still_held) == 5
    finally:
        single.terminate(timeout_s=60)
