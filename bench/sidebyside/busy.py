"""Where a producer/consumer workload's server CPU goes, thread by thread, and what it asked of
Kafka and the lease store.

    .venv/bin/python -m bench.sidebyside.busy [--workload b] [--duration 30] [--warmup 15]
        [--kqs-env KEY=VALUE ...] [--base-src DIR]

Starts `kqs serve` (this tree, or the source tree `--base-src`; the shipped defaults, or
changed by `--kqs-env`) pinned to core 1, warms it with the side-by-side's warm-up load, then
runs workload (a) or (b) of `bench.sidebyside` from core 0 and prints, for the measured run:
the rate; each server thread's CPU per message moved (`/proc/<pid>/task/*/stat` of the gateway
and its broker JVM, the event loop as `MAIN`); and what the gateway's `/metrics` counted
meanwhile, per second: requests by action, produce requests and records by producer, the
lease store's WAL syncs and the changelog's records. One run resolves about ±15 % in rate;
the split between threads is steadier.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import tempfile
import time
import urllib.request
from pathlib import Path

from bench.sidebyside import servers, workloads
from bench.sidebyside.loadgen import Client
from bench.sidebyside.threads import report, server_pids, thread_ticks

# The `/metrics` series worth a rate: requests by action, the producers' requests and records,
# the lease store's syncs and the changelog's records.
_COUNTED = re.compile(
    r"^(kqs_requests_total|kqs_kafka_producer_(requests_sent|messages_sent)_total"
    r"|kqs_lease_store_syncs_total|kqs_queue_segment_syncs_total"
    r"|kqs_lease_changelog_records_total)\b"
)


def counters(endpoint: str) -> dict[str, float]:
    """The `/metrics` samples `_COUNTED` names, by their full series name."""
    with urllib.request.urlopen(f"{endpoint}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if _COUNTED.match(line):
            series, _, value = line.rpartition(" ")
            samples[series] = float(value)
    return samples


async def measure(
    endpoint: str, pids: list[int], params: workloads.PairParams, warmup_s: float
) -> None:
    async with Client(endpoint, 64) as client:
        if warmup_s > 0:
            await workloads.warm_up(client, warmup_s)
        before_counts, before = counters(endpoint), thread_ticks(pids)
        began = time.monotonic()
        result = await workloads.producer_consumer(client, params)
        seconds = time.monotonic() - began
        after, after_counts = thread_ticks(pids), counters(endpoint)
    moved = int(result["received_deleted_per_s"] * params.duration_s)
    report(f"({'b' if params.batch else 'a'})", before, after, seconds, moved)
    print("   per second (the producers' counters are librdkafka's statistics, taken every 5 s):")
    for series, value in sorted(after_counts.items()):
        rate = (value - before_counts.get(series, 0.0)) / seconds
        if rate:
            print(f"   {rate:10,.1f}/s  {series}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--workload", choices=("a", "b"), default="b")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds measured")
    parser.add_argument("--warmup", type=float, default=15.0, help="seconds of warm-up load")
    parser.add_argument("--kqs-env", action="append", default=[], help="KEY=VALUE for kqs serve")
    parser.add_argument("--base-src", type=Path, help="run `kqs serve` of this source tree")
    args = parser.parse_args()
    params = workloads.pair_params(args.workload == "b", args.duration)
    env = dict(kv.split("=", 1) for kv in args.kqs_env)
    work = Path(tempfile.mkdtemp(prefix="kqs-busy-"))
    server = servers.start_kqs(work, [1], env, args.base_src)
    try:
        os.sched_setaffinity(0, {0})
        print(f"kqs serve {' '.join(args.kqs_env) or '(shipped defaults)'}")
        asyncio.run(measure(server.endpoint, server_pids(server, work), params, args.warmup))
    finally:
        servers.stop(server)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
