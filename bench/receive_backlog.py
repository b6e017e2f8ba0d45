"""Receive cost against backlog size: p50/p99 of ReceiveMessage+DeleteMessage and gateway RSS.

For each backlog size the script creates a queue, fills it straight through Kafka (a native
producer writing records in KQS's format, the fastest way to build a large backlog), waits
until the gateway has ingested all of it (ApproximateNumberOfMessages), then times receive and
delete calls from one boto3 client. If receiving were a scan, its latency would grow with the
backlog; with the visibility index it should not.

    .venv/bin/python bench/receive_backlog.py [--sizes 1000,100000,1000000] [--calls 500]

It starts its own broker (jar) and gateway on free ports under a temporary directory and
prints a Markdown table; `--json PATH` also writes the figures.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lease_store.records import StoredMessage
from tests.support.harness import GatewayProcess, free_port, json_client
from topology.embedded import broker
from topology.record_format import to_headers


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def topic_of(bootstrap: str, url: str) -> str:
    name = url.rsplit("/", 1)[1]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    prefix = f"kqs.000000000000.{name}."
    # A just-created topic reaches the broker's metadata a moment after CreateTopics returns.
    for _ in range(100):
        topics = [t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix)]
        if topics:
            return topics[0]
        time.sleep(0.1)
    raise LookupError(f"no topic for queue {name}")


def fill(bootstrap: str, topic: str, count: int, body_bytes: int) -> float:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "acks": "all",
            "queue.buffering.max.messages": 500_000,
        }
    )
    body = b"x" * body_bytes
    began = time.monotonic()
    for i in range(count):
        message = StoredMessage(
            message_id=str(uuid.uuid4()),
            body=body,
            sent_ms=int(time.time() * 1000),
            sender_id="bench",
        )
        while True:
            try:
                headers: list[tuple[str, str | bytes | None]] = list(to_headers(message))
                producer.produce(
                    topic, value=body, key=message.message_id.encode(), headers=headers
                )
                break
            except BufferError:
                producer.poll(0.1)
        if i % 10_000 == 0:
            producer.poll(0)
    producer.flush(120)
    return time.monotonic() - began


def wait_ingested(sqs: Any, url: str, count: int, timeout_s: float) -> float:
    began = time.monotonic()
    while time.monotonic() - began < timeout_s:
        asked = time.monotonic()
        attrs = sqs.get_queue_attributes(
            QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
        )
        have = int(attrs["Attributes"]["ApproximateNumberOfMessages"])
        if have >= count:
            return time.monotonic() - began
        # The answer time shows whether ingestion starves requests (it must not).
        answered_ms = (time.monotonic() - asked) * 1000
        print(f"  ingested {have:,}/{count:,} (answered in {answered_ms:.0f} ms)", file=sys.stderr)
        time.sleep(2)
    raise TimeoutError(f"backlog of {count} not ingested within {timeout_s}s")


def measure(sqs: Any, url: str, calls: int) -> tuple[list[float], list[float]]:
    receive_ms: list[float] = []
    delete_ms: list[float] = []
    for _ in range(calls):
        began = time.perf_counter()
        message = sqs.receive_message(QueueUrl=url)["Messages"][0]
        receive_ms.append((time.perf_counter() - began) * 1000)
        began = time.perf_counter()
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        delete_ms.append((time.perf_counter() - began) * 1000)
    return receive_ms, delete_ms


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,100000,1000000")
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--body-bytes", type=int, default=100)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="kqs-bench-") as tmp:
        work = Path(tmp)
        info = broker.start(work / "kafka", port=free_port(), controller_port=free_port())
        gateway = GatewayProcess(work / "gateway", info.bootstrap)
        try:
            gateway.start()
            assert gateway.pid is not None
            sqs = json_client(gateway.endpoint)
            for size in sizes:
                url = sqs.create_queue(QueueName=f"backlog-{size}")["QueueUrl"]
                print(f"backlog {size:,}: producing", file=sys.stderr)
                fill_s = fill(info.bootstrap, topic_of(info.bootstrap, url), size, args.body_bytes)
                ingest_s = wait_ingested(sqs, url, size, timeout_s=1800)
                receive_ms, delete_ms = measure(sqs, url, args.calls)
                rows.append(
                    {
                        "backlog": size,
                        "fill_s": round(fill_s, 1),
                        "ingest_wait_s": round(ingest_s, 1),
                        "receive_p50_ms": round(statistics.median(receive_ms), 2),
                        "receive_p99_ms": round(pct(receive_ms, 0.99), 2),
                        "delete_p50_ms": round(statistics.median(delete_ms), 2),
                        "delete_p99_ms": round(pct(delete_ms, 0.99), 2),
                        "gateway_rss_mb": round(rss_mb(gateway.pid), 1),
                    }
                )
                print(json.dumps(rows[-1]), file=sys.stderr)
        finally:
            gateway.stop()
            broker.stop(work / "kafka")
    header = "| backlog | receive p50 ms | receive p99 ms | delete p50 ms | delete p99 ms | gateway RSS MB | fill s | ingest wait s |"
    print(header)
    print("|" + "---|" * 8)
    for r in rows:
        print(
            f"| {r['backlog']:,} | {r['receive_p50_ms']} | {r['receive_p99_ms']} | {r['delete_p50_ms']} "
            f"| {r['delete_p99_ms']} | {r['gateway_rss_mb']} | {r['fill_s']} | {r['ingest_wait_s']} |"
        )
    meta = {
        "machine": platform.platform(),
        "python": platform.python_version(),
        "calls": args.calls,
        "body_bytes": args.body_bytes,
    }
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
