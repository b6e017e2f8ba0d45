"""In-process request-path microbenchmark: µs of CPU per SQS request in the gateway alone.

    .venv/bin/python -m bench.micro                          # 500 requests x 5 rounds
    .venv/bin/python -m bench.micro --iterations 1000 --rounds 5 --out micro  # results/micro.md

What is measured: the gateway as `kqs serve` wires it (`gateway.app.build_app`, started by an
aiohttp `AppRunner`), for SendMessage, ReceiveMessage (1, 10, and on an empty queue),
ChangeMessageVisibility, DeleteMessage and the three batch actions of 10 entries, in both
wire protocols (AWS JSON 1.0 and Query/XML), with requests signed by botocore's SigV4 before
the timed loop: aiohttp's HTTP parsing, request objects, middleware and routing; protocol
decoding; SigV4 verification and the access policy check; the action handlers; the lease
store (RocksDB in a temporary directory, and the memory store as a second line), with its
synced WAL writes for deletes and visibility changes; the lease changelog and analytics
events up to the hand-over to the Kafka client; response rendering and aiohttp's response
writing.

What is not: the network and socket calls (requests are fed to the server protocol's
`data_received` and answers collected from its transport); Kafka, whose clients are replaced
by in-process stand-ins (`bench/micro/standins.py`) that acknowledge at once and hand each
queue record back through the ingest path, so librdkafka's produce calls, its poll threads
and the broker cost nothing here; concurrency (one request at a time on one connection, so
each delete or visibility change has its own fsync, which the wall time includes and the
CPU time does not).

Per request: process CPU time (all threads, RocksDB's included), the event-loop thread's CPU
time, and wall time. Reported: median and p99 over all measured rounds, the median of each
round, and per-message figures for the actions that carry 10 messages. Markdown and JSON go
to `bench/results/<out>.{md,json}`. This is the regression guard for the request path: run it
before and after a change to the gateway's per-request work.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp

from bench.micro import run, wire
from bench.micro.standins import STORES
from gateway.cli import collector

RESULTS = Path(__file__).resolve().parents[1] / "results"
REPO = Path(__file__).resolve().parents[2]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--iterations", type=int, default=500, help="requests per action per round")
    p.add_argument("--rounds", type=int, default=5, help="measured rounds")
    p.add_argument("--warmup", type=int, default=200, help="requests per action in the warm-up")
    p.add_argument("--stores", default=",".join(STORES), help="rocksdb,memory or one of them")
    p.add_argument("--protocols", default=",".join(wire.PROTOCOLS), help="json,query or one")
    p.add_argument(
        "--loop",
        choices=("uvloop", "asyncio"),
        default=os.environ.get("KQS_EVENT_LOOP", "uvloop"),
        help="event loop (kqs serve's default: uvloop)",
    )
    p.add_argument("--out", help="write bench/results/<out>.md and .json (e.g. micro-<name>)")
    p.add_argument("--label", default="", help="note printed on the report")
    return p


def commit() -> str:
    def git(*args: str) -> str:
        out = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True)
        return out.stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + (" (with uncommitted changes)" if git("status", "--porcelain", "--", ".") else "")


def markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = ["# Request-path microbenchmark (in process, gateway only)", ""]
    if meta["label"]:
        lines += [f"**{meta['label']}**", ""]
    lines += [
        f"- commit: {meta['commit']}; when: {meta['when_utc']} UTC",
        f"- {meta['iterations']} requests per action per round, {meta['rounds']} rounds after a "
        f"warm-up of {meta['warmup']}; one request at a time; {meta['loop']} loop",
        f"- machine: {meta['machine']}; load average (1 min) {meta['load_before']} before, "
        f"{meta['load_after']} after",
        f"- {meta['versions']}",
        "- Kafka replaced by in-process stand-ins; no sockets (see `python -m bench.micro --help`)",
        "",
        "CPU = process CPU time per request (all threads); wall includes the synced RocksDB "
        "writes. µs, median / p99 over all rounds; per message = median / 10.",
        "",
    ]
    for store in dict.fromkeys(r["store"] for r in rows):
        lines += [f"## Lease store: {store}", ""]
        protocols = list(dict.fromkeys(r["protocol"] for r in rows if r["store"] == store))
        header = "| action |"
        for protocol in protocols:
            header += f" {protocol} CPU µs | {protocol} wall µs | {protocol} CPU µs/msg |"
        lines += [header, "|---|" + "---|---|---|" * len(protocols)]
        for phase in run.PHASES:
            line = f"| {phase.name} |"
            found = False
            for protocol in protocols:
                row = next(
                    (
                        r
                        for r in rows
                        if (r["store"], r["protocol"], r["action"]) == (store, protocol, phase.name)
                    ),
                    None,
                )
                if row is None:
                    line += " – | – | – |"
                    continue
                found = True
                per_msg = row.get("cpu_us_per_message_p50", "")
                line += (
                    f" {row['cpu_us_p50']:,.0f} / {row['cpu_us_p99']:,.0f} "
                    f"| {row['wall_us_p50']:,.0f} / {row['wall_us_p99']:,.0f} "
                    f"| {per_msg if per_msg == '' else f'{per_msg:,.0f}'} |"
                )
            if found:
                lines.append(line)
        lines.append("")
    lines += [
        "Median CPU µs of each round (stability): "
        + "; ".join(
            f"{r['store']}/{r['protocol']}/{r['action']}: {', '.join(f'{v:.0f}' for v in r['round_cpu_us_p50'])}"
            for r in rows
            if r["action"] in ("SendMessage", "ReceiveMessage (1)", "DeleteMessage")
        ),
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    stores = tuple(s for s in args.stores.split(",") if s)
    protocols = tuple(p for p in args.protocols.split(",") if p)
    load_before = round(os.getloadavg()[0], 2)
    began = datetime.datetime.now(datetime.UTC)

    def progress(text: str) -> None:
        print(
            f"[{datetime.datetime.now(datetime.UTC).strftime('%H:%M:%S')}] {text}", file=sys.stderr
        )

    coro = run.run(args.iterations, args.rounds, args.warmup, stores, protocols, progress=progress)
    if args.loop == "uvloop":
        import uvloop

        result = uvloop.run(coro)
    else:
        result = asyncio.run(coro)
    rows = run.summary(result)
    uname = platform.uname()
    meta = {
        "commit": commit(),
        "when_utc": began.strftime("%Y-%m-%d %H:%M:%S"),
        "iterations": args.iterations,
        "rounds": args.rounds,
        "warmup": args.warmup,
        "loop": args.loop,
        "machine": f"{uname.system} {uname.release} {uname.machine}, {os.cpu_count()} cores",
        "load_before": load_before,
        "load_after": round(os.getloadavg()[0], 2),
        "versions": f"python {platform.python_version()}, aiohttp {aiohttp.__version__}",
        "label": args.label,
        "argv": sys.argv[1:] if argv is None else argv,
    }
    checks = {
        "requests": result.checks.requests,
        "bodies_received": result.checks.bodies_received,
        "batch_entries_ok": result.checks.batch_entries_ok,
        "events_published": result.checks.events_published,
        "queue_records": result.checks.queue_records,
        "ingest_read_back_already_applied": result.checks.ingest_skipped,
    }
    text = markdown(rows, meta)
    text += (
        f"\nChecked: {checks['requests']:,} requests answered 200, {checks['bodies_received']:,} "
        f"bodies received intact, {checks['batch_entries_ok']:,} batch entries successful, the "
        f"queue's exact counts after every phase; of {checks['queue_records']:,} queue records "
        f"read back by the stand-in ingest, {checks['ingest_read_back_already_applied']:,} "
        "were applied already (from their delivery reports).\n"
    )
    print(text)
    if args.out:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / f"{args.out}.md").write_text(text)
        (RESULTS / f"{args.out}.json").write_text(
            json.dumps({"meta": meta, "checks": checks, "rows": rows}, indent=2) + "\n"
        )
        print(f"written to {RESULTS / args.out}.md/.json", file=sys.stderr)
    return 0


if __name__ == "__main__":
    collector.tune_for_serving()  # as `kqs serve` runs (not when a test calls main())
    sys.exit(main())
