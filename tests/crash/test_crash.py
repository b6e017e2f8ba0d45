"""Crash suite: gateways and Kafka brokers SIGKILLed, stopped and cut off under load, and
every message accounted for (see `tests/support/crash_workload.py` and
`tests/support/crash_workload_fifo.py` for what is checked).

Runs that can share a setup share it (one gateway carries a standard and a FIFO workload
through its kills; the joining, leaving and stopped third gateway is one run; the 3-broker
cluster's faults are one run), so that CI's reduced size stays cheap. `KQS_CRASH_SIZE=full`
runs the sizes the issues ask for (`tests/support/crash_suite.py`). Each test prints its
figures.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import statistics
import time
import urllib.request
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support import crash_netns
from tests.support.crash_netns import Island
from tests.support.crash_suite import (
    SIZE,
    assert_empty,
    fifo_queues,
    finish_fifo,
    left_behind,
    report,
    wait_until_empty,
)
from tests.support.crash_workload import RECEIVE_WAIT_S, VISIBILITY_TIMEOUT_S, Verdict, Workload
from tests.support.crash_workload_fifo import FifoWorkload
from tests.support.harness import GatewayProcess, KafkaCluster, free_port, json_client
from tests.support.lease_ledger import describe
from topology.embedded import broker, broker_config

# A call that fails must fail within this: the producer's delivery timeout (15 s) plus
# the long-poll wait and scheduling slack on a loaded machine.
FAIL_WITHIN_S = 15 + RECEIVE_WAIT_S + 10
# On the 3-broker cluster a delete or visibility change whose partition moved while its
# changelog record waited (up to the delivery timeout) is tried at the next owner, which it
# waits for up to another 15 s before it answers ServiceUnavailable (seen: 27.6 s with a
# broker stopped).
CLUSTER_FAIL_WITHIN_S = FAIL_WITHIN_S + 15
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


def _assert_accounted(
    verdict: Verdict, connection_errors_expected: bool, fail_within_s: float = FAIL_WITHIN_S
) -> None:
    report(verdict.summary())
    assert verdict.crashed == [], "\n".join(verdict.crashed)
    assert verdict.acknowledged > 0
    assert verdict.lost == [], f"acknowledged but never delivered: {verdict.lost[:20]}"
    assert verdict.resurrected == [], f"delivered after deletion: {verdict.resurrected[:20]}"
    assert verdict.corrupt == [], verdict.corrupt[:20]
    assert verdict.twice_inside_a_lease == {}, describe(verdict.twice_inside_a_lease)
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
    assert verdict.slowest_failure_s <= fail_within_s


def _drain_and_stop(
    workload: Workload, endpoint: str, urls: list[str], *others: Workload
) -> Verdict:
    """`others`: workloads sharing `workload`'s ledger (stopped with it)."""
    for each in (workload, *others):
        each.stop_producing()
    # Leases taken just before a crash come back after the visibility timeout: the drain
    # waits a few of those rounds for the next deletion.
    took = workload.drain(
        stall_s=6 * VISIBILITY_TIMEOUT_S,
        cap_s=DRAIN_CAP_S,
        queues_empty=lambda: not left_behind(endpoint, urls),
    )
    undeleted = workload.ledger.undeleted()
    report(f"drain: {took:.0f} s; acknowledged but not yet deleted after it: {len(undeleted)}")
    for token in sorted(undeleted)[:10]:
        report(f"  {workload.ledger.story(token)} (drain ended at {time.monotonic():.1f})")
    wait_until_empty(endpoint, urls, timeout_s=6 * VISIBILITY_TIMEOUT_S)
    for each in (*others, workload):
        each.stop()
    verdict = workload.ledger.verdict()
    if verdict.resurrected or verdict.twice_inside_a_lease:
        now = f"{time.monotonic():.1f} = {time.strftime('%H:%M:%S', time.gmtime())} UTC"
        report(f"faults (monotonic s; {now}): {workload.ledger.faults}")
    for delivery in verdict.resurrected[:10]:
        report(f"  resurrected: {workload.ledger.story(delivery.token)}")
    for message_id, leases in list(verdict.twice_inside_a_lease.items())[:10]:
        shown = [f"{d.received_at:.1f} via {d.where} until {d.lease_until:.1f}" for d in leases]
        token = next((t for t, m in workload.ledger.acknowledged.items() if m == message_id), "")
        story = workload.ledger.story(token) if token else message_id
        report(f"  twice inside a lease: {shown}; {story}")
    # What a failure needs to tell a message the queues no longer hold from one they hold
    # but did not deliver.
    report(f"queues after the emptiness wait: {left_behind(endpoint, urls) or 'all empty'}")
    for token in verdict.lost[:10]:
        sent = workload.ledger.attempted[token]
        report(f"  never delivered: {workload.ledger.story(token)}, sent to {sent.queue_url}")
    return verdict


def _report_cycles(what: str, seconds: list[float]) -> None:
    if seconds:
        report(
            f"{what}: {len(seconds)}, p50 {statistics.median(seconds):.2f} s, "
            f"max {max(seconds):.2f} s"
        )


def _finish(
    workload: Workload,
    gateway: GatewayProcess,
    urls: list[str],
    cycles: dict[str, list[float]],
    connection_errors_expected: bool,
    others: tuple[Workload, ...] = (),
    fail_within_s: float = FAIL_WITHIN_S,
) -> None:
    """After the fault cycles: drain, report the figures (`cycles`: what each kind of cycle
    measured, by its name), account for every message, and check that the queues end
    empty."""
    verdict = _drain_and_stop(workload, gateway.endpoint, urls, *others)  # others: same ledger
    for what, seconds in cycles.items():
        _report_cycles(what, seconds)
    _assert_accounted(verdict, connection_errors_expected, fail_within_s)
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
    kafka_dir: Path, port: int, controller_port: int, rng: random.Random, kills: int
) -> list[float]:
    """SIGKILL the broker `kills` times under load; each restart's duration."""
    restarts: list[float] = []
    for _ in range(kills):
        time.sleep(rng.uniform(2.0, 4.0))
        assert broker.kill(kafka_dir)
        time.sleep(rng.uniform(0.5, 3.0))  # down for a while: requests must fail, not hang
        began = time.monotonic()
        broker.start(kafka_dir, port=port, controller_port=controller_port)
        restarts.append(time.monotonic() - began)
    return restarts


@contextlib.contextmanager
def _standard_and_fifo(gateway: GatewayProcess) -> Iterator[tuple[Workload, FifoWorkload]]:
    """A standard and a FIFO workload on one gateway (started), each on queues of its own;
    both stopped on leaving, then the gateway."""
    workloads: list[Workload | FifoWorkload] = []
    try:
        standard = Workload(
            gateway.endpoint,
            _queues(gateway.endpoint, SIZE.queues),
            SIZE.producers,
            SIZE.consumers,
        )
        workloads.append(standard)
        fifo = FifoWorkload(
            gateway.endpoint,
            fifo_queues(gateway.endpoint, SIZE.queues),
            SIZE.producers,
            SIZE.consumers,
        )
        workloads.append(fifo)
        for workload in workloads:
            workload.start()
        yield standard, fifo
    finally:
        for workload in workloads:
            workload.stop()
        gateway.stop()


def _finish_both(
    standard: Workload,
    fifo: FifoWorkload,
    gateway: GatewayProcess,
    cycles: dict[str, list[float]],
    connection_errors_expected: bool,
) -> None:
    fifo.stop_producing()  # both drain at once
    _finish(standard, gateway, standard.queue_urls, cycles, connection_errors_expected)
    finish_fifo(fifo, gateway.endpoint, fifo.queue_urls, "FIFO workload on the same gateway")


# Single gateways: FIFO queues on 2 partitions, so that a FIFO queue's groups are spread.
ONE_GATEWAY_ENV = {"KQS_PARTITIONS": "2"}


@pytest.mark.slow
def test_gateway_sigkill_cycles(kafka_bootstrap: str, tmp_path: Path) -> None:
    """One gateway carrying a standard and a FIFO workload is SIGKILLed at random points and
    started again on its data directory."""
    gateway = GatewayProcess(tmp_path / "gateway", kafka_bootstrap, env=ONE_GATEWAY_ENV)
    gateway.start()
    rng = random.Random(5)
    restarts: list[float] = []
    with _standard_and_fifo(gateway) as (standard, fifo):
        for _ in range(SIZE.gateway_kills):
            time.sleep(rng.uniform(1.0, 3.0))  # traffic, then a crash at a random point
            standard.ledger.gateway_killed()
            fifo.ledger.gateway_killed()
            gateway.kill()
            began = time.monotonic()
            gateway.start()
            restarts.append(time.monotonic() - began)
        cycles = {"gateway SIGKILL cycles, start to ready": restarts}
        _finish_both(standard, fifo, gateway, cycles, connection_errors_expected=True)


@pytest.mark.slow
def test_broker_sigkill_cycles(kafka_dir: Path, tmp_path: Path) -> None:
    """The broker under one gateway carrying a standard and a FIFO workload is SIGKILLed and
    started again; the gateway stays up throughout."""
    port, controller_port = free_port(), free_port()
    info = broker.start(kafka_dir, port=port, controller_port=controller_port)
    # Its broker on its machine: the gateway syncs the queue topics' segments, as `kqs serve`
    # does with its embedded broker, so each kill finds logs the broker never flushed itself.
    env = ONE_GATEWAY_ENV | _segment_sync(kafka_dir)
    gateway = GatewayProcess(tmp_path / "gateway", info.bootstrap, env=env)
    gateway.start()
    rng = random.Random(7)
    with _standard_and_fifo(gateway) as (standard, fifo):
        restarts = _broker_kill_cycles(kafka_dir, port, controller_port, rng, SIZE.broker_kills)
        cycles = {"broker SIGKILL cycles, start to ready": restarts}
        # The gateway stays up throughout: clients never lose their connection to it.
        _finish_both(standard, fifo, gateway, cycles, connection_errors_expected=False)


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
        kills = SIZE.group_broker_kills
        restarts = _broker_kill_cycles(kafka_dir, port, controller_port, rng, kills)
        cycles = {"broker SIGKILL under two gateways, start to ready": restarts}
        _finish(workload, serving[0], urls, cycles, connection_errors_expected=False)


# Longer than the ingest group's session (6 s): the others take the stopped gateway's
# partitions and restore them while it sleeps.
STOPPED_FOR_S = 8.0


@pytest.mark.slow
def test_partition_hand_over_and_stop_cycles(kafka_bootstrap: str, tmp_path: Path) -> None:
    """Scale-out: two gateways share the queues' partitions (group mode) and carry the load,
    alternating protocols and gateways per thread.

    A third joins, takes partitions (restored from the changelog), and leaves again,
    repeatedly, in turn with SIGTERM (it releases them with its changelog flushed) and
    SIGKILL (the group moves them after its session timeout; the others restore what
    reached the changelog).

    Then it joins for good, carries load of its own, and is stopped (SIGSTOP) past its
    session, so the group gives its partitions to the others, and woken (SIGCONT) with client
    and forwarded requests waiting in its sockets, repeatedly (a long garbage-collection
    pause, a stalled VM). What it answers on waking must not be undone by the gateways that
    took its partitions (`gateway/cluster/pause_watch.py`).

    Every message is accounted for as in the kill cycles."""
    env = SCALE_OUT_ENV
    serving = [GatewayProcess(tmp_path / f"gateway-{i}", kafka_bootstrap, env=env) for i in (1, 2)]
    visitor = GatewayProcess(tmp_path / "gateway-3", kafka_bootstrap, env=env)
    rng = random.Random(11)
    joins: list[float] = []  # the third gateway's start to ready
    stopped: list[float] = []
    with _group_under_load(serving) as (urls, workload):
        own: Workload | None = None
        try:
            for cycle in range(SIZE.hand_overs):
                time.sleep(rng.uniform(1.0, 3.0))
                began = time.monotonic()
                visitor.start()  # joins the group: partitions move to it
                joins.append(time.monotonic() - began)
                time.sleep(rng.uniform(2.0, 4.0))
                if cycle % 2 == 0:
                    assert visitor.terminate() == 0  # and back
                else:
                    workload.ledger.gateway_killed()
                    visitor.kill()
            visitor.start()
            # Its own clients, whose requests wait in its sockets while it is stopped.
            own = Workload(visitor.endpoint, urls, 1, 1, ledger=workload.ledger, name="v")
            own.start()
            pid = visitor.pid
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
            cycles = {
                "third gateway joining and leaving (SIGTERM, SIGKILL in turn), start to ready": (
                    joins
                ),
                "third gateway SIGSTOP / SIGCONT cycles, stopped": stopped,
            }
            _finish(
                workload, serving[0], urls, cycles, connection_errors_expected=False, others=(own,)
            )
        finally:
            if own is not None:
                own.stop()
            with contextlib.suppress(ProcessLookupError, TypeError):
                os.kill(visitor.pid, signal.SIGCONT)  # type: ignore[arg-type]
            visitor.stop()


# Longer than the group session (6 s) and the brokers' own session with the controller
# (broker.session.timeout.ms, 9 s by default): the group coordinator and the partition
# leaders the stopped broker held move to the others, and it comes back to a cluster that went
# on without it.
BROKER_STOPPED_FOR_S = 15.0
# Longer than the group session (6 s) and a rebalance: the other gateways take the cut one's
# partitions while it still runs and its clients still reach it.
CUT_FOR_S = 15.0


def _served(gateway: GatewayProcess) -> int:
    """The queue partitions `gateway` serves (its /metrics), -1 if it does not answer."""
    try:
        with urllib.request.urlopen(f"{gateway.endpoint}/metrics", timeout=1) as answer:
            text = answer.read().decode()
    except OSError:
        return -1
    found = re.search(r"^kqs_partitions_served (\d+)", text, re.MULTILINE)
    return int(found.group(1)) if found else -1


def _until(check: Callable[[], bool], timeout_s: float) -> float | None:
    """Seconds until `check` holds (polled every 0.2 s), None if not within `timeout_s`."""
    began = time.monotonic()
    while time.monotonic() - began < timeout_s:
        if check():
            return time.monotonic() - began
        time.sleep(0.2)
    return None


def _broker_stop_cycles(
    cluster: KafkaCluster, rng: random.Random, workload: Workload, stops: int
) -> list[float]:
    """SIGSTOP a random broker for `BROKER_STOPPED_FOR_S`, then SIGCONT it, `stops` times;
    for each, the longest time without an acknowledged send from the stop until 5 s after
    the wake-up."""
    gaps = []
    for _ in range(stops):
        time.sleep(rng.uniform(2.0, 4.0))
        node = rng.randrange(len(cluster.nodes))
        pid = broker.status(cluster.data_dirs[node]).pid
        assert pid is not None
        began = time.monotonic()
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(BROKER_STOPPED_FOR_S)
        finally:
            os.kill(pid, signal.SIGCONT)
        workload.ledger.fault(f"SIGSTOP of broker {node + 1}", began)
        time.sleep(5.0)
        gaps.append(workload.ledger.longest_send_gap(began, time.monotonic()))
    return gaps


def _cut_cycles(
    workload: Workload,
    island: Island,
    cut_off: GatewayProcess,
    others: list[GatewayProcess],
    rng: random.Random,
    cycles: dict[str, list[float]],
    cuts: int,
) -> None:
    """Cut `cut_off` (on `island`) off the brokers and its peers for `CUT_FOR_S` while it
    runs and its clients reach it, then restore its link, `cuts` times. Measured: until the
    `others` serve every partition (failover), and from the restore until the three serve
    them all again with `cut_off` serving its share (rejoin)."""
    total = SIZE.queues * int(SCALE_OUT_ENV["KQS_PARTITIONS"])
    failover = cycles.setdefault("cut gateway: until the others serve all partitions", [])
    rejoin = cycles.setdefault("cut gateway: from the restore until it serves again", [])
    everyone = [cut_off, *others]
    for _ in range(cuts):
        # Settled first: every partition served, by the three.
        _until(lambda: sum(_served(g) for g in everyone) == total, 60)
        time.sleep(rng.uniform(2.0, 4.0))
        island.cut()
        began = time.monotonic()
        try:
            took = _until(lambda: sum(_served(g) for g in others) == total, CUT_FOR_S)
            if took is None:
                report(f"cut at {began:.1f}: the others did not serve every partition within it")
            failover.append(CUT_FOR_S if took is None else took)  # at least, then
            time.sleep(max(0.0, CUT_FOR_S - (took or CUT_FOR_S)))
        finally:
            island.restore()
            workload.ledger.fault(f"cut of gateway :{cut_off.port}", began)
        back = _until(
            lambda: _served(cut_off) > 0 and sum(_served(g) for g in everyone) == total, 60
        )
        if back is None:
            report(f"cut at {began:.1f}: the cut gateway did not serve again within 60 s")
        rejoin.append(60.0 if back is None else back)


@pytest.mark.slow
def test_cluster_faults(tmp_path: Path) -> None:
    """Scale-out on the deployment `compose/` describes: three group-mode gateways on three
    brokers (replication factor 3, min.insync.replicas 2) carry the load, alternating
    gateways and protocols per thread, while, in turn:

    - a random gateway is SIGKILLed and restarted (its partitions move to the others after
      its session times out, are restored from the changelog, and may come back);
    - a random broker is SIGKILLed and restarted (the acknowledged records are on two
      others; the group coordinator and partition leaders move);
    - a random broker is stopped (SIGSTOP) past the group session and the brokers' own, and
      woken (a broker's long pause: its coordinator and leaders move, it then finds its
      requests' answers stale);
    - the third gateway, on a network namespace of its own, is cut off the brokers and its
      peers while it keeps running and its clients still reach it, then its link restored
      (the others take its partitions; what it still answers must not deliver a message
      twice inside its lease nor undo their work).

    Every message is accounted for as in the kill cycles."""
    why_not = crash_netns.unavailable() if SIZE.cluster_cuts else "no cuts at this size"
    island = None if why_not else Island.pick()
    if island is not None:
        island.create()
    host = island.cluster_host if island is not None else "127.0.0.1"
    cluster = KafkaCluster(tmp_path / "cluster", host=host)
    serving = [
        GatewayProcess(tmp_path / f"gateway-{i}", cluster.bootstrap, env=SCALE_OUT_ENV, host=host)
        for i in range(2)
    ]
    if island is not None:
        port = free_port()
        env = SCALE_OUT_ENV | {"KQS_ADVERTISED_URL": f"http://{island.peer_host}:{port}"}
        third = GatewayProcess(
            tmp_path / "gateway-2",
            cluster.bootstrap,
            port=port,
            env=env,
            args=["--host", "0.0.0.0"],
            host=island.client_host,
            wrap=island.wrap,
        )
    else:
        third = GatewayProcess(tmp_path / "gateway-2", cluster.bootstrap, env=SCALE_OUT_ENV)
    serving.append(third)
    rng = random.Random(17)
    cycles: dict[str, list[float]] = {
        "gateway SIGKILL, start to ready": [],
        "broker SIGKILL, start to ready": [],
    }
    try:
        cluster.start()
        with _group_under_load(serving, start_timeout_s=120) as (urls, workload):
            for _ in range(SIZE.cluster_gateway_kills):
                time.sleep(rng.uniform(2.0, 4.0))
                victim = rng.choice(serving)
                workload.ledger.gateway_killed()
                killed = time.monotonic()
                victim.kill()
                time.sleep(rng.uniform(0.5, 3.0))
                began = time.monotonic()
                victim.start(timeout_s=120)
                cycles["gateway SIGKILL, start to ready"].append(time.monotonic() - began)
                workload.ledger.fault(f"SIGKILL of gateway :{victim.port}", killed)
            for _ in range(SIZE.cluster_broker_kills):
                time.sleep(rng.uniform(2.0, 4.0))
                node = rng.randrange(len(cluster.nodes))
                killed = time.monotonic()
                cluster.kill(node)
                time.sleep(rng.uniform(2.0, 5.0))  # two brokers left: acks=all still succeeds
                began = time.monotonic()
                cluster.restart(node)
                cycles["broker SIGKILL, start to ready"].append(time.monotonic() - began)
                workload.ledger.fault(f"SIGKILL of broker {node + 1}", killed)
            stops = SIZE.cluster_broker_stops
            cycles["broker SIGSTOP, longest time without an acknowledged send"] = (
                _broker_stop_cycles(cluster, rng, workload, stops)
            )
            if island is None and SIZE.cluster_cuts:
                report(f"NOT RUN: the network cut ({why_not})")
                warnings.warn(f"crash suite: the network cut did not run: {why_not}", stacklevel=1)
            elif island is not None:
                _cut_cycles(workload, island, third, serving[:2], rng, cycles, SIZE.cluster_cuts)
            # A client of a killed gateway sees its connection refused until it is back.
            _finish(
                workload,
                serving[0],
                urls,
                cycles,
                connection_errors_expected=True,
                fail_within_s=CLUSTER_FAIL_WITHIN_S,
            )
    finally:
        for data_dir in cluster.data_dirs:  # never left stopped, whatever failed
            pid = broker.status(data_dir).pid
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
        cluster.stop()
        if island is not None:
            island.destroy()
