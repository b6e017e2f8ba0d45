"""Failover time of a queue with many messages: SIGKILL the gateway serving it, time until
another gateway serves it again (issue 18: under 10 s for 100,000 messages).

Two group-mode gateways (`KQS_PARTITION_OWNERSHIP=group`) on one embedded broker; one queue
(one partition by default) filled with `--messages` messages of `--body-bytes`, of which
`--in-flight` are received and held (600 s visibility) and `--deleted` deleted, so the
changelog has facts and tombstones to restore. Then, `--kills` times: SIGKILL the gateway
serving the queue, and measure on the survivor (polled every 20 ms):

- served: `kqs_partitions_served` (its `/metrics`) reaches the queue's partitions;
- first receive: a ReceiveMessage through the survivor returns a message;

then check the counts (visible, in flight) are exact, and start the killed gateway again (it
rejoins; the next kill takes whichever gateway serves the queue then). The survivor's own log
gives the restore's share ("partitions served", elapsed_s).

    python -m bench.failover [--messages 100000] [--kills 3] [--out failover]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.sidebyside.loadgen import Client
from bench.sidebyside.servers import free_port
from topology.embedded.broker import EmbeddedBroker

RESULTS = Path(__file__).parent / "results"
SECRET = "failover-bench-shared-secret"


class Gateway:
    def __init__(self, name: str, work: Path, bootstrap: str, partitions: int) -> None:
        self.name = name
        self.data_dir = work / name
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log_path = work / f"{name}.log"
        self.env = {
            **os.environ,
            "KQS_KAFKA_BOOTSTRAP": bootstrap,
            "KQS_PARTITION_OWNERSHIP": "group",
            "KQS_RECEIPT_SECRET": SECRET,
            "KQS_PARTITIONS": str(partitions),
            "KQS_LOG_FORMAT": "json",
        }
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "gateway.cli.main", "serve", "--port", str(self.port),
                 "--data-dir", str(self.data_dir)],
                stdout=log, stderr=subprocess.STDOUT, env=self.env,
            )  # fmt: skip
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.health():
                return
            time.sleep(0.1)
        raise TimeoutError(f"{self.name} not ready; see {self.log_path}")

    def health(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.endpoint}/health", timeout=1) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    def served(self) -> int:
        try:
            with urllib.request.urlopen(f"{self.endpoint}/metrics", timeout=1) as answer:
                text = answer.read().decode()
        except OSError:
            return -1
        found = re.search(r"^kqs_partitions_served (\d+)", text, re.MULTILINE)
        return int(found.group(1)) if found else -1

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=60)

    def last_restore(self) -> dict[str, Any] | None:
        """The last "partitions served" line of its log (restore included)."""
        found = None
        for line in self.log_path.read_text(errors="replace").splitlines():
            if '"partitions served"' in line:
                found = json.loads(line)
        return found


async def fill(endpoint: str, name: str, messages: int, body_bytes: int) -> str:
    body = "x" * body_bytes
    async with Client(endpoint, pool=32) as client:
        url = await client.create_queue(name)
        jobs = iter(range(0, messages, 10))
        began = time.monotonic()

        async def sender() -> None:
            for start in jobs:
                entries = [
                    {"Id": str(i), "MessageBody": body} for i in range(min(10, messages - start))
                ]
                await client.call("SendMessageBatch", {"QueueUrl": url, "Entries": entries})
                if start and start % 20_000 == 0:
                    print(f"  sent {start:,} ({start / (time.monotonic() - began):,.0f}/s)",
                          file=sys.stderr, flush=True)  # fmt: skip

        await asyncio.gather(*(sender() for _ in range(32)))
        return url


async def hold_and_delete(endpoint: str, url: str, in_flight: int, deleted: int) -> int:
    """Receive `in_flight + deleted` messages (600 s visibility), delete `deleted` of them."""
    handles: list[str] = []
    async with Client(endpoint, pool=16) as client:
        while len(handles) < in_flight + deleted:
            answer = await client.call(
                "ReceiveMessage",
                {"QueueUrl": url, "MaxNumberOfMessages": 10, "VisibilityTimeout": 600},
            )
            handles += [m["ReceiptHandle"] for m in answer.get("Messages") or []]
        to_delete = handles[:deleted]
        for start in range(0, len(to_delete), 10):
            entries = [
                {"Id": str(i), "ReceiptHandle": h}
                for i, h in enumerate(to_delete[start : start + 10])
            ]
            await client.call("DeleteMessageBatch", {"QueueUrl": url, "Entries": entries})
        return len(handles)


async def first_receive(endpoint: str, url: str, deadline: float) -> float | None:
    async with Client(endpoint, pool=1) as client:
        while time.monotonic() < deadline:
            try:
                answer = await client.call(
                    "ReceiveMessage",
                    {"QueueUrl": url, "MaxNumberOfMessages": 1, "VisibilityTimeout": 1},
                    record=False,
                )
            except Exception:  # noqa: BLE001 - ServiceUnavailable while nobody serves it
                answer = {}
            if answer.get("Messages"):
                return time.monotonic()
            await asyncio.sleep(0.02)
    return None


async def counts(endpoint: str, url: str) -> tuple[int, int]:
    async with Client(endpoint, pool=1) as client:
        return await client.count(url)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--messages", type=int, default=100_000)
    p.add_argument("--body-bytes", type=int, default=256)
    p.add_argument("--in-flight", type=int, default=10_000)
    p.add_argument("--deleted", type=int, default=10_000)
    p.add_argument("--partitions", type=int, default=1)
    p.add_argument("--kills", type=int, default=3)
    p.add_argument("--out", default="")
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kqs-failover-"))
    runs: list[dict[str, Any]] = []
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    with EmbeddedBroker(work / "kafka", port=free_port(), controller_port=free_port()) as info:
        gateways = [Gateway(n, work, info.bootstrap, args.partitions) for n in ("a", "b")]
        for gateway in gateways:
            gateway.start()
        try:
            print(f"filling {args.messages:,} messages", file=sys.stderr, flush=True)
            url = asyncio.run(
                fill(gateways[0].endpoint, "failover", args.messages, args.body_bytes)
            )
            held = asyncio.run(
                hold_and_delete(gateways[0].endpoint, url, args.in_flight, args.deleted)
            )
            expected = (args.messages - held, held - args.deleted)
            for kill in range(args.kills):
                victim = max(gateways, key=lambda g: g.served())
                survivor = next(g for g in gateways if g is not victim)
                print(f"kill {kill + 1}: SIGKILL {victim.name}", file=sys.stderr, flush=True)
                killed_at = time.monotonic()
                victim.kill()
                served_at = None
                while time.monotonic() - killed_at < 120:
                    if survivor.served() >= args.partitions:
                        served_at = time.monotonic()
                        break
                    time.sleep(0.02)
                received_at = asyncio.run(first_receive(survivor.endpoint, url, killed_at + 120))
                # The probe receive above took a message for 1 s: it is visible again after.
                time.sleep(1.5)
                visible_inflight = asyncio.run(counts(survivor.endpoint, url))
                restore = survivor.last_restore() or {}
                run = {
                    "kill": kill + 1,
                    "victim": victim.name,
                    "served_after_s": round(served_at - killed_at, 3) if served_at else None,
                    "first_receive_after_s": round(received_at - killed_at, 3)
                    if received_at
                    else None,
                    "restore_log": {
                        k: restore.get(k) for k in ("partitions", "restored", "elapsed_s")
                    },
                    "counts_visible_inflight": list(visible_inflight),
                    "counts_exact": tuple(visible_inflight) == expected,
                }
                print(f"  {json.dumps(run)}", file=sys.stderr, flush=True)
                runs.append(run)
                victim.start()
        finally:
            for gateway in gateways:
                gateway.stop()
    served = [r["served_after_s"] for r in runs if r["served_after_s"] is not None]
    result = {
        "started": started,
        "params": vars(args),
        "expected_visible_inflight": list(expected),
        "runs": runs,
        "served_after_s_median": statistics.median(served) if served else None,
    }
    text = markdown(result)
    print(text)
    if args.out:
        (RESULTS / f"{args.out}.json").write_text(json.dumps(result, indent=2) + "\n")
        (RESULTS / f"{args.out}.md").write_text(text)
    return 0


def markdown(result: dict[str, Any]) -> str:
    params = result["params"]
    lines = [
        f"# Failover: a queue of {params['messages']:,} messages after SIGKILL of its gateway",
        "",
        f"`python -m bench.failover --messages {params['messages']} --kills {params['kills']}`"
        f" — {result['started']}; two group-mode gateways on one embedded broker; "
        f"{params['partitions']} partition(s); {params['body_bytes']}-byte bodies; "
        f"{params['in_flight']:,} held in flight (600 s) and {params['deleted']:,} deleted "
        "before the kills.",
        "",
        "| kill | victim | served again after s | first receive after s | restore (survivor's log) | counts (visible, in flight) exact |",
        "|---|---|---|---|---|---|",
    ]
    for run in result["runs"]:
        restore = run["restore_log"]
        lines.append(
            f"| {run['kill']} | {run['victim']} | {run['served_after_s']} | "
            f"{run['first_receive_after_s']} | {restore.get('restored')} restored in "
            f"{restore.get('elapsed_s')} s | {run['counts_visible_inflight']} "
            f"{'yes' if run['counts_exact'] else 'NO'} |"
        )
    lines += ["", f"Median time to served again: {result['served_after_s_median']} s.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
