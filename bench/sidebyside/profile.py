"""Profile the KQS gateway under a side-by-side workload with py-spy (sampling, on-CPU only).

    .venv/bin/python -m bench.sidebyside.profile [--workload a|b] [--duration 20]

Starts `kqs serve` like the benchmark (pinned to the server core), attaches `py-spy record`
to the gateway process for the run, and prints the top frames by own time and by inclusive
time from the collapsed stacks (also kept under bench/results/ with --out).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.sidebyside import servers, workloads
from bench.sidebyside.loadgen import Client

RESULTS = Path(__file__).resolve().parents[1] / "results"


def summarize(collapsed: Path, top: int = 25) -> str:
    own: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    for line in collapsed.read_text().splitlines():
        stack, _, count_s = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_s)
        total += count
        frames = stack.split(";")
        own[_short(frames[-1])] += count
        for frame in {_short(f) for f in frames}:
            incl[frame] += count
    lines = [f"samples: {total}", "", "| own % | frame |", "|---|---|"]
    for frame, n in own.most_common(top):
        lines.append(f"| {100 * n / total:.1f} | `{frame}` |")
    lines += ["", "| inclusive % | frame |", "|---|---|"]
    for frame, n in incl.most_common(top + 15):
        lines.append(f"| {100 * n / total:.1f} | `{frame}` |")
    return "\n".join(lines)


def _short(frame: str) -> str:
    # py-spy raw frames look like "function (path/to/module.py:123)"
    name, _, where = frame.partition(" (")
    where = where.rstrip(")")
    path, _, _line = where.rpartition(":")
    parts = Path(path).parts
    for anchor in ("site-packages", "lib", "wt-bench"):
        if anchor in parts:
            parts = parts[parts.index(anchor) + 1 :]
            break
    return f"{name} ({'/'.join(parts[-3:])})"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workload", default="a", choices=["a", "b"])
    p.add_argument("--duration", type=float, default=20.0)
    p.add_argument("--rate", type=int, default=97, help="py-spy samples per second")
    p.add_argument("--out", default=None, help="keep collapsed stacks as bench/results/<out>.txt")
    p.add_argument("--kqs-env", action="append", default=[])
    args = p.parse_args()
    os.sched_setaffinity(0, {0})
    params = workloads.pair_params(args.workload == "b", args.duration)
    kqs_env = dict(kv.split("=", 1) for kv in args.kqs_env)
    tmp = Path(tempfile.mkdtemp(prefix="kqs-profile-"))
    collapsed = tmp / "stacks.txt"
    try:
        with servers.running("kqs", tmp / "kqs", [1], kqs_env) as server:
            spy = subprocess.Popen(
                [
                    str(servers.VENV_BIN / "py-spy"),
                    "record",
                    "--pid",
                    str(server.proc.pid),
                    "--format",
                    "raw",
                    "--rate",
                    str(args.rate),
                    "--duration",
                    str(int(args.duration)),
                    "--output",
                    str(collapsed),
                    "--nonblocking",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )

            async def go() -> dict[str, Any]:
                async with Client(server.endpoint, pool=64) as client:
                    return await workloads.producer_consumer(client, params)

            result = asyncio.run(go())
            spy.wait(timeout=args.duration + 60)
        print(
            f"workload {args.workload}: sent/s {result['sent_per_s']}, "
            f"recv+del/s {result['received_deleted_per_s']}, load {os.getloadavg()[0]:.2f}"
        )
        print(summarize(collapsed))
        if args.out:
            shutil.copy(collapsed, RESULTS / f"{args.out}.txt")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
