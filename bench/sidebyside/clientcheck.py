"""Which client limits first: the asyncio load generator or boto3 with threads.

Both drive the same server (the fastest peer, ElasticMQ, so the server is least likely to be
the limit) with SendMessage of 1 KB from `concurrency` tasks/threads on the client core for a
fixed time. The figure that matters is client CPU per request: one client core can issue at
most 1 / (CPU per request) requests per second, whatever the server does.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path
from typing import Any

from bench.sidebyside import servers
from bench.sidebyside.loadgen import ACCESS_KEY, REGION, SECRET_KEY, Client
from bench.sidebyside.workloads import BODY


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


async def _asyncio_run(endpoint: str, concurrency: int, duration_s: float) -> int:
    async with Client(endpoint, pool=concurrency) as client:
        url = await client.create_queue("clientcheck-asyncio")
        count = 0
        stop_at = time.monotonic() + duration_s

        async def worker() -> None:
            nonlocal count
            while time.monotonic() < stop_at:
                await client.call("SendMessage", {"QueueUrl": url, "MessageBody": BODY})
                count += 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return count


def _boto3_run(endpoint: str, concurrency: int, duration_s: float) -> tuple[int, float, float]:
    import boto3
    from botocore.config import Config

    client = boto3.client(
        "sqs",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        config=Config(max_pool_connections=concurrency, retries={"max_attempts": 1}),
    )
    url = client.create_queue(QueueName="clientcheck-boto3")["QueueUrl"]
    counts = [0] * concurrency
    cpu0, wall0 = _cpu(), time.monotonic()
    stop_at = wall0 + duration_s

    def worker(i: int) -> None:
        while time.monotonic() < stop_at:
            client.send_message(QueueUrl=url, MessageBody=BODY)
            counts[i] += 1

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts), _cpu() - cpu0, time.monotonic() - wall0


def run(
    work: Path,
    server_cores: list[int] | None,
    concurrency: int,
    duration_s: float,
    use_uvloop: bool,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "server": "elasticmq",
        "concurrency": concurrency,
        "duration_s": duration_s,
    }
    with servers.running("elasticmq", work, server_cores) as server:
        # Warm the JVM first so neither client is measured against a cold server.
        asyncio.run(_asyncio_run(server.endpoint, concurrency, max(5.0, duration_s)))
        cpu0, wall0 = _cpu(), time.monotonic()
        if use_uvloop:
            import uvloop

            n = uvloop.run(_asyncio_run(server.endpoint, concurrency, duration_s))
        else:
            n = asyncio.run(_asyncio_run(server.endpoint, concurrency, duration_s))
        cpu, wall = _cpu() - cpu0, time.monotonic() - wall0
        out["asyncio"] = _figures(n, cpu, wall)
        out["boto3_threads"] = _figures(*_boto3_run(server.endpoint, concurrency, duration_s))
    return out


def _figures(requests: int, cpu_s: float, wall_s: float) -> dict[str, float]:
    per_req_us = cpu_s / requests * 1e6 if requests else float("nan")
    return {
        "requests": requests,
        "requests_per_s": round(requests / wall_s, 1),
        "client_cpu_s": round(cpu_s, 2),
        "client_core_share": round(cpu_s / wall_s, 2),
        "client_cpu_us_per_request": round(per_req_us, 1),
        "ceiling_requests_per_s_one_core": round(1e6 / per_req_us, 0) if requests else 0.0,
    }


def markdown(check: dict[str, Any]) -> str:
    lines = [
        "## Load generator check (which client limits first)",
        "",
        f"SendMessage 1 KB to {check['server']}, {check['concurrency']} concurrent tasks/threads, "
        f"{check['duration_s']} s each, client pinned like the workloads.",
        "",
        "| client | requests/s | client core share | client CPU µs/request | ceiling on one core (req/s) |",
        "|---|---|---|---|---|",
    ]
    for key, label in (
        ("asyncio", "asyncio + aiohttp (used)"),
        ("boto3_threads", "boto3 + threads"),
    ):
        f = check[key]
        lines.append(
            f"| {label} | {f['requests_per_s']:,.0f} | {f['client_core_share']} "
            f"| {f['client_cpu_us_per_request']:,.0f} | {f['ceiling_requests_per_s_one_core']:,.0f} |"
        )
    lines.append("")
    return "\n".join(lines)
