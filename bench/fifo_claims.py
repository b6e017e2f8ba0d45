"""What a FIFO send of DeduplicationScope=queue costs with several gateways, where each id is
first claimed on its claim partition (`lease_store/fifo_claims.py`), against the same sends
of scope messageGroup, which need no claim.

Two group-mode gateways (`KQS_PARTITION_OWNERSHIP=group`) on one embedded broker; per scope
one FIFO queue of `--partitions` partitions; `--messages` sends, each with its own
deduplication id and one of `--groups` groups, through both gateways in turn, `--concurrency`
at a time. Prints sends per second and latency percentiles per scope, then the count of
messages each queue holds (must equal the sends: every id is new).

    python -m bench.fifo_claims [--messages 2000] [--concurrency 16] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.failover import Gateway
from bench.sidebyside.loadgen import Client, Stats
from bench.sidebyside.servers import free_port
from topology.embedded.broker import EmbeddedBroker


async def send_all(
    endpoints: list[str], url: str, messages: int, groups: int, concurrency: int, tag: str
) -> dict[str, Any]:
    stats = Stats()
    clients = [Client(e, pool=concurrency, stats=stats) for e in endpoints]
    for client in clients:
        await client.__aenter__()
    jobs = iter(range(messages))
    try:

        async def sender() -> None:
            for i in jobs:
                await clients[i % len(clients)].call(
                    "SendMessage",
                    {
                        "QueueUrl": url,
                        "MessageBody": f"body-{i}",
                        "MessageGroupId": f"group-{i % groups}",
                        "MessageDeduplicationId": f"{tag}-{i}",
                    },
                )

        began = time.perf_counter()
        await asyncio.gather(*(sender() for _ in range(concurrency)))
        elapsed = time.perf_counter() - began
    finally:
        for client in clients:
            await client.__aexit__(None, None, None)
    latencies = sorted(stats.latencies_ms["SendMessage"])
    return {
        "sends_per_s": round(messages / elapsed, 1),
        "p50_ms": round(statistics.median(latencies), 2),
        "p99_ms": round(latencies[int(len(latencies) * 0.99) - 1], 2),
        "errors": dict(stats.errors),
    }


async def held(endpoint: str, url: str) -> int:
    async with Client(endpoint, pool=1) as client:
        visible, in_flight = await client.count(url)
        return visible + in_flight


async def create(endpoint: str, name: str, scope: str) -> str:
    async with Client(endpoint, pool=1) as client:
        attributes = {"FifoQueue": "true", "DeduplicationScope": scope}
        if scope == "messageGroup":
            attributes["FifoThroughputLimit"] = "perMessageGroupId"
        return await client.create_queue(name, attributes)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--messages", type=int, default=2000)
    p.add_argument("--groups", type=int, default=64)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kqs-fifo-claims-"))
    results: dict[str, list[dict[str, Any]]] = {"queue": [], "messageGroup": []}
    with EmbeddedBroker(work / "kafka", port=free_port(), controller_port=free_port()) as info:
        gateways = [Gateway(n, work, info.bootstrap, args.partitions) for n in ("a", "b")]
        for gateway in gateways:
            gateway.start()
        try:
            endpoints = [g.endpoint for g in gateways]
            urls = {
                scope: asyncio.run(create(endpoints[0], f"claims-{scope}.fifo", scope))
                for scope in results
            }
            time.sleep(5)  # the new topics' partitions shared out between the gateways
            for round_ in range(args.rounds):
                for scope, url in urls.items():  # alternating, so load drifts hit both
                    tag = f"r{round_}"
                    run = asyncio.run(
                        send_all(endpoints, url, args.messages, args.groups, args.concurrency, tag)
                    )
                    print(f"{scope} round {round_ + 1}: {json.dumps(run)}", file=sys.stderr)
                    results[scope].append(run)
            time.sleep(2)
            for scope, url in urls.items():
                total = asyncio.run(held(endpoints[0], url))
                print(
                    f"{scope}: {total} messages held, {args.messages * args.rounds} sent",
                    file=sys.stderr,
                )
        finally:
            for gateway in gateways:
                gateway.stop()
    print(json.dumps({"params": vars(args), "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
