"""Replay rate: how fast a message replay task re-sends a 100,000-message range.

The script starts its own broker (jar) and gateway on free ports under a temporary directory,
fills a queue straight through Kafka (a native producer writing KQS's record format, as
`receive_backlog.py` does), waits until the gateway has ingested it, then starts one
StartMessageReplayTask of the whole range into a second queue (`--into same`: into the queue
itself) with no rate limit and follows it with ListMessageReplayTasks. It prints the messages
per second from the task's start to COMPLETED, the gateway's CPU seconds over that time (from
/proc), and the load average before and after (the machine may be shared).

`--in-flight 1 4` compares how many send batches a task keeps on their way
(`KQS_REPLAY_IN_FLIGHT`): each run replays once per value, in turn, the gateway restarted with
it on the same broker and filled queue, so that the values meet the same load.

    .venv/bin/python -m bench.replay_rate [--messages 100000] [--body-bytes 100] [--runs 1]
        [--in-flight N ...]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.receive_backlog import fill, topic_of, wait_ingested
from tests.support.harness import GatewayProcess, free_port
from tests.support.replay import replay_client
from topology.embedded import broker

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """User plus system CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def replay_once(
    sqs: Any, source: str, destination: str, messages: int, gateway_pid: int, since_ms: int
) -> dict[str, Any]:
    load_before = load()
    cpu_before = cpu_s(gateway_pid)
    began = time.monotonic()
    handle = sqs.start_message_replay_task(
        QueueUrl=source, SinceTimestamp=since_ms, DestinationQueueUrl=destination
    )["TaskHandle"]
    progress: list[tuple[float, int]] = []
    while True:
        task = next(
            t
            for t in sqs.list_message_replay_tasks(QueueUrl=source)["Tasks"]
            if t["TaskHandle"] == handle
        )
        progress.append((time.monotonic() - began, task["ApproximateNumberOfMessagesReplayed"]))
        if task["Status"] != "RUNNING":
            break
        time.sleep(0.5)
    elapsed = time.monotonic() - began
    cpu = cpu_s(gateway_pid) - cpu_before
    replayed = task["ApproximateNumberOfMessagesReplayed"]
    assert task["Status"] == "COMPLETED" and replayed == messages, task
    return {
        "messages": replayed,
        "seconds": round(elapsed, 2),
        "per_second": round(replayed / elapsed),
        "gateway_cpu_s": round(cpu, 2),
        "gateway_cpu_per_message_us": round(cpu / replayed * 1e6, 1),
        "load_before": load_before,
        "load_after": load(),
        "progress": [(round(t, 1), n) for t, n in progress[:: max(1, len(progress) // 20)]],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--body-bytes", type=int, default=100)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--into", choices=["other", "same"], default="other")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--in-flight", type=int, nargs="+", default=[0], metavar="N")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="kqs-bench-") as tmp:
        work = Path(tmp)
        info = broker.start(work / "kafka", port=free_port(), controller_port=free_port())
        gateway = GatewayProcess(work / "gateway", info.bootstrap)
        try:
            gateway.start()
            assert gateway.pid is not None
            sqs = replay_client("json", gateway.endpoint)
            source = sqs.create_queue(QueueName="replay-source")["QueueUrl"]
            print(f"filling {args.messages:,} messages", file=sys.stderr)
            since_ms = int(time.time() * 1000) - 1000
            fill(info.bootstrap, topic_of(info.bootstrap, source), args.messages, args.body_bytes)
            wait_ingested(sqs, source, args.messages, timeout_s=1800)
            for run in range(args.runs):
                for in_flight in args.in_flight:
                    if in_flight:  # 0: the gateway's default
                        gateway.stop()
                        gateway.extra_env["KQS_REPLAY_IN_FLIGHT"] = str(in_flight)
                        gateway.start()
                        assert gateway.pid is not None
                    destination = source
                    if args.into == "other":
                        destination = sqs.create_queue(
                            QueueName=f"replay-destination-{run}-{in_flight}"
                        )["QueueUrl"]
                    row = replay_once(
                        sqs, source, destination, args.messages, gateway.pid, since_ms
                    )
                    row["in_flight"] = in_flight or "default"
                    rows.append(row)
                    print(json.dumps(row), file=sys.stderr)
        finally:
            gateway.stop()
            broker.stop(work / "kafka")
    print(
        "| run | in flight | messages | seconds | msg/s | gateway CPU s | CPU µs/msg "
        "| load before | load after |"
    )
    print("|" + "---|" * 9)
    for i, r in enumerate(rows, 1):
        print(
            f"| {i} | {r['in_flight']} | {r['messages']:,} | {r['seconds']} | "
            f"**{r['per_second']:,}** | "
            f"{r['gateway_cpu_s']} | {r['gateway_cpu_per_message_us']} | {r['load_before']} | "
            f"{r['load_after']} |"
        )
    meta = {
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "body_bytes": args.body_bytes,
        "into": args.into,
    }
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
