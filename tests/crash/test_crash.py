"""Crash suite: SIGKILL the gateway, then the Kafka broker, under load, and account for
every message (see `tests/support/crash_workload.py` for what is checked).

CI runs a reduced size; `KQS_CRASH_SIZE=full` runs the size the durability issue asks for
(20 gateway kills, 5 broker kills). Each test prints its figures.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import statistics
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.crash_suite import (
    SIZE,
    assert_empty,
    left_behind,
    report,
    wait_until_empty,
)
from tests.support.crash_workload import RECEIVE_WAIT_S, VISIBILITY_TIMEOUT_S, Verdict, Workload
from tests.support.harness import GatewayProcess, KafkaCluster, free_port, json_client
from topology.embedded import broker, broker_config

# A call that fails must fail within this: the producer's delivery timeout (15 s) plus
# the long-poll wait and scheduling slack on a loaded machine.
FAIL_WITHIN_S = 15 + RECEIVE_WAIT_S + 10
# The longest a drain that still deletes messages may take (`Workload.drain`).
DRAIN_CAP_S = 600


def _queues(endpoint: str, count: int) -> list[str]:
    sqs = json_client(endpoint)
    return [
        sqs.create_queue(
            QueueName=f"crash-{i}-{uuid.uuid4().hex[:8]}",
            Attributes={"VisibilityTimeout": str(VISIBILITY_TIMEOUT_S)},
        )["QueueUrl"]
        for i in range(count)
    ]


def _assert_accounted(verdict: Verdict, connection_errors_expected: bool) -> None:
    report(verdict.summary())
    assert verdict.crashed == [], "\n".join(verdict.crashed)
    assert verdict.acknowledged > 0
    assert verdict.lost == [], f"acknowledged but never delivered: {verdict.lost[:20]}"
    assert verdict.resurrected == [], f"delivered after deletion: {verdict.resurrected[:20]}"
    assert verdict.corrupt == [], verdict.corrupt[:20]
    for name in verdict.failures:
        operation, kind = name.split(":")
        retryable = kind in ("ServiceUnavailable", "InternalError")
        if connection_errors_expected:
            retryable = retryable or kind == "connection"
        # A delete with a handle whose lease expired and was re-received may be refused;
        # the message is then simply delivered again.
        stale_handle = operation == "delete" and kind in (
            "ReceiptHandleIsInvalid",
            "InvalidParameterValue",
        )
        assert retryable or stale_handle, f"unexpected failure {name}: {verdict.failures}"
    assert verdict.slowest_failure_s <= FAIL_WITHIN_S


def _drain_and_stop(workload: Workload, endpoint: str, urls: list[str]) -> Verdict:
    workload.stop_producing()
    # Deliveries left to time out, and leases taken just before a crash, come back after the
    # visibility timeout: the drain waits a few of those rounds for the next deletion.
    took = workload.drain(stall_s=6 * VISIBILITY_TIMEOUT_S, cap_s=DRAIN_CAP_S)
    undeleted = workload.ledger.undeleted()
    report(f"drain: {took:.0f} s; acknowledged but not yet deleted after it: {len(undeleted)}")
    for token in sorted(undeleted)[:10]:
        report(f"  {workload.ledger.story(token)} (drain ended at {time.monotonic():.1f})")
    wait_until_empty(endpoint, urls, timeout_s=6 * VISIBILITY_TIMEOUT_S)
    workload.stop()
    verdict = workload.ledger.verdict()
    # What a failure needs to tell a message the queues no longer hold from one they hold
    # but did not deliver.
    report(f"queues after the emptiness wait: {left_behind(endpoint, urls) or 'all empty'}")
    for token in verdict.lost[:10]:
        sent = workload.ledger.attempted[token]
        report(f"  never delivered: {workload.ledger.story(token)}, sent to {sent.queue_url}")
    return verdict


def _finish(
    workload: Workload,
    gateway: GatewayProcess,
    urls: list[str],
    killed: str,
    restarts: list[float],
    connection_errors_expected: bool,
) -> None:
    """After the kill cycles: drain, report the figures, account for every message, and
    check that the queues end empty."""
    verdict = _drain_and_stop(workload, gateway.endpoint, urls)
    report(
        f"{killed} cycles: {len(restarts)}; {killed} start to ready p50 "
        f"{statistics.median(restarts):.2f} s, max {max(restarts):.2f} s"
    )
    _assert_accounted(verdict, connection_errors_expected)
    assert_empty(gateway.endpoint, urls, workload.ledger.unfinished())


@contextlib.contextmanager
def _group_under_load(
    gateways: list[GatewayProcess], start_timeout_s: float = 60.0
) -> Iterator[tuple[list[str], Workload]]:
    """Group-mode gateways carrying the workload (the scale-out runs): each started, the
    queues created through the first, producers and consumers spread over all of them. On
    leaving, the workload stops, then every gateway, woken first in case a run left it
    stopped (SIGSTOP)."""
    workload: Workload | None = None
    try:
        for gateway in gateways:
            gateway.start(timeout_s=start_timeout_s)
        urls = _queues(gateways[0].endpoint, SIZE.queues)
        workload = Workload([g.endpoint for g in gateways], urls, SIZE.producers, SIZE.consumers)
        workload.start()
        yield urls, workload
    finally:
        if workload is not None:
            workload.stop()
        for gateway in gateways:
            if gateway.pid is not None:  # never left stopped, whatever failed
                with contextlib.suppress(ProcessLookupError):
                    os.kill(gateway.pid, signal.SIGCONT)
            gateway.stop()


def _broker_kill_cycles(
    kafka_dir: Path, port: int, controller_port: int, rng: random.Random
) -> list[float]:
    """SIGKILL the broker `SIZE.broker_kills` times under load; each restart's duration."""
    restarts: list[float] = []
    for _ in range(SIZE.broker_kills):
        time.sleep(rng.uniform(2.0, 4.0))
        assert broker.kill(kafka_dir)
        time.sleep(rng.uniform(0.5, 3.0))  # down for a while: requests must fail, not hang
        began = time.monotonic()
        broker.start(kafka_dir, port=port, controller_port=controller_port)
        restarts.append(time.monotonic() - began)
    return restarts


@pytest.mark.slow
def test_gateway_sigkill_cycles(kafka_bootstrap: str, tmp_path: Path) -> None:
    gateway = GatewayProcess(tmp_path / "gateway", kafka_bootstrap)
    gateway.start()
    rng = random.Random(5)
    restarts: list[float] = []
    workload: Workload | None = None
    try:
        urls = _queues(gateway.endpoint, SIZE.queues)
        workload = Workload(gateway.endpoint, urls, SIZE.producers, SIZE.consumers)
        workload.start()
        for _ in range(SIZE.gateway_kills):
            time.sleep(rng.uniform(1.0, 3.0))  # traffic, then a crash at a random point
            gateway.kill()
            began = time.monotonic()
            gateway.start()
            restarts.append(time.monotonic() - began)
        _finish(
            workload, gateway, urls, "gateway SIGKILL", restarts, connection_errors_expected=True
        )
    finally:
        if workload is not None:
            workload.stop()
        gateway.stop()


@pytest.mark.slow
def test_broker_sigkill_cycles(kafka_dir: Path, tmp_path: Path) -> None:
    port, controller_port = free_port(), free_port()
    info = broker.start(kafka_dir, port=port, controller_port=controller_port)
    # Its broker on its machine: the gateway syncs the queue topics' segments, as `kqs serve`
    # does with its embedded broker, so each kill finds logs the broker never flushed itself.
    gateway = GatewayProcess(tmp_path / "gateway", info.bootstrap, env=_segment_sync(kafka_dir))
    gateway.start()
    rng = random.Random(7)
    workload: Workload | None = None
    try:
        urls = _queues(gateway.endpoint, SIZE.queues)
        workload = Workload(gateway.endpoint, urls, SIZE.producers, SIZE.consumers)
        workload.start()
        restarts = _broker_kill_cycles(kafka_dir, port, controller_port, rng)
        # The gateway stays up throughout: clients never lose their connection to it.
        _finish(
            workload, gateway, urls, "broker SIGKILL", restarts, connection_errors_expected=False
        )
    finally:
        if workload is not None:
            workload.stop()
        gateway.stop()


def _segment_sync(kafka_dir: Path) -> dict[str, str]:
    return {"KQS_SEGMENT_SYNC_DIR": str(broker_config.log_dir(kafka_dir))}


SCALE_OUT_ENV = {
    "KQS_PARTITION_OWNERSHIP": "group",
    "KQS_RECEIPT_SECRET": "crash-suite-scale-out-secret",
    "KQS_PARTITIONS": "3",
}


@pytest.mark.slow
def test_broker_sigkill_cycles_under_two_gateways(kafka_dir: Path, tmp_path: Path) -> None:
    """Scale-out: two gateways share the partitions (group mode) while their one broker is
    SIGKILLed and restarted under load: the group coordinator goes with it, so sessions may
    expire and partitions move and are restored; deletes wait for the changelog, which is
    down meanwhile. Every message is accounted for as in the kill cycles."""
    port, controller_port = free_port(), free_port()
    info = broker.start(kafka_dir, port=port, controller_port=controller_port)
    env = SCALE_OUT_ENV | _segment_sync(kafka_dir)
    serving = [GatewayProcess(tmp_path / f"gateway-{i}", info.bootstrap, env=env) for i in (1, 2)]
    rng = random.Random(13)
    with _group_under_load(serving) as (urls, workload):
        restarts = _broker_kill_cycles(kafka_dir, port, controller_port, rng)
        _finish(
            workload,
            serving[0],
            urls,
            "broker SIGKILL under two gateways",
            restarts,
            connection_errors_expected=False,
        )


@pytest.mark.slow
@pytest.mark.parametrize("leaving", ["sigterm", "sigkill"])
def test_partition_hand_over_cycles(kafka_bootstrap: str, tmp_path: Path, leaving: str) -> None:
    """Scale-out: two gateways share the queues' partitions (group mode) and carry the load,
    alternating protocols and gateways per thread; a third joins, takes partitions (restored
    from the changelog), and leaves again, repeatedly: with SIGTERM (it releases them with
    its changelog flushed) or SIGKILL (the group moves them after its session timeout; the
    others restore what reached the changelog). Every message is accounted for as in the
    kill cycles."""
    env = SCALE_OUT_ENV
    serving = [GatewayProcess(tmp_path / f"gateway-{i}", kafka_bootstrap, env=env) for i in (1, 2)]
    visitor = GatewayProcess(tmp_path / "gateway-3", kafka_bootstrap, env=env)
    rng = random.Random(11)
    cycles: list[float] = []  # the third gateway's start to ready
    with _group_under_load(serving) as (urls, workload):
        try:
            for _ in range(SIZE.hand_overs):
                time.sleep(rng.uniform(1.0, 3.0))
                began = time.monotonic()
                visitor.start()  # joins the group: partitions move to it
                cycles.append(time.monotonic() - began)
                time.sleep(rng.uniform(2.0, 4.0))
                if leaving == "sigterm":
                    assert visitor.terminate() == 0  # and back
                else:
                    visitor.kill()
            label = f"third gateway joining and leaving ({leaving})"
            _finish(workload, serving[0], urls, label, cycles, connection_errors_expected=False)
        finally:
            visitor.stop()


# Longer than the ingest group's session (6 s): the others take the stopped gateway's
# partitions and restore them while it sleeps.
STOPPED_FOR_S = 8.0


@pytest.mark.slow
def test_stopped_gateway_cycles(kafka_bootstrap: str, tmp_path: Path) -> None:
    """Scale-out: three gateways share the queues' partitions and all carry the load; one is
    stopped (SIGSTOP) past its session, so the group gives its partitions to the others, and
    woken (SIGCONT) with client and forwarded requests waiting in its sockets, repeatedly
    (a long garbage-collection pause, a stalled VM). What it answers on waking must not be
    undone by the gateways that took its partitions (`gateway/cluster/pause_watch.py`); every message
    is accounted for as in the kill cycles."""
    gateways = [
        GatewayProcess(tmp_path / f"gateway-{i}", kafka_bootstrap, env=SCALE_OUT_ENV)
        for i in (1, 2, 3)
    ]
    sleeper = gateways[2]
    rng = random.Random(13)
    stopped: list[float] = []
    with _group_under_load(gateways) as (urls, workload):
        pid = sleeper.pid
        assert pid is not None
        for _ in range(SIZE.stops):
            time.sleep(rng.uniform(2.0, 4.0))  # serving its share again (it rejoined)
            began = time.monotonic()
            os.kill(pid, signal.SIGSTOP)
            try:
                time.sleep(STOPPED_FOR_S)
            finally:
                os.kill(pid, signal.SIGCONT)
            stopped.append(time.monotonic() - began)
        verdict = _drain_and_stop(workload, gateways[0].endpoint, urls)
        report(
            f"third gateway SIGSTOP / SIGCONT cycles: {len(stopped)}, stopped "
            f"{statistics.median(stopped):.1f} s each"
        )
        _assert_accounted(verdict, connection_errors_expected=False)
        assert_empty(gateways[0].endpoint, urls, workload.ledger.unfinished())


@pytest.mark.slow
def test_cluster_sigkill_cycles(tmp_path: Path) -> None:
    """Scale-out on the deployment `compose/` describes: three group-mode gateways on three
    brokers (replication factor 3, min.insync.replicas 2) carry the load, alternating
    gateways and protocols per thread, while a random gateway is SIGKILLed and restarted
    (its partitions move to the others after its session times out, are restored from the
    changelog, and may come back), and then a random broker is (the acknowledged records
    are on two others; the group coordinator and partition leaders move). Every message is
    accounted for as in the kill cycles."""
    cluster = KafkaCluster(tmp_path / "cluster")
    cluster.start()
    serving = [
        GatewayProcess(tmp_path / f"gateway-{i}", cluster.bootstrap, env=SCALE_OUT_ENV)
        for i in range(3)
    ]
    rng = random.Random(17)
    restarts: list[float] = []  # each killed node's start to ready
    try:
        with _group_under_load(serving, start_timeout_s=120) as (urls, workload):
            for _ in range(SIZE.cluster_gateway_kills):
                time.sleep(rng.uniform(2.0, 4.0))
                victim = rng.choice(serving)
                victim.kill()
                time.sleep(rng.uniform(0.5, 3.0))
                began = time.monotonic()
                victim.start(timeout_s=120)
                restarts.append(time.monotonic() - began)
            for _ in range(SIZE.cluster_broker_kills):
                time.sleep(rng.uniform(2.0, 4.0))
                node = rng.randrange(len(cluster.nodes))
                cluster.kill(node)
                time.sleep(rng.uniform(2.0, 5.0))  # two brokers left: acks=all still succeeds
                began = time.monotonic()
                cluster.restart(node)
                restarts.append(time.monotonic() - began)
            label = "gateway and broker SIGKILL on the 3-broker cluster"
            # A client of a killed gateway sees its connection refused until it is back.
            _finish(
                workload,
                serving[0],
                urls,
                label,
                restarts,
                connection_errors_expected=True,
            )
    finally:
        cluster.stop()
