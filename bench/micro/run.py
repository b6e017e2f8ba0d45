"""The phases of the request-path microbenchmark and their statistics.

One gateway app per lease store (RocksDB in a temporary directory, and the memory store), built
by `gateway.app.build_app` with the Kafka stand-ins of `standins.py`, started by an
`AppRunner` as `kqs serve` starts it, and driven through one in-memory keep-alive connection
(`driver.py`), one request at a time. Each round, for each store and each protocol, a new
queue goes through these phases, N requests each, all requests of a phase signed before it
starts:

  SendMessage → ReceiveMessage (1) → ChangeMessageVisibility → DeleteMessage →
  ReceiveMessage on the empty queue → SendMessageBatch (10) → ReceiveMessage (10) →
  ChangeMessageVisibilityBatch (10) → DeleteMessageBatch (10)

Every answer is checked (status 200, bodies, batch entries all successful) and so are the
queue's exact counts in the lease store after each phase; a phase that did not do its work
stops the run. Per request the process CPU time (all threads: RocksDB's too), the event-loop
thread's CPU time and the wall time are recorded.
"""

from __future__ import annotations

import gc
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from bench.micro import wire
from bench.micro.driver import Connection
from bench.micro.standins import STORES, InProcessKafka
from gateway.actions.runtime import Runtime
from gateway.app import build_app
from gateway.common.config import Settings
from gateway.http.pipeline import RUNTIME
from gateway.iam.config import load_directory

BODY = "x" * 1024  # 1 KB, as in the side-by-side benchmark
VISIBILITY_S = 60
ACCOUNT_ID = "000000000000"


@dataclass(frozen=True)
class Phase:
    name: str  # the row of the report
    action: str
    messages_per_request: int


PHASES = (
    Phase("SendMessage", "SendMessage", 1),
    Phase("ReceiveMessage (1)", "ReceiveMessage", 1),
    Phase("ChangeMessageVisibility", "ChangeMessageVisibility", 1),
    Phase("DeleteMessage", "DeleteMessage", 1),
    Phase("ReceiveMessage (empty)", "ReceiveMessage", 0),
    Phase("SendMessageBatch (10)", "SendMessageBatch", 10),
    Phase("ReceiveMessage (10)", "ReceiveMessage", 10),
    Phase("ChangeMessageVisibilityBatch (10)", "ChangeMessageVisibilityBatch", 10),
    Phase("DeleteMessageBatch (10)", "DeleteMessageBatch", 10),
)


@dataclass
class Samples:
    """Per-request costs of one (store, protocol, phase), in µs, over all measured rounds."""

    cpu_us: list[float] = field(default_factory=list)
    thread_us: list[float] = field(default_factory=list)
    wall_us: list[float] = field(default_factory=list)
    round_cpu_medians: list[float] = field(default_factory=list)


@dataclass
class Checks:
    """What the phases did, for the test and the report: never timings."""

    requests: int = 0
    bodies_received: int = 0
    batch_entries_ok: int = 0
    # (store, protocol, phase) -> the queue's (visible, in flight, delayed) after the phase
    counts: dict[tuple[str, str, str], tuple[int, int, int]] = field(default_factory=dict)
    events_published: int = 0
    # Queue records the stand-in ingest read back and found applied already (the gateway
    # applied them from their delivery reports), and those it handed over to be applied.
    ingest_skipped: int = 0
    queue_records: int = 0


@dataclass
class Result:
    samples: dict[tuple[str, str, str], Samples]
    checks: Checks
    iterations: int
    rounds: int
    warmup_iterations: int


class Failed(AssertionError):
    """A request or phase did not do what it should: the figures would mean nothing."""


class _Gateway:
    """One app with one store, started as `kqs serve` starts it, and one connection to it."""

    def __init__(self, store: str, work: Path) -> None:
        self.store = store
        settings = Settings(data_dir=work / store, kafka_bootstrap="in-process")
        self.kafka = InProcessKafka(settings, store, work / store / "leases")
        directory = load_directory("", settings.account_id, False)
        self.app = build_app(settings, directory=directory, kafka=self.kafka)
        self.runner = web.AppRunner(self.app, shutdown_timeout=5)
        self.front = settings.http_front
        self.connection: Connection | None = None

    async def start(self) -> None:
        await self.runner.setup()
        self.connection = Connection(self.runner, self.front)

    async def stop(self) -> None:
        if self.connection is not None:
            self.connection.close()
        await self.runner.cleanup()

    @property
    def runtime(self) -> Runtime:
        return self.app[RUNTIME]

    async def call(self, raw: bytes) -> tuple[int, bytes]:
        assert self.connection is not None
        return await self.connection.request(raw)


def _entries(handles: list[str], **extra: Any) -> list[dict[str, Any]]:
    return [{"Id": str(i), "ReceiptHandle": h, **extra} for i, h in enumerate(handles)]


async def _one_queue(
    gw: _Gateway,
    protocol: str,
    name: str,
    n: int,
    record: dict[tuple[str, str, str], Samples] | None,
    checks: Checks,
) -> None:
    """All phases on a new queue, `n` requests each; samples go to `record` unless None."""
    status, body = await gw.call(wire.signed(protocol, "CreateQueue", {"QueueName": name}))
    created = wire.parse(protocol, status, body)
    if status != 200 or created.queue_url is None:
        raise Failed(f"CreateQueue {name}: HTTP {status} {body[:300]!r}")
    url = created.queue_url
    queue = gw.runtime.registry.active(wire.REGION, ACCOUNT_ID, name)
    assert queue is not None
    handles: list[str] = []

    def requests_for(phase: Phase) -> list[bytes]:
        action = phase.action
        params: list[dict[str, Any]]
        if action == "SendMessage":
            params = [{"QueueUrl": url, "MessageBody": BODY}] * n
        elif action == "SendMessageBatch":
            entries = [{"Id": str(i), "MessageBody": BODY} for i in range(10)]
            params = [{"QueueUrl": url, "Entries": entries}] * n
        elif action == "ReceiveMessage":
            params = [
                {
                    "QueueUrl": url,
                    "MaxNumberOfMessages": max(1, phase.messages_per_request),
                    "VisibilityTimeout": VISIBILITY_S,
                    "WaitTimeSeconds": 0,
                }
            ] * n
        elif action == "ChangeMessageVisibility":
            params = [
                {"QueueUrl": url, "ReceiptHandle": h, "VisibilityTimeout": VISIBILITY_S * 2}
                for h in handles
            ]
        elif action == "DeleteMessage":
            params = [{"QueueUrl": url, "ReceiptHandle": h} for h in handles]
        elif action == "ChangeMessageVisibilityBatch":
            params = [
                {
                    "QueueUrl": url,
                    "Entries": _entries(handles[i : i + 10], VisibilityTimeout=VISIBILITY_S * 2),
                }
                for i in range(0, len(handles), 10)
            ]
        else:
            params = [
                {"QueueUrl": url, "Entries": _entries(handles[i : i + 10])}
                for i in range(0, len(handles), 10)
            ]
        return [wire.signed(protocol, action, p) for p in params]

    for phase in PHASES:
        raws = requests_for(phase)
        if len(raws) != n:
            raise Failed(f"{phase.name}: {len(raws)} requests prepared, {n} wanted")
        samples = Samples()
        received: list[str] = []
        process_time, thread_time, perf_counter = (
            time.process_time_ns,
            time.thread_time_ns,
            time.perf_counter_ns,
        )
        for raw in raws:
            c0, t0, w0 = process_time(), thread_time(), perf_counter()
            status, body = await gw.call(raw)
            w1, t1, c1 = perf_counter(), thread_time(), process_time()
            samples.cpu_us.append((c1 - c0) / 1000)
            samples.thread_us.append((t1 - t0) / 1000)
            samples.wall_us.append((w1 - w0) / 1000)
            answer = wire.parse(protocol, status, body)
            _check(phase, answer, body, received, checks)
        checks.requests += len(raws)
        if phase.action == "ReceiveMessage" and phase.messages_per_request:
            handles = received
        counts = gw.runtime.messages.counts(queue)
        got = (counts.visible, counts.in_flight, counts.delayed)
        expected = _expected_counts(phase, n)
        if got != expected:
            raise Failed(f"{gw.store} {protocol} after {phase.name}: counts {got}, not {expected}")
        checks.counts[(gw.store, protocol, phase.name)] = got
        if record is not None:
            kept = record.setdefault((gw.store, protocol, phase.name), Samples())
            kept.cpu_us += samples.cpu_us
            kept.thread_us += samples.thread_us
            kept.wall_us += samples.wall_us
            kept.round_cpu_medians.append(statistics.median(samples.cpu_us))


def _check(
    phase: Phase, answer: wire.Answer, body: bytes, received: list[str], checks: Checks
) -> None:
    if answer.status != 200:
        raise Failed(f"{phase.name}: HTTP {answer.status} {body[:300]!r}")
    if phase.action == "ReceiveMessage":
        if len(answer.messages) != phase.messages_per_request:
            raise Failed(
                f"{phase.name}: {len(answer.messages)} messages, {phase.messages_per_request} wanted"
            )
        for handle, text in answer.messages:
            if text != BODY:
                raise Failed(f"{phase.name}: body of {len(text)} chars differs from the one sent")
            received.append(handle)
        checks.bodies_received += len(answer.messages)
    elif phase.messages_per_request == 10:
        if answer.successful != 10 or answer.failed:
            raise Failed(f"{phase.name}: {answer.successful} ok, {answer.failed} failed")
        checks.batch_entries_ok += answer.successful


def _expected_counts(phase: Phase, n: int) -> tuple[int, int, int]:
    """(visible, in flight, delayed) of the phase's queue once the phase is done."""
    return {
        "SendMessage": (n, 0, 0),
        "ReceiveMessage (1)": (0, n, 0),
        "ChangeMessageVisibility": (0, n, 0),
        "DeleteMessage": (0, 0, 0),
        "ReceiveMessage (empty)": (0, 0, 0),
        "SendMessageBatch (10)": (10 * n, 0, 0),
        "ReceiveMessage (10)": (0, 10 * n, 0),
        "ChangeMessageVisibilityBatch (10)": (0, 10 * n, 0),
        "DeleteMessageBatch (10)": (0, 0, 0),
    }[phase.name]


async def run(
    iterations: int,
    rounds: int,
    warmup_iterations: int,
    stores: tuple[str, ...] = STORES,
    protocols: tuple[str, ...] = wire.PROTOCOLS,
    work_dir: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> Result:
    """Warm up each (store, protocol) once, then `rounds` measured rounds, alternating."""
    checks = Checks()
    samples: dict[tuple[str, str, str], Samples] = {}
    with tempfile.TemporaryDirectory(prefix="kqs-micro-", dir=work_dir) as tmp:
        gateways = [_Gateway(store, Path(tmp)) for store in stores]
        for gw in gateways:
            await gw.start()
        try:
            for round_no in range(rounds + 1):
                for gw in gateways:
                    for protocol in protocols:
                        warm = round_no == 0
                        if progress:
                            what = "warm-up" if warm else f"round {round_no}/{rounds}"
                            progress(f"{what}: {gw.store} {protocol}")
                        gc.collect()
                        await _one_queue(
                            gw,
                            protocol,
                            f"micro-{protocol}-{round_no}",
                            warmup_iterations if warm else iterations,
                            None if warm else samples,
                            checks,
                        )
        finally:
            for gw in gateways:
                checks.events_published += gw.kafka.event_publisher.count
                ingest = gw.kafka.log.ingest
                if ingest is not None:
                    checks.ingest_skipped += ingest.skipped
                    checks.queue_records += ingest.handed_over + ingest.skipped
                await gw.stop()
    return Result(samples, checks, iterations, rounds, warmup_iterations)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def summary(result: Result) -> list[dict[str, Any]]:
    """One row per (store, protocol, phase): medians and p99 in µs, per request and message."""
    rows = []
    per_message = {p.name: p.messages_per_request for p in PHASES}
    for (store, protocol, phase), s in result.samples.items():
        msgs = per_message[phase]
        row: dict[str, Any] = {
            "store": store,
            "protocol": protocol,
            "action": phase,
            "requests": len(s.cpu_us),
            "cpu_us_p50": round(statistics.median(s.cpu_us), 1),
            "cpu_us_p99": round(percentile(s.cpu_us, 0.99), 1),
            "thread_cpu_us_p50": round(statistics.median(s.thread_us), 1),
            "wall_us_p50": round(statistics.median(s.wall_us), 1),
            "wall_us_p99": round(percentile(s.wall_us, 0.99), 1),
            "round_cpu_us_p50": [round(v, 1) for v in s.round_cpu_medians],
            "messages_per_request": msgs,
        }
        if msgs > 1:
            row["cpu_us_per_message_p50"] = round(row["cpu_us_p50"] / msgs, 1)
            row["wall_us_per_message_p50"] = round(row["wall_us_p50"] / msgs, 1)
        rows.append(row)
    return rows
