"""The workloads, each a coroutine run against one fresh server through `loadgen.Client`.

(a) single / (b) batch: seed 000 appendix A's producer/consumer pair. Producer tasks send 1 KB
    messages (SendMessage, or SendMessageBatch of 10) for a fixed time; consumer tasks
    short-poll ReceiveMessage (1, or 10 with DeleteMessageBatch) and delete what they got,
    as the seed's Java sample does (its defaults: 16 producers / 32 consumers single,
    12 / 20 batched). Only operations completed inside the window count.
(c) long-poll wake: one consumer parked in a 20 s ReceiveMessage on an empty queue; a message
    is sent; the figure is the time from the SendMessage response to the receive returning.
(d) backlog drain: N messages queued with SendMessageBatch, then drained with ReceiveMessage
    of 10 + DeleteMessageBatch until the queue is empty (each phase time-capped; the size
    actually reached is reported).
(f) FIFO: a FIFO queue with content-based deduplication; producers send SendMessageBatch of
    10 to message groups of their own (one group per batch, groups in turn), each body naming
    its group and a sequence number; consumers receive 10 and delete them in a batch. The
    load generator checks order per group: a message whose sequence number is not above the
    last one seen for its group is counted out of order (a redelivery would be too, and none
    is expected: the visibility timeout outlasts the run).
(e) scale (seed 004): users × queues per user × messages per queue, then `in_flight`
    messages received and held per queue; every phase is time-capped and reports the size
    reached. All "users" share the test/test credentials (the servers verify one identity),
    so a user is a queue-name prefix.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Any

import aiohttp

from bench.sidebyside.loadgen import Client, SqsError, percentile

BODY = "x" * 1024  # 1 KB, as in the seed
_RETRYABLE = (SqsError, aiohttp.ClientError, TimeoutError)


@dataclass(frozen=True)
class PairParams:
    producers: int
    consumers: int
    duration_s: float
    batch: bool


def pair_params(batch: bool, duration_s: float) -> PairParams:
    """Workload (a), single calls (16 producers, 32 consumers), or with `batch` workload (b),
    batch calls (12 producers, 20 consumers), for `duration_s`."""
    if batch:
        return PairParams(12, 20, duration_s, batch=True)
    return PairParams(16, 32, duration_s, batch=False)


async def warm_up(client: Client, seconds: float) -> None:
    """Unmeasured load before a measured run (the JVM servers' JIT warm-up; every server
    alike): half of `seconds` single calls, then half batch calls, 8 producers, 8 consumers."""
    for batch in (False, True):
        await producer_consumer(client, PairParams(8, 8, seconds / 2, batch=batch))


async def send_batch(client: Client, url: str, n: int) -> int:
    """SendMessageBatch of `n` 1 KB messages; returns how many the server accepted."""
    result = await client.call(
        "SendMessageBatch",
        {"QueueUrl": url, "Entries": [{"Id": str(i), "MessageBody": BODY} for i in range(n)]},
    )
    return len(result.get("Successful", []))


async def delete_batch(client: Client, url: str, messages: list[dict[str, Any]]) -> int:
    """DeleteMessageBatch of received `messages`; returns how many the server deleted."""
    result = await client.call(
        "DeleteMessageBatch",
        {
            "QueueUrl": url,
            "Entries": [
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)
            ],
        },
    )
    return len(result.get("Successful", []))


def latency_summary(client: Client) -> dict[str, dict[str, float | int | None]]:
    out: dict[str, dict[str, float | int | None]] = {}
    for action, values in sorted(client.stats.latencies_ms.items()):
        out[action] = {
            "n": len(values),
            "p50_ms": _r(percentile(values, 0.50)),
            "p99_ms": _r(percentile(values, 0.99)),
            "p999_ms": _r(percentile(values, 0.999)),
        }
    return out


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def _errors(client: Client) -> dict[str, Any]:
    return {"counts": dict(client.stats.errors), "samples": list(client.stats.error_samples)}


async def producer_consumer(client: Client, params: PairParams) -> dict[str, Any]:
    url = await client.create_queue(f"pair-{uuid.uuid4().hex[:8]}")
    sent = 0
    done = 0
    began = time.monotonic()
    stop_at = began + params.duration_s

    async def produce() -> None:
        nonlocal sent
        while time.monotonic() < stop_at:
            try:
                if params.batch:
                    n = await send_batch(client, url, 10)
                else:
                    await client.call("SendMessage", {"QueueUrl": url, "MessageBody": BODY})
                    n = 1
            except _RETRYABLE:
                await asyncio.sleep(0.01)
                continue
            if time.monotonic() <= stop_at:
                sent += n

    async def consume() -> None:
        nonlocal done
        while time.monotonic() < stop_at:
            try:
                result = await client.call(
                    "ReceiveMessage",
                    {"QueueUrl": url, "MaxNumberOfMessages": 10 if params.batch else 1},
                )
                messages = result.get("Messages") or []
                if not messages:
                    continue
                if params.batch:
                    n = await delete_batch(client, url, messages)
                else:
                    await client.call(
                        "DeleteMessage",
                        {"QueueUrl": url, "ReceiptHandle": messages[0]["ReceiptHandle"]},
                    )
                    n = 1
            except _RETRYABLE:
                await asyncio.sleep(0.01)
                continue
            if time.monotonic() <= stop_at:
                done += n

    await asyncio.gather(
        *(produce() for _ in range(params.producers)),
        *(consume() for _ in range(params.consumers)),
    )
    window = params.duration_s
    return {
        "params": {
            "producers": params.producers,
            "consumers": params.consumers,
            "duration_s": params.duration_s,
            "batch": params.batch,
            "body_bytes": len(BODY),
            "receive": "short poll (WaitTimeSeconds 0), as the seed's sample",
        },
        "sent": sent,
        "received_deleted": done,
        "sent_per_s": round(sent / window, 1),
        "received_deleted_per_s": round(done / window, 1),
        "latency": latency_summary(client),
        "errors": _errors(client),
    }


async def long_poll_wake(client: Client, rounds: int, park_s: float = 0.5) -> dict[str, Any]:
    url = await client.create_queue(f"wake-{uuid.uuid4().hex[:8]}")
    wake_ms: list[float] = []  # send acknowledged -> receive returned (negative: before the ack)
    send_to_wake_ms: list[float] = []  # send issued -> receive returned
    misses = 0

    async def parked() -> tuple[dict[str, Any], float]:
        result = await client.call(
            "ReceiveMessage",
            {"QueueUrl": url, "WaitTimeSeconds": 20, "MaxNumberOfMessages": 1},
            record=False,
        )
        return result, time.perf_counter()

    for _ in range(rounds):
        receive = asyncio.create_task(parked())
        await asyncio.sleep(park_s)  # the receive is parked on the empty queue by now
        issued = time.perf_counter()
        await client.call("SendMessage", {"QueueUrl": url, "MessageBody": BODY})
        acked = time.perf_counter()
        result, returned = await receive
        messages = result.get("Messages") or []
        if not messages:
            misses += 1  # the wait ran out without the message: a failed wake
            continue
        wake_ms.append((returned - acked) * 1000)
        send_to_wake_ms.append((returned - issued) * 1000)
        await client.call(
            "DeleteMessage", {"QueueUrl": url, "ReceiptHandle": messages[0]["ReceiptHandle"]}
        )
    return {
        "params": {"rounds": rounds, "park_s": park_s, "wait_time_s": 20},
        "woken": len(wake_ms),
        "missed": misses,
        "wake_p50_ms": _r(percentile(wake_ms, 0.5)),
        "wake_p99_ms": _r(percentile(wake_ms, 0.99)),
        "wake_max_ms": _r(max(wake_ms) if wake_ms else None),
        "send_to_wake_p50_ms": _r(percentile(send_to_wake_ms, 0.5)),
        "send_to_wake_p99_ms": _r(percentile(send_to_wake_ms, 0.99)),
        "latency": latency_summary(client),
        "errors": _errors(client),
    }


async def backlog_drain(
    client: Client, size: int, concurrency: int, phase_cap_s: float
) -> dict[str, Any]:
    url = await client.create_queue(f"backlog-{uuid.uuid4().hex[:8]}")
    batches = (size + 9) // 10
    next_batch = 0
    sent = 0
    began = time.monotonic()
    fill_deadline = began + phase_cap_s

    async def fill() -> None:
        nonlocal next_batch, sent
        while next_batch < batches and time.monotonic() < fill_deadline:
            next_batch += 1
            try:
                accepted = await send_batch(client, url, 10)
            except _RETRYABLE:
                next_batch -= 1
                await asyncio.sleep(0.05)
                continue
            sent += accepted

    await asyncio.gather(*(fill() for _ in range(concurrency)))
    fill_s = time.monotonic() - began

    # Wait until the server counts the backlog as visible (KQS ingests from Kafka).
    settle_began = time.monotonic()
    while time.monotonic() - settle_began < min(600.0, phase_cap_s):
        visible, _ = await client.count(url)
        if visible >= sent:
            break
        await asyncio.sleep(0.5)
    settle_s = time.monotonic() - settle_began

    drained = 0
    empty_streak = 0
    drain_began = time.monotonic()
    drain_deadline = drain_began + phase_cap_s

    async def drain() -> None:
        nonlocal drained, empty_streak
        while drained < sent and time.monotonic() < drain_deadline:
            try:
                result = await client.call(
                    "ReceiveMessage",
                    {"QueueUrl": url, "MaxNumberOfMessages": 10, "WaitTimeSeconds": 1},
                )
                messages = result.get("Messages") or []
                if not messages:
                    empty_streak += 1
                    if empty_streak > 3 * concurrency:
                        return
                    continue
                empty_streak = 0
                deleted = await delete_batch(client, url, messages)
            except _RETRYABLE:
                await asyncio.sleep(0.05)
                continue
            drained += deleted

    await asyncio.gather(*(drain() for _ in range(concurrency)))
    drain_s = time.monotonic() - drain_began
    return {
        "params": {
            "requested": size,
            "concurrency": concurrency,
            "phase_cap_s": phase_cap_s,
            "body_bytes": len(BODY),
        },
        "sent": sent,
        "received_deleted": drained,
        "complete": sent >= size and drained >= sent,
        "fill_s": round(fill_s, 2),
        "settle_s": round(settle_s, 2),
        "drain_s": round(drain_s, 2),
        "sent_per_s": round(sent / fill_s, 1) if fill_s else None,
        "received_deleted_per_s": round(drained / drain_s, 1) if drain_s else None,
        "latency": latency_summary(client),
        "errors": _errors(client),
    }


HOLD_VISIBILITY_S = 43_200


@dataclass(frozen=True)
class ScaleParams:
    users: int
    queues_per_user: int
    messages_per_queue: int
    in_flight: int
    concurrency: int
    phase_cap_s: float
    progress_every_s: float = 60.0


async def scale(client: Client, params: ScaleParams) -> dict[str, Any]:
    names = [
        f"u{u:03d}-q{q:03d}-{uuid.uuid4().hex[:4]}"
        for u in range(params.users)
        for q in range(params.queues_per_user)
    ]
    urls: list[str] = []
    phases: dict[str, Any] = {}

    async def run_phase(label: str, jobs: list[Any], worker: Any) -> int:
        """Run `worker(job)` over jobs with bounded concurrency until done or time is up."""
        began = time.monotonic()
        deadline = began + params.phase_cap_s
        index = 0
        ok = 0

        async def loop() -> None:
            nonlocal index, ok
            while index < len(jobs) and time.monotonic() < deadline:
                job = jobs[index]
                index += 1
                try:
                    n = await worker(job)  # not `ok += await ...`: that reads ok before awaiting
                except _RETRYABLE:
                    await asyncio.sleep(0.05)
                    continue
                ok += n

        async def report_progress() -> None:
            # A phase of the full profile runs for most of an hour: say where it is.
            while True:
                await asyncio.sleep(params.progress_every_s)
                elapsed = time.monotonic() - began
                print(
                    f"[{time.strftime('%H:%M:%S')}]     {label}: {index:,}/{len(jobs):,} jobs,"
                    f" {ok:,} done, {ok / elapsed:,.0f}/s",
                    file=sys.stderr,
                    flush=True,
                )

        reporter = asyncio.create_task(report_progress())
        try:
            await asyncio.gather(*(loop() for _ in range(params.concurrency)))
        finally:
            reporter.cancel()
        elapsed = time.monotonic() - began
        phases[label] = {
            "jobs": len(jobs),
            "done": ok,
            "seconds": round(elapsed, 2),
            "per_s": round(ok / elapsed, 1) if elapsed else None,
            "timed_out": time.monotonic() >= deadline,
        }
        return ok

    async def create(name: str) -> int:
        urls.append(await client.create_queue(name))
        return 1

    await run_phase("create_queues", names, create)

    per_batch = 10
    send_jobs = [
        (url, min(per_batch, params.messages_per_queue - start))
        for url in urls
        for start in range(0, params.messages_per_queue, per_batch)
    ]

    async def send(job: tuple[str, int]) -> int:
        url, n = job
        return await send_batch(client, url, n)

    sent = await run_phase("send", send_jobs, send)

    # Hold `in_flight` messages per queue: receive without deleting, for SQS's longest
    # visibility timeout (12 h), so that none is visible again while the phase goes on (the
    # full profile's hold phase took 17 minutes; with 600 s the first queues' holds lapsed).
    recv_jobs = [url for url in urls for _ in range((params.in_flight + 9) // 10)]

    async def hold(url: str) -> int:
        result = await client.call(
            "ReceiveMessage",
            {
                "QueueUrl": url,
                "MaxNumberOfMessages": 10,
                "VisibilityTimeout": HOLD_VISIBILITY_S,
                "WaitTimeSeconds": 1,
            },
        )
        return len(result.get("Messages") or [])

    held = await run_phase("receive_in_flight", recv_jobs, hold)

    # Check the servers' own counts on a sample of queues.
    sample = urls[:: max(1, len(urls) // 20)][:20]
    counts = [await client.count(u) for u in sample]
    return {
        "params": {
            "users": params.users,
            "queues_per_user": params.queues_per_user,
            "messages_per_queue": params.messages_per_queue,
            "in_flight_per_queue": params.in_flight,
            "concurrency": params.concurrency,
            "phase_cap_s": params.phase_cap_s,
            "identity": "one credential (test/test) for all users; user = queue-name prefix",
        },
        "queues_created": len(urls),
        "messages_sent": sent,
        "messages_in_flight": held,
        "reached": {
            "queues": len(urls),
            "messages_per_queue": round(sent / len(urls), 1) if urls else 0,
            "in_flight_per_queue": round(held / len(urls), 1) if urls else 0,
        },
        "sample_counts_visible_inflight": counts,
        "phases": phases,
        "latency": latency_summary(client),
        "errors": _errors(client),
    }


@dataclass(frozen=True)
class OpenLoopParams:
    rate_per_s: float  # messages offered per second, sent and received alike
    duration_s: float
    grace_s: float = 10.0  # how long operations scheduled in the window may take to finish
    wait_time_s: int = 1  # long poll of each scheduled receive


async def open_loop(client: Client, params: OpenLoopParams) -> dict[str, Any]:
    """(o) fixed offered rate, coordinated-omission safe.

    SendMessage is issued at fixed times, `rate` per second, whether or not earlier sends
    have answered; so is a consumer operation (ReceiveMessage of 1 with a short long poll,
    then DeleteMessage of what it got), half a period after each send. Latency is measured
    from the *scheduled* time of each operation, not from when the client got round to it, so
    a server (or client) that falls behind shows it in the percentiles instead of quietly
    lowering the load.
    """
    url = await client.create_queue(f"open-{uuid.uuid4().hex[:8]}")
    period = 1.0 / params.rate_per_s
    send_ms: list[float] = []
    recv_del_ms: list[float] = []
    failed = {"send": 0, "receive_delete": 0}
    empty = 0
    began = time.perf_counter() + 0.05
    stop_at = began + params.duration_s
    # The operations not finished yet. Finished ones are let go at once: a list of every task
    # of the run kept ~40,000 of them (30 s at 657 msg/s) alive, and this client's own full
    # garbage collections grew with them to 160 ms every ~4.5 s, which every server's
    # latencies counted (bench/results/archive/profile-journal.md, 2026-11-29 (f545409)).
    pending: set[asyncio.Task[None]] = set()
    offered = 0
    lag_ms: list[float] = []  # how late the client issued operations (its own limit)

    async def send(scheduled: float) -> None:
        try:
            await client.call("SendMessage", {"QueueUrl": url, "MessageBody": BODY})
        except _RETRYABLE:
            failed["send"] += 1
            return
        send_ms.append((time.perf_counter() - scheduled) * 1000)

    async def receive_delete(scheduled: float) -> None:
        nonlocal empty
        try:
            result = await client.call(
                "ReceiveMessage",
                {
                    "QueueUrl": url,
                    "MaxNumberOfMessages": 1,
                    "WaitTimeSeconds": params.wait_time_s,
                },
            )
            messages = result.get("Messages") or []
            if not messages:
                empty += 1
                return
            await client.call(
                "DeleteMessage", {"QueueUrl": url, "ReceiptHandle": messages[0]["ReceiptHandle"]}
            )
        except _RETRYABLE:
            failed["receive_delete"] += 1
            return
        recv_del_ms.append((time.perf_counter() - scheduled) * 1000)

    async def schedule(operation: Any, offset_s: float) -> None:
        nonlocal offered
        i = 0
        while True:
            scheduled = began + offset_s + i * period
            if scheduled >= stop_at:
                return
            delay = scheduled - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            else:
                lag_ms.append(-delay * 1000)
            task = asyncio.create_task(operation(scheduled))
            pending.add(task)
            task.add_done_callback(pending.discard)
            offered += 1
            i += 1

    await asyncio.gather(schedule(send, 0.0), schedule(receive_delete, period / 2))
    unfinished: set[asyncio.Task[None]] = set()
    if pending:
        _done, unfinished = await asyncio.wait(set(pending), timeout=params.grace_s)
    for task in unfinished:
        task.cancel()
    await asyncio.gather(*unfinished, return_exceptions=True)
    window = params.duration_s
    return {
        "params": {
            "rate_per_s": round(params.rate_per_s, 1),
            "duration_s": params.duration_s,
            "grace_s": params.grace_s,
            "receive": f"ReceiveMessage of 1, WaitTimeSeconds {params.wait_time_s}, then "
            "DeleteMessage; one per send period, half a period after each send",
            "body_bytes": len(BODY),
            "latency": "from each operation's scheduled time (coordinated-omission safe)",
        },
        "offered_operations": offered,
        "unfinished_after_grace": len(unfinished),
        "sent": len(send_ms),
        "received_deleted": len(recv_del_ms),
        "empty_receives": empty,
        "failed": failed,
        "sent_per_s": round(len(send_ms) / window, 1),
        "received_deleted_per_s": round(len(recv_del_ms) / window, 1),
        "send_p50_ms": _r(percentile(send_ms, 0.50)),
        "send_p99_ms": _r(percentile(send_ms, 0.99)),
        "send_p999_ms": _r(percentile(send_ms, 0.999)),
        "recv_del_p50_ms": _r(percentile(recv_del_ms, 0.50)),
        "recv_del_p99_ms": _r(percentile(recv_del_ms, 0.99)),
        "recv_del_p999_ms": _r(percentile(recv_del_ms, 0.999)),
        "client_lag_p99_ms": _r(percentile(lag_ms, 0.99)) if lag_ms else 0.0,
        "latency": latency_summary(client),
        "errors": _errors(client),
    }


@dataclass(frozen=True)
class FifoParams:
    producers: int
    consumers: int
    groups_per_producer: int
    duration_s: float


async def fifo_pairs(client: Client, params: FifoParams) -> dict[str, Any]:
    """Workload (f): FIFO producers and consumers, order checked per message group."""
    url = await client.create_queue(
        f"fifo-{uuid.uuid4().hex[:8]}.fifo",
        {"FifoQueue": "true", "ContentBasedDeduplication": "true", "VisibilityTimeout": "120"},
    )
    sent = 0
    done = 0
    out_of_order = 0
    last_seen: dict[str, int] = {}
    began = time.monotonic()
    stop_at = began + params.duration_s

    async def produce(producer: int) -> None:
        nonlocal sent
        groups = [f"p{producer}-g{g}" for g in range(params.groups_per_producer)]
        next_seq = dict.fromkeys(groups, 0)
        turn = 0
        while time.monotonic() < stop_at:
            group = groups[turn % len(groups)]
            turn += 1
            first = next_seq[group]
            entries = [
                {
                    "Id": str(i),
                    # Unique bodies: content-based deduplication must not drop any.
                    "MessageBody": f"{group}:{first + i}:{BODY[:1000]}",
                    "MessageGroupId": group,
                }
                for i in range(10)
            ]
            try:
                result = await client.call(
                    "SendMessageBatch", {"QueueUrl": url, "Entries": entries}
                )
            except _RETRYABLE:
                await asyncio.sleep(0.01)
                continue
            ok = len(result.get("Successful", []))
            # A batch is all or nothing here; a partial one would reorder the retry, so the
            # group's numbers move on past whatever was sent.
            next_seq[group] = first + 10
            if time.monotonic() <= stop_at:
                sent += ok

    async def consume() -> None:
        nonlocal done, out_of_order
        while time.monotonic() < stop_at:
            try:
                result = await client.call(
                    "ReceiveMessage", {"QueueUrl": url, "MaxNumberOfMessages": 10}
                )
                messages = result.get("Messages") or []
                if not messages:
                    continue
                for m in messages:
                    group, seq_text, _ = m["Body"].split(":", 2)
                    seq = int(seq_text)
                    if seq <= last_seen.get(group, -1):
                        out_of_order += 1
                    last_seen[group] = max(seq, last_seen.get(group, -1))
                deleted = await delete_batch(client, url, messages)
            except _RETRYABLE:
                await asyncio.sleep(0.01)
                continue
            if time.monotonic() <= stop_at:
                done += deleted

    await asyncio.gather(
        *(produce(p) for p in range(params.producers)),
        *(consume() for _ in range(params.consumers)),
    )
    window = params.duration_s
    return {
        "params": {
            "producers": params.producers,
            "consumers": params.consumers,
            "groups": params.producers * params.groups_per_producer,
            "duration_s": params.duration_s,
            "batch": True,
            "body_bytes": len(BODY),
            "queue": "FIFO, ContentBasedDeduplication, SendMessageBatch of 10 per group",
        },
        "sent": sent,
        "received_deleted": done,
        "sent_per_s": round(sent / window, 1),
        "received_deleted_per_s": round(done / window, 1),
        "out_of_order": out_of_order,
        "groups_seen": len(last_seen),
        "latency": latency_summary(client),
        "errors": _errors(client),
    }
