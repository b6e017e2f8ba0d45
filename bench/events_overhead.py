"""What publishing analytics events costs a SendMessage.

Two measurements against a real broker (jar, free ports, temporary directory):

1. the synchronous cost of one event on the request path: `KafkaEventSink.sent` (build the
   JSON, hand it to librdkafka) timed in a loop, with the publisher connected to the broker;
2. SendMessage latency (p50/p99 over `--calls` sends from one boto3 client) on a gateway
   publishing its events to the broker, and on one whose events cluster is unreachable with
   a 1-event buffer, so that nearly every event is dropped at once (the closest to "no
   events" without a switch the gateway does not have).

    .venv/bin/python bench/events_overhead.py [--calls 1000] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.observability.events import KafkaEventSink
from lease_store.clock import SystemClock
from tests.support.builders import a_message
from tests.support.harness import GatewayProcess, free_port, json_client
from topology.catalog import QueueRecord
from topology.embedded import broker
from topology.events import EventPublisher


def sink_cost_us(bootstrap: str, events: int) -> float:
    publisher = EventPublisher(bootstrap)
    sink = KafkaEventSink(publisher, SystemClock())
    record = QueueRecord("000000000000", "bench", "ab" * 16, 1)
    message = a_message("0f7c1c1e-6a3e-4c55-9a39-2f6f2b1f5b11")
    try:
        began = time.perf_counter()
        for _ in range(events):
            sink.sent(record, [(message, 42)])
        return (time.perf_counter() - began) / events * 1e6
    finally:
        publisher.close()


def send_latencies_ms(gateway: GatewayProcess, calls: int) -> dict[str, float]:
    sqs = json_client(gateway.endpoint)
    url = sqs.create_queue(QueueName=f"bench-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    for _ in range(50):  # warm up connections and caches
        sqs.send_message(QueueUrl=url, MessageBody="warm-up")
    times = []
    for i in range(calls):
        began = time.perf_counter()
        sqs.send_message(QueueUrl=url, MessageBody=f"message {i}")
        times.append((time.perf_counter() - began) * 1000)
    times.sort()
    return {
        "p50_ms": statistics.median(times),
        "p99_ms": times[int(len(times) * 0.99) - 1],
        "mean_ms": statistics.fmean(times),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        info = broker.start(work / "kafka", port=free_port(), controller_port=free_port())
        results: dict[str, Any] = {}
        try:
            results["sink_sent_us_per_event"] = sink_cost_us(info.bootstrap, 20_000)
            setups = {
                "events_published": {},
                "events_dropped": {
                    "KQS_EVENTS_BOOTSTRAP": f"127.0.0.1:{free_port()}",
                    "KQS_EVENTS_BUFFER_MESSAGES": "1",
                },
            }
            for name, env in setups.items():
                gateway = GatewayProcess(work / name, info.bootstrap, env=env)
                gateway.start()
                try:
                    results[name] = send_latencies_ms(gateway, args.calls)
                finally:
                    gateway.stop()
        finally:
            broker.stop(work / "kafka")
    print(f"event on the request path: {results['sink_sent_us_per_event']:.1f} µs")
    print("| gateway | SendMessage p50 | p99 | mean |")
    print("|---|---|---|---|")
    for name in ("events_published", "events_dropped"):
        r = results[name]
        print(f"| {name} | {r['p50_ms']:.2f} ms | {r['p99_ms']:.2f} ms | {r['mean_ms']:.2f} ms |")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
