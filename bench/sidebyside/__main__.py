"""Side-by-side benchmark of KQS, ElasticMQ, fauxqs and moto on the same machine, in one run.

    .venv/bin/python -m bench.sidebyside --quick      # seconds per run (dev / CI)
    .venv/bin/python -m bench.sidebyside              # full: 60 s pairs, 1M backlog, 3 pairs

For each pair and each workload, every server is started fresh (own data dir, free ports),
pinned to the server core(s), loaded by the same asyncio load generator pinned to the client
core, measured (its process tree's CPU seconds and peak RSS) and stopped: KQS, ElasticMQ,
fauxqs, fauxqs-sqlite, moto, KQS, ElasticMQ, ... (3 pairs unless --pairs says otherwise).
Then the scale profile (e) runs once per server. Markdown and JSON go to bench/results/
(names from --out) and the Markdown is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.sidebyside import clientcheck, report, servers, speed, workloads
from bench.sidebyside.loadgen import Client, check_signer
from bench.sidebyside.monitor import TreeMonitor

RESULTS = Path(__file__).resolve().parents[1] / "results"
ALL_WORKLOADS = ("a_single", "b_batch", "c_wake", "d_backlog", "o_open", "f_fifo")
HALF_KQS_PEAK = "half-kqs-peak"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="seconds-long runs (dev/CI)")
    p.add_argument("--pairs", type=int, help="runs per server per workload (default 3)")
    p.add_argument(
        "--servers",
        default="kqs,elasticmq,fauxqs,fauxqs-sqlite,moto",
        help="comma-separated: kqs, kqs-w2 / kqs-w4 (kqs serve --workers 2 / 4), kqs-base (with --base-src), elasticmq, fauxqs (in memory), "
        "fauxqs-sqlite (its durable SQLite backend), moto",
    )
    p.add_argument("--workloads", default="a,b,c,d,o,f,e", help="subset of a,b,c,d,o,f,e")
    p.add_argument(
        "--rate",
        default=HALF_KQS_PEAK,
        help="offered msg/s of the open-loop workload (o), or 'half-kqs-peak' (default): first "
        "run workload (a) closed-loop once per server to find each one's peak, then offer half "
        "of KQS's peak to every server",
    )
    p.add_argument("--duration", type=float, help="seconds per producer/consumer run")
    p.add_argument("--backlog", type=int, help="messages queued in (d) (full default 1,000,000)")
    p.add_argument("--phase-cap", type=float, help="time cap per phase of (d) and (e), seconds")
    p.add_argument("--wake-rounds", type=int, help="long-poll wake measurements per run")
    p.add_argument(
        "--scale",
        help="users,queues_per_user,messages_per_queue,in_flight (seed 004: 100,100,1000,500)",
    )
    p.add_argument(
        "--progress-every",
        type=float,
        default=60.0,
        help="seconds between the progress lines of (e)'s phases",
    )
    p.add_argument("--server-cores", default="1", help="cores the servers are pinned to")
    p.add_argument("--client-cores", default="0", help="cores the load generator is pinned to")
    p.add_argument("--out", default=None, help="result name under bench/results/")
    p.add_argument("--label", default="", help="note printed on the report, e.g. 'loaded machine'")
    p.add_argument("--kqs-env", action="append", default=[], help="KEY=VALUE for kqs serve")
    p.add_argument(
        "--client-check",
        type=float,
        default=None,
        help="seconds per client in the client check (0: skip)",
    )
    p.add_argument(
        "--base-src",
        type=Path,
        help="source tree run as server 'kqs-base' (e.g. a `git archive` of the commit before a change)",
    )
    p.add_argument("--base-env", action="append", default=[], help="KEY=VALUE for kqs-base only")
    p.add_argument(
        "--base-python",
        type=Path,
        help="the Python interpreter of kqs-base (default: this one), e.g. another build of "
        "CPython; its environment needs KQS's dependencies",
    )
    p.add_argument(
        "--warmup",
        type=float,
        help="seconds of unmeasured single+batch producer/consumer load on a scratch queue "
        "before each measured run (JIT warm-up for the JVM servers; same for all)",
    )
    p.add_argument("--no-uvloop", action="store_true", help="plain asyncio loop in the client")
    return p


def _cores(spec: str) -> list[int] | None:
    if not spec or spec == "none":
        return None
    cores = [int(c) for c in spec.split(",")]
    available = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    return cores if set(cores) <= set(available) or not available else None


def _run_loop(coro_factory: Callable[[], Awaitable[Any]], use_uvloop: bool) -> Any:
    if use_uvloop:
        import uvloop

        return uvloop.run(coro_factory())  # type: ignore[arg-type]
    return asyncio.run(coro_factory())  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    quick = args.quick
    pairs = args.pairs or 3
    duration = args.duration or (8.0 if quick else 60.0)
    backlog = args.backlog or (5_000 if quick else 1_000_000)
    phase_cap = args.phase_cap or (45.0 if quick else 300.0)
    wake_rounds = args.wake_rounds or (10 if quick else 50)
    scale = [
        int(x) for x in (args.scale or ("2,5,100,50" if quick else "10,20,1000,500")).split(",")
    ]
    server_names = [s for s in args.servers.split(",") if s]
    wanted = set(args.workloads.split(","))
    kqs_env = dict(kv.split("=", 1) for kv in args.kqs_env)
    use_uvloop = not args.no_uvloop
    warmup_s = args.warmup if args.warmup is not None else (8.0 if quick else 30.0)

    servers.BASE_SRC = args.base_src.resolve() if args.base_src else None
    servers.BASE_PYTHON = args.base_python.absolute() if args.base_python else None
    base_env = dict(kv.split("=", 1) for kv in args.base_env)
    check_signer()
    server_cores, client_cores = _cores(args.server_cores), _cores(args.client_cores)
    if client_cores:
        os.sched_setaffinity(0, set(client_cores))
    pinning = (
        f"servers on cores {server_cores}, load generator on cores {client_cores} "
        "(sched_setaffinity; the KQS broker JVM inherits the gateway's affinity)"
        if server_cores and client_cores
        else "no pinning (cores not available)"
    )
    # Resolve the ElasticMQ jar before timing anything.
    if "elasticmq" in server_names:
        servers.elasticmq_home()
    if {"fauxqs", "fauxqs-sqlite"} & set(server_names):
        servers.fauxqs_home()
    versions = {
        "python": f"python {platform.python_version()}",
        "java": f"java {servers.version_of_java()}",
    }
    for name in server_names:
        if name == "kqs":
            versions[name] = servers.kqs_version()
        elif name in servers.WORKER_POOLS:
            versions[name] = f"{servers.kqs_version()} --workers {servers.WORKER_POOLS[name]}"
        elif name == "elasticmq":
            versions[name] = f"elasticmq {servers.elasticmq_version(servers.elasticmq_home())}"
        elif name == "moto":
            versions[name] = servers.moto_version()
        elif name in ("fauxqs", "fauxqs-sqlite"):
            backend = "SQLite backend" if name == "fauxqs-sqlite" else "in memory"
            versions[name] = f"{servers.fauxqs_version(servers.fauxqs_home())} {backend}"
        else:
            python = servers.BASE_PYTHON or "this interpreter"
            versions[name] = f"kqs-base from {servers.BASE_SRC} on {python}"
    import aiohttp

    client_desc = (
        f"asyncio + aiohttp {aiohttp.__version__} client, one connection pool, SigV4 (test/test, "
        f"us-east-1), JSON 1.0, {'uvloop' if use_uvloop else 'asyncio'} loop"
    )

    producer_params = {
        "a_single": workloads.pair_params(False, duration),
        "b_batch": workloads.pair_params(True, duration),
    }

    open_rate: list[float] = []  # offered msg/s of (o), once known

    def job(workload: str) -> Callable[[Client], Awaitable[dict[str, Any]]]:
        if workload == "peak_a":
            workload = "a_single"
        if workload in producer_params:
            params = producer_params[workload]
            return lambda c: workloads.producer_consumer(c, params)
        if workload == "o_open":
            open_params = workloads.OpenLoopParams(open_rate[0], duration)
            return lambda c: workloads.open_loop(c, open_params)
        if workload == "f_fifo":
            fifo_params = workloads.FifoParams(8, 16, 4, duration)
            return lambda c: workloads.fifo_pairs(c, fifo_params)
        if workload == "c_wake":
            return lambda c: workloads.long_poll_wake(c, wake_rounds)
        if workload == "d_backlog":
            return lambda c: workloads.backlog_drain(c, backlog, 32, phase_cap)
        sp = workloads.ScaleParams(
            scale[0], scale[1], scale[2], scale[3], 32, phase_cap, args.progress_every
        )
        return lambda c: workloads.scale(c, sp)

    runs: list[dict[str, Any]] = []
    loads: list[float] = []
    started = datetime.datetime.now(datetime.UTC)
    tmp = Path(tempfile.mkdtemp(prefix="kqs-sidebyside-"))

    def one(workload: str, pair: int, name: str) -> None:
        load1 = os.getloadavg()[0]
        loads.append(load1)
        print(
            f"[{time.strftime('%H:%M:%S')}] pair {pair} {workload} {name} (load {load1:.2f})",
            file=sys.stderr,
        )
        work = tmp / f"{workload}-{pair}-{name}"
        env = {**kqs_env, **base_env} if name == "kqs-base" else kqs_env
        probe_before = speed.probe_ms(server_cores)
        measured = len(runs)
        with servers.running(name, work, server_cores, env) as server:
            run = job(workload)

            # Open loop: room for the requests slow answers keep outstanding, so that the
            # client's pool does not become the limit it measures.
            pool = 256 if workload == "o_open" else 64

            async def go() -> dict[str, Any]:
                async with Client(server.endpoint, pool=pool) as client:
                    return await run(client)

            async def warm() -> None:
                async with Client(server.endpoint, pool=32) as client:
                    await workloads.warm_up(client, warmup_s)

            if warmup_s > 0:
                _run_loop(warm, use_uvloop)
            with TreeMonitor(server) as mon:
                result = _run_loop(go, use_uvloop)
            disk_mb = _disk_mb(work)  # while the server runs: what it keeps, logs included
            runs.append(
                {
                    "workload": workload,
                    "pair": pair,
                    "server": name,
                    "version": server.version,
                    "settings": server.settings,
                    "load_avg_1m": round(load1, 2),
                    "result": result,
                    "resources": {**mon.result(), "disk_mb": disk_mb},
                }
            )
            summary = {
                k: result.get(k)
                for k in (
                    "sent_per_s",
                    "received_deleted_per_s",
                    "wake_p50_ms",
                    "send_p99_ms",
                    "recv_del_p99_ms",
                    "queues_created",
                    "messages_sent",
                    "messages_in_flight",
                )
                if k in result
            }
            print(f"    {json.dumps(summary)} {json.dumps(mon.result())}", file=sys.stderr)
        if len(runs) > measured:
            probes = [probe_before, speed.probe_ms(server_cores)]  # the server is stopped now
            runs[-1]["resources"]["speed_probe_ms"] = probes
            print(f"    machine speed probe before / after: {probes} ms", file=sys.stderr)
        shutil.rmtree(work, ignore_errors=True)

    check: dict[str, Any] | None = None
    check_s = args.client_check if args.client_check is not None else (5.0 if quick else 20.0)
    try:
        if check_s > 0 and "elasticmq" in server_names:
            print(f"[{time.strftime('%H:%M:%S')}] client check", file=sys.stderr)
            check = clientcheck.run(tmp / "clientcheck", server_cores, 48, check_s, use_uvloop)
            check["load_avg_1m"] = round(os.getloadavg()[0], 2)
            print(f"    {json.dumps(check)}", file=sys.stderr)
        if "o" in wanted:
            open_rate.append(find_open_rate(args.rate, server_names, one, runs))
            print(f"    open-loop rate: {open_rate[0]:.1f} msg/s", file=sys.stderr)
        for pair in range(1, pairs + 1):
            for workload in ALL_WORKLOADS:
                if workload[0] not in wanted:
                    continue
                for name in server_names:
                    one(workload, pair, name)
        if "e" in wanted:
            for name in server_names:
                one("e_scale", 1, name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    finished = datetime.datetime.now(datetime.UTC)
    uname = platform.uname()
    meta = {
        "mode": "quick" if quick else "full",
        "label": args.label,
        "started_utc": started.strftime("%Y-%m-%d %H:%M:%S"),
        "finished_utc": finished.strftime("%Y-%m-%d %H:%M:%S"),
        "elapsed_s": round((finished - started).total_seconds(), 1),
        "pairs": pairs,
        "machine": f"{uname.system} {uname.release} {uname.machine}, {os.cpu_count()} cores, "
        f"{_mem_gib()} GiB RAM",
        "load_avg_range": f"{min(loads):.2f}–{max(loads):.2f}" if loads else "n/a",
        "versions": versions,
        "pinning": pinning,
        "client": client_desc,
        "warmup_s": warmup_s,
        "kqs_env": kqs_env,
        "open_loop_rate_per_s": round(open_rate[0], 1) if open_rate else None,
        "open_loop_rate_from": args.rate if open_rate else None,
        "argv": sys.argv[1:] if argv is None else argv,
    }
    text = report.markdown(runs, meta)
    if check is not None:
        text += "\n" + clientcheck.markdown(check)
    ratio_table = {w: report.ratios(runs, w) for w in ALL_WORKLOADS}
    name = args.out or ("sidebyside-quick" if quick else "sidebyside-full")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.md").write_text(text + f"\nTotal time: {meta['elapsed_s']} s\n")
    (RESULTS / f"{name}.json").write_text(
        json.dumps(
            {"meta": meta, "client_check": check, "ratios": ratio_table, "runs": runs}, indent=2
        )
        + "\n"
    )
    print(text)
    print(f"Total time: {meta['elapsed_s']} s; written to {RESULTS / name}.md/.json")
    return 0


def find_open_rate(
    rate: str,
    server_names: list[str],
    one: Callable[[str, int, str], None],
    runs: list[dict[str, Any]],
) -> float:
    """The offered rate of (o): given, or half of KQS's closed-loop peak on workload (a).

    The peak is measured first, once per server (`peak_a` runs, pair 0), each as the lower
    of its sent and received+deleted rates; every server is then offered the same rate.
    """
    if rate != HALF_KQS_PEAK:
        return float(rate)
    if "kqs" not in server_names:
        raise SystemExit(f"--rate {HALF_KQS_PEAK} needs kqs among --servers")
    for name in server_names:
        one("peak_a", 0, name)
    kqs = next(r for r in runs if r["workload"] == "peak_a" and r["server"] == "kqs")
    peak = min(kqs["result"]["sent_per_s"], kqs["result"]["received_deleted_per_s"])
    if peak <= 0:
        raise SystemExit("KQS moved no messages in the peak run: no rate to offer")
    return 0.5 * float(peak)


def _mem_gib() -> str:
    import psutil

    return f"{psutil.virtual_memory().total / 2**30:.0f}"


def _disk_mb(path: Path) -> float:
    """Bytes of the files under `path` (sparse files count as allocated), in MiB."""
    total = 0
    for file in path.rglob("*"):
        try:
            if file.is_file():
                total += file.stat().st_blocks * 512
        except OSError:
            continue  # removed while we walked (compaction, segment roll)
    return round(total / 2**20, 1)


if __name__ == "__main__":
    sys.exit(main())
