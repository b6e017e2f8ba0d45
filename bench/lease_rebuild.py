"""Rebuild time of a lost lease store: N live messages, gateway killed, lease directory deleted.

The script starts its own broker (jar) and gateway under a temporary directory, fills a queue
with N messages straight through Kafka (as `receive_backlog.py` does), waits until the gateway
has ingested them, receives and deletes a few (so the changelog has facts and tombstones to
apply), then SIGKILLs the gateway, deletes `<data-dir>/leases` and starts it again. It reports
the rebuild time the gateway logs, the time until it answers /health, and checks the counts.

    .venv/bin/python bench/lease_rebuild.py [--messages 1000000] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.receive_backlog import fill, topic_of, wait_ingested
from tests.support.harness import GatewayProcess, free_port, json_client
from topology.embedded import broker


def rebuild_log(gateway: GatewayProcess) -> dict[str, Any]:
    for line in reversed(gateway.log_path.read_text(errors="replace").splitlines()):
        if '"lease store rebuilt"' in line:
            entry: dict[str, Any] = json.loads(line)
            return entry
    raise LookupError("the gateway logged no rebuild")


def counts(sqs: Any, url: str) -> tuple[int, int]:
    attrs = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attrs["ApproximateNumberOfMessages"]), int(
        attrs["ApproximateNumberOfMessagesNotVisible"]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--touched", type=int, default=200, help="messages received (half deleted)")
    parser.add_argument("--body-bytes", type=int, default=100)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kqs-bench-") as tmp:
        work = Path(tmp)
        info = broker.start(work / "kafka", port=free_port(), controller_port=free_port())
        gateway = GatewayProcess(work / "gateway", info.bootstrap)
        try:
            gateway.start()
            sqs = json_client(gateway.endpoint)
            url = sqs.create_queue(QueueName="rebuild")["QueueUrl"]
            print(f"producing {args.messages:,} messages", file=sys.stderr)
            fill_s = fill(
                info.bootstrap, topic_of(info.bootstrap, url), args.messages, args.body_bytes
            )
            ingest_s = wait_ingested(sqs, url, args.messages, timeout_s=1800)
            touched = 0
            while touched < args.touched:
                batch = sqs.receive_message(
                    QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=3600
                )["Messages"]
                for i, message in enumerate(batch):
                    if (touched + i) % 2 == 0:
                        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
                touched += len(batch)
            before = counts(sqs, url)
            print(f"before the crash: visible, in flight = {before}", file=sys.stderr)
            gateway.kill()
            shutil.rmtree(gateway.data_dir / "leases")
            began = time.monotonic()
            gateway.start(timeout_s=3600)
            ready_s = time.monotonic() - began
            after = counts(json_client(gateway.endpoint), url)
            logged = rebuild_log(gateway)
        finally:
            gateway.stop()
            broker.stop(work / "kafka")
    result = {
        "messages": args.messages,
        "touched": args.touched,
        "fill_s": round(fill_s, 1),
        "ingest_wait_s": round(ingest_s, 1),
        "rebuild_s": logged["elapsed_s"],
        "restart_until_ready_s": round(ready_s, 1),
        "live_messages": logged["live_messages"],
        "changelog_records": logged["changelog_records"],
        "counts_before": before,
        "counts_after": after,
        "counts_exact": before == after,
        "machine": platform.platform(),
        "python": platform.python_version(),
    }
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0 if before == after else 1


if __name__ == "__main__":
    sys.exit(main())
