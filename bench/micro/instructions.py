"""Instructions per SQS request in the gateway, counted by valgrind: the request-path
microbenchmark's figure that the machine's load does not move.

    .venv/bin/python -m bench.micro.instructions                       # this tree
    .venv/bin/python -m bench.micro.instructions --src /tmp/kqs-base --src .

On this shared VM one run's median CPU per request moves by up to 2x within minutes (see
bench/results/archive/profile-journal.md), which hides a change of 5-10 %. Valgrind's count
of executed instructions (`cachegrind --cache-sim=no`) is the same from run to run within
~0.1 %, busy machine or not; it is not time (cache misses and the interpreter's branch
mispredictions are not in it), so it ranks Python-level changes, and a timed A/B says what
they are worth.

Each figure is the difference between two runs of the gateway (memory lease store, Kafka
stand-ins, the in-memory connection of `driver.py`), one of `--requests` requests of the
action and one of a single request, divided by `--requests`: start-up cancels out. Actions:
`empty` (ReceiveMessage on an empty queue), `url` (GetQueueUrl: little besides the request
path itself), `send` (SendMessage of 1 KB), `batch10` (a SendMessageBatch of ten 1 KB
messages and the ReceiveMessage of ten that takes them: the figure is per pair), `cycle10`
(ten messages' whole life: that pair and the DeleteMessageBatch of the ten handles, per cycle;
the delete is signed in the counted process, so the signing of a batch of ten is counted alone
(`sign10`) and taken off). `--store rocksdb` runs the gateway on RocksDB instead of the memory
store: what the lease store costs is then in the figure (its background threads too, which
valgrind serializes; fsyncs are the kernel's, not counted).

A tree given with `--src` needs only `bench/micro/run.py` (e66b4c1 on): this file runs
the requests itself, with that tree first on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
ACTIONS = ("empty", "url", "send", "batch10", "cycle10", "cycle1")
_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def _requests(protocol: str, action: str, urls: dict[str, str]) -> list[bytes]:
    from bench.micro import wire
    from bench.micro.run import BODY

    if action == "empty":
        return [wire.signed(protocol, "ReceiveMessage", {"QueueUrl": urls["empty"]})]
    if action == "url":
        return [wire.signed(protocol, "GetQueueUrl", {"QueueName": "empty"})]
    if action == "send":
        return [
            wire.signed(protocol, "SendMessage", {"QueueUrl": urls["sink"], "MessageBody": BODY})
        ]
    if action == "cycle1":
        send = {"QueueUrl": urls["batch"], "MessageBody": BODY}
        receive = {"QueueUrl": urls["batch"], "MaxNumberOfMessages": 1, "VisibilityTimeout": 600}
        return [
            wire.signed(protocol, "SendMessage", send),
            wire.signed(protocol, "ReceiveMessage", receive),
        ]
    entries = [{"Id": str(i), "MessageBody": BODY} for i in range(10)]
    receive = {"QueueUrl": urls["batch"], "MaxNumberOfMessages": 10, "VisibilityTimeout": 600}
    return [
        wire.signed(protocol, "SendMessageBatch", {"QueueUrl": urls["batch"], "Entries": entries}),
        wire.signed(protocol, "ReceiveMessage", receive),
    ]


def _delete_batch(protocol: str, url: str, handles: list[str]) -> bytes:
    from bench.micro import wire

    entries = [{"Id": str(i), "ReceiptHandle": h} for i, h in enumerate(handles)]
    return wire.signed(protocol, "DeleteMessageBatch", {"QueueUrl": url, "Entries": entries})


def _delete_one(protocol: str, url: str, handle: str) -> bytes:
    from bench.micro import wire

    return wire.signed(protocol, "DeleteMessage", {"QueueUrl": url, "ReceiptHandle": handle})


def _sign_only(protocol: str, count: int, handles: int) -> None:
    """What `cycle10` (`cycle1`) spends signing its deletes, without a gateway: a batch of
    ten handles (a single handle) of a real handle's length, signed `count` times."""
    url = "http://127.0.0.1:9324/000000000000/batch"
    for _ in range(count):
        if handles == 1:
            _delete_one(protocol, url, "h" * 96)
        else:
            _delete_batch(protocol, url, ["h" * 96] * handles)


async def _inner(protocol: str, action: str, count: int, store: str) -> None:
    """Run in the process valgrind counts: `count` times the action's requests."""
    from bench.micro import wire
    from bench.micro.run import _Gateway

    if action in ("sign10", "sign1"):
        _sign_only(protocol, count, 10 if action == "sign10" else 1)
        return
    with tempfile.TemporaryDirectory(prefix="kqs-instructions-") as tmp:
        gateway = _Gateway(store, Path(tmp))
        await gateway.start()
        urls = {}
        for name in ("empty", "sink", "batch"):
            raw = wire.signed(protocol, "CreateQueue", {"QueueName": name})
            status, body = await gateway.call(raw)
            url = wire.parse(protocol, status, body).queue_url
            assert url is not None, body
            urls[name] = url
        requests = _requests(protocol, action, urls)
        for _ in range(count):
            for raw in requests:
                status, body = await gateway.call(raw)
                if status != 200:
                    raise SystemExit(f"{action}: HTTP {status} {body[:300]!r}")
            if action == "cycle10":
                handles = [handle for handle, _ in wire.parse(protocol, status, body).messages]
                assert len(handles) == 10, body[:300]
                answer = wire.parse(
                    protocol, *await gateway.call(_delete_batch(protocol, urls["batch"], handles))
                )
                assert answer.successful == 10, answer
            elif action == "cycle1":
                [(handle, _)] = wire.parse(protocol, status, body).messages
                status, body = await gateway.call(_delete_one(protocol, urls["batch"], handle))
                assert status == 200, body[:300]
        await gateway.stop()


def _count(src: Path, protocol: str, action: str, requests: int, store: str) -> int:
    """Instructions valgrind counts in one run of `requests` requests (or pairs)."""
    command = [
        "valgrind",
        "--tool=cachegrind",
        "--cache-sim=no",
        "--cachegrind-out-file=/dev/null",
        sys.executable,
        str(HERE),
        "--inner",
        protocol,
        action,
        str(requests),
        store,
    ]
    # A fixed hash seed: set and dict layouts, and so the work of lookups, repeat.
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": "0"}
    run = subprocess.run(command, cwd=src, env=env, capture_output=True, text=True, check=True)
    found = _REFS.search(run.stderr)
    if found is None:
        raise SystemExit(f"no instruction count from valgrind:\n{run.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--src", type=Path, action="append", help="source tree (repeat; default .)")
    p.add_argument("--actions", default=",".join(ACTIONS), help=",".join(ACTIONS))
    p.add_argument("--protocols", default="json,query")
    p.add_argument("--requests", type=int, default=400, help="requests (pairs) per count")
    p.add_argument("--store", choices=("memory", "rocksdb"), default="memory")
    p.add_argument(
        "--inner", nargs=4, metavar=("PROTOCOL", "ACTION", "N", "STORE"), help=argparse.SUPPRESS
    )
    return p


def main(argv: list[str] | None = None) -> None:
    args: Any = _parser().parse_args(argv)
    if args.inner:
        protocol, action, count, store = args.inner
        import uvloop

        _collector_as_served()
        uvloop.run(_inner(protocol, action, int(count), store))
        return
    sources = [path.resolve() for path in args.src or [Path(".")]]
    print(f"store: {args.store}")
    print("| tree | protocol | action | instructions per request |")
    print("|---|---|---|---|")
    for src in sources:
        for protocol in args.protocols.split(","):
            for action in args.actions.split(","):
                per = _per_request(src, protocol, action, args.requests, args.store)
                if action in ("cycle10", "cycle1"):
                    signing = "sign10" if action == "cycle10" else "sign1"
                    per -= _per_request(src, protocol, signing, args.requests, args.store)
                print(f"| {src} | {protocol} | {action} | {per:,} |", flush=True)


def _collector_as_served() -> None:
    """The collector settings `kqs serve` runs with (gateway/cli/collector.py), in a tree that
    has them (an older tree compared against may not): a young collection every 50,000
    allocations instead of 700 changes what a request costs."""
    try:
        from gateway.cli import collector
    except ImportError:
        return
    collector.tune_for_serving()


def _per_request(src: Path, protocol: str, action: str, requests: int, store: str) -> int:
    one = _count(src, protocol, action, 1, store)
    many = _count(src, protocol, action, requests + 1, store)
    return (many - one) // requests


if __name__ == "__main__":
    main()
