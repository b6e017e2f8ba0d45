"""What fsync-per-record costs: the embedded broker with and without `flush_every_message`.

The embedded single-node broker sets `log.flush.interval.messages=1`, so a record is on disk
before it is acknowledged (there is no replica to fall back on after a power loss). This
script measures the price with the producer settings the gateway ships (`acks=all`,
idempotence, `linger.ms=2`), alternating the two broker settings (A, B, A, B...) on fresh
data directories:

- sequential: one 1 KiB record at a time, acknowledgement latency p50 / p99;
- concurrent: `--window` records in flight, records per second.

    .venv/bin/python bench/flush_policy.py [--pairs 3] [--records 1000] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.harness import free_port
from topology.admin import TopicAdmin
from topology.embedded import broker
from topology.producer import AsyncProducer

PAYLOAD = b"x" * 1024


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def measure(bootstrap: str, records: int, window: int) -> dict[str, float]:
    topic = f"flush-bench-{time.monotonic_ns()}"
    await TopicAdmin(bootstrap, 1).create_topic(topic, 1, {})
    producer = AsyncProducer(bootstrap)
    try:
        await producer.send(topic, b"warm-up")
        latencies: list[float] = []
        for _ in range(records):
            began = time.perf_counter()
            await producer.send(topic, PAYLOAD)
            latencies.append((time.perf_counter() - began) * 1000)
        semaphore = asyncio.Semaphore(window)

        async def one() -> None:
            async with semaphore:
                await producer.send(topic, PAYLOAD)

        began = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(records * 4)))
        elapsed = time.perf_counter() - began
    finally:
        producer.close()
    return {
        "p50_ms": statistics.median(latencies),
        "p99_ms": percentile(latencies, 0.99),
        "records_per_s": records * 4 / elapsed,
    }


def run_once(flush: bool, records: int, window: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="kqs-flush-") as tmp:
        data_dir = Path(tmp) / "kafka"
        info = broker.start(
            data_dir, port=free_port(), controller_port=free_port(), flush_every_message=flush
        )
        try:
            return asyncio.run(measure(info.bootstrap, records, window))
        finally:
            broker.stop(data_dir)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--window", type=int, default=64)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    runs: dict[str, list[dict[str, float]]] = {"fsync every record": [], "OS page cache": []}
    for pair in range(args.pairs):
        for label, flush in (("fsync every record", True), ("OS page cache", False)):
            result = run_once(flush, args.records, args.window)
            runs[label].append(result)
            print(
                f"pair {pair + 1}/{args.pairs} {label:>18}: p50 {result['p50_ms']:.2f} ms, "
                f"p99 {result['p99_ms']:.2f} ms, {result['records_per_s']:.0f} records/s",
                flush=True,
            )
    summary = {
        label: {key: statistics.median(r[key] for r in results) for key in results[0]}
        for label, results in runs.items()
    }
    print(f"\n| broker flush policy | ack p50 | ack p99 | records/s (window {args.window}) |")
    print("|---|---|---|---|")
    for label, s in summary.items():
        print(
            f"| {label} | {s['p50_ms']:.2f} ms | {s['p99_ms']:.2f} ms | {s['records_per_s']:.0f} |"
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "machine": {
                        "platform": platform.platform(),
                        "cpus": os.cpu_count(),
                        "load_average_1m": os.getloadavg()[0],
                    },
                    "settings": {
                        "records": args.records,
                        "window": args.window,
                        "pairs": args.pairs,
                        "payload_bytes": len(PAYLOAD),
                    },
                    "runs": runs,
                    "median": summary,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
