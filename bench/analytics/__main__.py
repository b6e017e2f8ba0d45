"""`kqs serve` and `kqs analytics` side by side under the side-by-side workloads (a) and (b).

    .venv/bin/python -m bench.analytics --workloads a,b --duration 60
    .venv/bin/python -m bench.analytics --alone 300000     # the jobs alone on one core
    .venv/bin/python -m bench.analytics --workloads "" --scale-queues 10000   # seed 004's scale

For each workload: a fresh `kqs serve` (embedded broker) and a fresh `kqs analytics` (its
defaults: local[2], 10 s / 60 s triggers, the dashboard) on the same machine; the load
generator of bench/sidebyside runs the workload's producers and consumers against one queue
for `--duration` seconds, recording when each send was acknowledged. Meanwhile the probes
(probes.py) record the jobs' position in `__kqs_events`, every `__kqs_metrics` record of the
queue and the dashboard's totals once a second; after the load, they go on until the
dashboard's totals equal what the load generator was told (exact) or `--settle` seconds
pass. Reported: events/s the jobs consumed, their lag over time, send-to-count delay
(p50/p99) on `__kqs_metrics` and on the dashboard, batch durations per query, CPU seconds and
peak RSS of each side, whether the final counts were exact, and the load average.

`--alone N`: the gateway runs workload (b) until `__kqs_events` holds N events, with no
analytics; then `kqs analytics --master local[1]` pinned to one core processes them, and the
figure is N over the time from its first batch's start to having committed the end.

`--scale-queues Q`: the events a gateway serving Q queues publishes (scale.py: gauges of every
queue each 10 s, `--scale-requests` request events/s) for `--scale-minutes`, with the jobs and
the dashboard beside them: the aggregations' state (rows, memory) per batch, batch durations,
the jobs' CPU and RSS, and the dashboard's answer times for its 50 busiest queues and a search.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from contextlib import suppress
from pathlib import Path
from typing import Any

import psutil

from bench.analytics import probes, scale
from bench.sidebyside import servers
from bench.sidebyside.cores import pin
from bench.sidebyside.loadgen import Client, check_signer
from bench.sidebyside.workloads import BODY, delete_batch, pair_params, send_batch
from topology.embedded import broker

RESULTS = Path(__file__).resolve().parents[1] / "results"
RETRYABLE = (Exception,)


class Analytics:
    """`kqs analytics` as a process of its own (Python driver + Spark JVM), its log parsed."""

    def __init__(self, work: Path, bootstrap: str, args: list[str], cores: list[int] | None):
        self.work = work
        self.dashboard_port = servers.free_port()
        self.log = work / "analytics.log"
        work.mkdir(parents=True, exist_ok=True)
        command = [
            str(servers.VENV_BIN / "kqs"), "analytics", "--bootstrap", bootstrap,
            "--data-dir", str(work / "data"), "--dashboard-port", str(self.dashboard_port),
            "--log-format", "json", *args,
        ]  # fmt: skip
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, cwd=work, start_new_session=True,
                preexec_fn=(lambda: pin(cores)) if cores else None,
            )  # fmt: skip

    @property
    def dashboard(self) -> str:
        return f"http://127.0.0.1:{self.dashboard_port}"

    @property
    def checkpoint(self) -> Path:
        return self.work / "data" / "analytics" / "checkpoints" / "metrics-kafka"

    def lines(self) -> list[dict[str, Any]]:
        out = []
        for raw in self.log.read_text(errors="replace").splitlines():
            with suppress(ValueError):
                out.append(json.loads(raw))
        return out

    def wait_running(self, timeout_s: float = 1800.0) -> float:
        """Until the first batch of every query ended; returns when the queries started."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            lines = self.lines()
            started = [line for line in lines if line.get("msg") == "analytics running"]
            queries = {line.get("query") for line in lines if line.get("msg") == "batch"}
            if started and len(queries) >= 4:
                return datetime.datetime.fromisoformat(started[0]["ts"]).timestamp()
            if self.proc.poll() is not None:
                raise RuntimeError(f"kqs analytics exited; see {self.log}")
            time.sleep(0.5)
        raise TimeoutError(f"kqs analytics not running after {timeout_s} s; see {self.log}")

    def tree(self) -> list[psutil.Process]:
        with suppress(psutil.Error):
            root = psutil.Process(self.proc.pid)
            return [root, *root.children(recursive=True)]
        return []

    def stop(self) -> None:
        with suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def batch_summary(self, since: float) -> dict[str, Any]:
        per_query: dict[str, list[dict[str, Any]]] = {}
        for line in self.lines():
            if line.get("msg") != "batch" or line.get("duration_ms") is None:
                continue
            ts = datetime.datetime.fromisoformat(line["ts"]).timestamp()
            if ts >= since:
                per_query.setdefault(str(line["query"]), []).append(line)
        out: dict[str, Any] = {}
        for query, lines in sorted(per_query.items()):
            durations = [float(line["duration_ms"]) / 1000 for line in lines]
            out[query] = {
                "batches": len(lines),
                "rows_in": sum(int(line.get("rows_in") or 0) for line in lines),
                "duration_p50_s": probes.percentile(durations, 0.5),
                "duration_p99_s": probes.percentile(durations, 0.99),
                "duration_max_s": round(max(durations), 2),
                "state_rows_max": max((int(x.get("state_rows") or 0) for x in lines), default=0),
                "state_rows_last": int(lines[-1].get("state_rows") or 0),
                "state_mb_max": round(
                    max((int(x.get("state_bytes") or 0) for x in lines), default=0) / 2**20, 1
                ),
            }
        return out


class CpuMemory:
    """CPU seconds and peak RSS of some process trees, sampled every `interval_s`."""

    def __init__(self, trees: dict[str, Any], interval_s: float = 0.5) -> None:
        self.trees = trees  # name -> callable returning the processes
        self.first: dict[str, dict[int, float]] = {name: {} for name in trees}
        self.last: dict[str, dict[int, float]] = {name: {} for name in trees}
        self.peak: dict[str, int] = dict.fromkeys(trees, 0)
        self.stop_event = threading.Event()
        self.interval_s = interval_s

    def sample(self) -> None:
        for name, tree in self.trees.items():
            rss = 0
            for proc in tree():
                with suppress(psutil.Error), proc.oneshot():
                    times = proc.cpu_times()
                    cpu = times.user + times.system + times.children_user + times.children_system
                    rss += proc.memory_info().rss
                    self.first[name].setdefault(proc.pid, cpu)
                    self.last[name][proc.pid] = cpu
            self.peak[name] = max(self.peak[name], rss)

    def run(self) -> None:
        while not self.stop_event.wait(self.interval_s):
            self.sample()

    def result(self, wall_s: float) -> dict[str, Any]:
        out = {}
        for name in self.trees:
            cpu = sum(
                self.last[name][pid] - self.first[name].get(pid, 0.0) for pid in self.last[name]
            )
            out[name] = {
                "cpu_s": round(cpu, 1),
                "cores": round(cpu / wall_s, 2) if wall_s else None,
                "peak_rss_mb": round(self.peak[name] / 2**20),
            }
        return out


async def pair_load(
    endpoint: str, queue: str, batch: bool, duration_s: float
) -> tuple[list[tuple[float, int]], int, int]:
    """Workload (a) or (b) on `queue`; returns ((ack time, messages) per send, sent, deleted)."""
    params = pair_params(batch, duration_s)
    acked: list[tuple[float, int]] = []
    deleted = 0
    async with Client(endpoint, pool=params.producers + params.consumers) as client:
        url = await client.create_queue(queue)
        stop_at = time.monotonic() + duration_s

        async def produce() -> None:
            while time.monotonic() < stop_at:
                try:
                    if batch:
                        n = await send_batch(client, url, 10)
                    else:
                        await client.call("SendMessage", {"QueueUrl": url, "MessageBody": BODY})
                        n = 1
                except RETRYABLE:
                    await asyncio.sleep(0.01)
                    continue
                acked.append((time.time(), n))

        async def consume() -> None:
            nonlocal deleted
            while time.monotonic() < stop_at:
                try:
                    result = await client.call(
                        "ReceiveMessage",
                        {"QueueUrl": url, "MaxNumberOfMessages": 10 if batch else 1},
                    )
                    messages = result.get("Messages") or []
                    if not messages:
                        continue
                    if batch:
                        n = await delete_batch(client, url, messages)
                    else:
                        await client.call(
                            "DeleteMessage",
                            {"QueueUrl": url, "ReceiptHandle": messages[0]["ReceiptHandle"]},
                        )
                        n = 1
                    # Not `deleted += await ...`: that reads `deleted` before the await, and
                    # the other consumers' additions meanwhile would be lost.
                    deleted += n
                except RETRYABLE:
                    await asyncio.sleep(0.01)

        await asyncio.gather(
            *(produce() for _ in range(params.producers)),
            *(consume() for _ in range(params.consumers)),
        )
    return acked, sum(n for _, n in acked), deleted


def kqs_bootstrap(server: servers.Server) -> str:
    status = broker.status(server.work_dir / "data" / "kafka")
    assert status.bootstrap, "kqs serve's broker is not running"
    return status.bootstrap


def run_side_by_side(
    work: Path, workload: str, duration_s: float, settle_s: float
) -> dict[str, Any]:
    batch = workload == "b"
    server = servers.start_kqs(work / "kqs", None, {})
    analytics: Analytics | None = None
    try:
        bootstrap = kqs_bootstrap(server)
        analytics = Analytics(work / "analytics", bootstrap, [], None)
        started = analytics.wait_running()
        queue = f"analytics-{workload}-{uuid.uuid4().hex[:8]}"
        position = probes.Position(bootstrap, analytics.checkpoint)
        tail = probes.MetricsTail(bootstrap, queue)
        dash = probes.DashboardPoll(analytics.dashboard, queue)
        a = analytics
        usage = CpuMemory({"kqs serve": server.tree, "kqs analytics": a.tree})
        threads = [position.start(), tail.start(), dash.start()]
        usage.sample()
        usage_thread = threading.Thread(target=usage.run, daemon=True)
        usage_thread.start()
        load_avg_before = os.getloadavg()
        began = time.time()
        acked, sent, deleted = asyncio.run(pair_load(server.endpoint, queue, batch, duration_s))
        load_ended = time.time()
        load_avg_during = os.getloadavg()
        usage.stop_event.set()
        usage_thread.join()
        usage.sample()
        cpu_mem = usage.result(load_ended - began)
        # After the load: until the dashboard's totals are exact (or `settle_s` passes).
        exact_at = None
        deadline = time.monotonic() + settle_s
        while time.monotonic() < deadline:
            if dash.seen and dash.seen[-1][1] == sent and dash.seen[-1][2] == deleted:
                exact_at = dash.seen[-1][0]
                break
            time.sleep(1)
        for probe in (position, tail, dash):
            probe.stop()
        for thread in threads:
            thread.join(timeout=10)
        during = [s for s in position.samples if began <= s.t <= load_ended and s.committed]
        consumed_per_s = None
        if len(during) >= 2:
            consumed_per_s = round(
                (during[-1].committed - during[0].committed) / (during[-1].t - during[0].t)  # type: ignore[operator]
            )
        produced_per_s = None
        if len(during) >= 2:
            produced_per_s = round(
                (during[-1].events_end - during[0].events_end) / (during[-1].t - during[0].t)
            )
        kafka_delays, kafka_uncovered = probes.send_to_count_delays(
            acked, [(t, s) for t, s, _ in tail.seen]
        )
        dash_delays, dash_uncovered = probes.send_to_count_delays(
            acked, [(t, s) for t, s, _, _ in dash.seen]
        )
        final_kafka = tail.seen[-1][1:] if tail.seen else None
        final_dash = dash.seen[-1][1:3] if dash.seen else None
        lags = [s.lag for s in during if s.lag is not None]
        half = len(lags) // 2
        return {
            "workload": workload,
            "duration_s": duration_s,
            "load_average_before": [round(x, 2) for x in load_avg_before],
            "load_average_end": [round(x, 2) for x in load_avg_during],
            "analytics_startup_s": round(started - began, 1) if started > began else None,
            "sent": sent,
            "deleted": deleted,
            "messages_per_s": round(sent / duration_s, 1),
            "events_produced_per_s": produced_per_s,
            "events_consumed_per_s": consumed_per_s,
            "lag_events": probes.lag_series(position.samples, began),
            "lag_first_half_max": max(lags[:half], default=None),
            "lag_second_half_max": max(lags[half:], default=None),
            "delay_metrics_topic_s": {
                "p50": probes.percentile(kafka_delays, 0.5),
                "p99": probes.percentile(kafka_delays, 0.99),
                "max": probes.percentile(kafka_delays, 1.0),
                "never_counted": kafka_uncovered,
            },
            "delay_dashboard_s": {
                "p50": probes.percentile(dash_delays, 0.5),
                "p99": probes.percentile(dash_delays, 0.99),
                "max": probes.percentile(dash_delays, 1.0),
                "never_counted": dash_uncovered,
            },
            "dashboard_answer_s_p99": probes.percentile([x[3] for x in dash.seen], 0.99),
            "exact": {
                "client_sent_deleted": [sent, deleted],
                "metrics_topic_sent_deleted": final_kafka,
                "dashboard_sent_deleted": final_dash,
                "dashboard_exact_s_after_load": round(exact_at - load_ended, 1)
                if exact_at
                else None,
            },
            "batches": analytics.batch_summary(began),
            "cpu_memory": cpu_mem,
        }
    finally:
        if analytics is not None:
            analytics.stop()
        servers.stop(server)


def run_alone(work: Path, events: int, settle_s: float) -> dict[str, Any]:
    """The jobs alone on one core: N events of workload (b) first, then local[1] on core 0."""
    server = servers.start_kqs(work / "kqs", None, {})
    analytics: Analytics | None = None
    try:
        bootstrap = kqs_bootstrap(server)
        position = probes.Position(bootstrap, work / "none")
        from confluent_kafka import Consumer

        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-alone"})
        load_s = 0.0
        while position._end(consumer) < events:
            asyncio.run(pair_load(server.endpoint, f"alone-{uuid.uuid4().hex[:6]}", True, 20))
            load_s += 20
        total = position._end(consumer)
        consumer.close()
        analytics = Analytics(work / "analytics", bootstrap, ["--master", "local[1]"], [0])
        began = time.time()
        analytics.wait_running()
        position = probes.Position(bootstrap, analytics.checkpoint, interval_s=0.5)
        thread = position.start()
        deadline = time.monotonic() + settle_s
        while time.monotonic() < deadline:
            if position.samples and (position.samples[-1].committed or 0) >= total:
                break
            time.sleep(0.5)
        position.stop()
        thread.join(timeout=10)
        first = [
            datetime.datetime.fromisoformat(line["ts"]).timestamp() - line["duration_ms"] / 1000
            for line in analytics.lines()
            if line.get("msg") == "batch" and line.get("query") == "metrics-kafka"
        ]
        done = next((s.t for s in position.samples if (s.committed or 0) >= total), None)
        seconds = (done - min(first)) if done and first else None
        return {
            "events": total,
            "load_s_to_fill": load_s,
            "seconds_from_first_batch_to_end": round(seconds, 1) if seconds else None,
            "events_per_s_one_core": round(total / seconds) if seconds else None,
            "wall_s_with_startup": round((done or time.time()) - began, 1),
            "batches": analytics.batch_summary(0),
            "load_average": [round(x, 2) for x in os.getloadavg()],
        }
    finally:
        if analytics is not None:
            analytics.stop()
        servers.stop(server)


def run_scale(work: Path, queues: int, requests_per_s: float, minutes: float) -> dict[str, Any]:
    """Seed 004's 10,000 queues' events (scale.py) with the jobs and dashboard beside them."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    kafka_dir = work / "kafka"
    info = broker.start(kafka_dir, port=servers.free_port(), controller_port=servers.free_port())
    analytics: Analytics | None = None
    stream = scale.EventStream(info.bootstrap, queues, requests_per_s)
    try:
        admin = AdminClient({"bootstrap.servers": info.bootstrap})
        for future in admin.create_topics([NewTopic("__kqs_events", 1, 1)]).values():
            future.result(30)
        stream_thread = stream.start()
        analytics = Analytics(work / "analytics", info.bootstrap, [], None)
        began = time.time()
        analytics.wait_running()
        a = analytics
        usage = CpuMemory({"kqs analytics": a.tree})
        usage.sample()
        usage_thread = threading.Thread(target=usage.run, daemon=True)
        usage_thread.start()
        position = probes.Position(info.bootstrap, analytics.checkpoint, interval_s=5)
        position_thread = position.start()
        dashboard: list[dict[str, Any]] = []
        end = began + minutes * 60
        while time.time() < end:
            time.sleep(30)
            for query in ("?limit=50", "?limit=50&q=user042"):
                with suppress(OSError):
                    dashboard.append(
                        {
                            "t_s": round(time.time() - began),
                            **scale.time_summary(a.dashboard, query),
                        }
                    )
        with suppress(OSError):
            dashboard.append(
                {"t_s": round(time.time() - began), **scale.time_summary(a.dashboard, "")}
            )
        usage.stop_event.set()
        usage_thread.join()
        stream.stop()
        stream_thread.join(timeout=30)
        position.stop()
        position_thread.join(timeout=10)
        return {
            "queues": queues,
            "request_events_per_s": requests_per_s,
            "gauge_events_per_s": round(queues / scale.GAUGE_INTERVAL_S),
            "events_produced": stream.produced,
            "minutes": minutes,
            "lag_events": probes.lag_series(position.samples, began, every_s=30),
            "batches": analytics.batch_summary(0),
            "cpu_memory": usage.result(time.time() - began),
            "dashboard": dashboard,
            "load_average": [round(x, 2) for x in os.getloadavg()],
        }
    finally:
        stream.stop()
        if analytics is not None:
            analytics.stop()
        broker.stop(kafka_dir, timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workloads", default="a,b")
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--settle", type=float, default=180.0)
    parser.add_argument("--alone", type=int, default=0, help="events for the one-core run")
    parser.add_argument("--scale-queues", type=int, default=0, help="seed 004: 10000")
    parser.add_argument("--scale-requests", type=float, default=300.0, help="request events/s")
    parser.add_argument("--scale-minutes", type=float, default=5.0)
    parser.add_argument("--out", help="JSON file to write (default: print only)")
    args = parser.parse_args()
    check_signer()
    results: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "commit": servers.kqs_version(),
        "cores": os.cpu_count(),
    }
    with tempfile.TemporaryDirectory(prefix="kqs-bench-analytics-") as tmp:
        work = Path(tmp)
        for workload in [w for w in args.workloads.split(",") if w]:
            result = run_side_by_side(work / workload, workload, args.duration, args.settle)
            results[f"workload_{workload}"] = result
            print(json.dumps(result, indent=1), flush=True)
        if args.alone:
            result = run_alone(work / "alone", args.alone, args.settle)
            results["alone_one_core"] = result
            print(json.dumps(result, indent=1), flush=True)
        if args.scale_queues:
            result = run_scale(
                work / "scale", args.scale_queues, args.scale_requests, args.scale_minutes
            )
            results["seed004_scale"] = result
            print(json.dumps(result, indent=1), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
