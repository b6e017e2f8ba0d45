"""In-process A/B of the lease store: the gateway's per-request lease work without HTTP/Kafka.

    .venv/bin/python -m bench.sidebyside.leasebench --base-src /tmp/kqs-base [--rounds 5]

Each round runs the same loop once with this tree's `lease_store` and once with the base
tree's (a subprocess each, that tree first on PYTHONPATH), alternating: ingest a backlog,
then per iteration what a short-poll consumer of workload (a) costs the store —
`expire()` + `counts()` (the in-flight limit check), `receive(1)`, `remove()` (synced write). It reports
CPU µs per iteration (process time: fsync waits excluded, so a loaded machine disturbs it
less than throughput) and wall µs per iteration.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

_CHILD = r"""
import json, sys, tempfile, time
from pathlib import Path
from lease_store.records import StoredMessage
from lease_store.rocks import RocksKeyValueStore
from lease_store.store import LeaseStore
try:
    from lease_store.keys import PartitionKey
except ImportError:  # a tree from before store.py's key layout moved to keys.py
    from lease_store.store import PartitionKey
backlog, iterations = int(sys.argv[1]), int(sys.argv[2])
with tempfile.TemporaryDirectory() as tmp:
    store = LeaseStore(RocksKeyValueStore(Path(tmp) / "leases"))
    pk = PartitionKey(b"\x01" * 16, 0)
    now = 1_700_000_000_000
    body = b"x" * 1024
    for start in range(0, backlog, 500):
        store.ingest(pk, [(o, StoredMessage(f"m{o}", body, now)) for o in range(start, min(backlog, start + 500))])
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for i in range(iterations):
        now += 1  # the clock moves on between requests, as it does in the gateway
        store.expire(pk, now, 345_600_000)  # MessageService.counts expires first
        store.counts(pk, now)
        outcome = store.receive(pk, now, 1, 30_000, 345_600_000)
        for d in outcome.delivered:
            store.remove(pk, d.offset, now)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    print(json.dumps({"cpu_us": cpu / iterations * 1e6, "wall_us": wall / iterations * 1e6, "tree": __import__("lease_store.store").store.__file__}))
"""


def _one(src: Path, backlog: int, iterations: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(backlog), str(iterations)],
        env=env,
        cwd=src,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--base-src", type=Path, required=True)
    p.add_argument("--new-src", type=Path, help="tree measured as 'new' (default: this one)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--backlog", type=int, default=20_000)
    p.add_argument("--iterations", type=int, default=2_000)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    here = (args.new_src or Path(__file__).resolve().parents[2]).resolve()
    rows: dict[str, list[dict[str, float]]] = {"new": [], "base": []}
    for _ in range(args.rounds):
        rows["new"].append(_one(here, args.backlog, args.iterations))
        rows["base"].append(_one(args.base_src.resolve(), args.backlog, args.iterations))
    summary = {
        label: {
            "cpu_us_median": round(statistics.median(r["cpu_us"] for r in runs), 1),
            "wall_us_median": round(statistics.median(r["wall_us"] for r in runs), 1),
        }
        for label, runs in rows.items()
    }
    ratio_cpu = [n["cpu_us"] / b["cpu_us"] for n, b in zip(rows["new"], rows["base"], strict=True)]
    result = {
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "when_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "params": {"backlog": args.backlog, "iterations": args.iterations, "rounds": args.rounds},
        "new_src": str(here),
        "base_src": str(args.base_src.resolve()),
        "summary": summary,
        "cpu_ratio_new_over_base_per_round": [round(r, 3) for r in ratio_cpu],
        "cpu_ratio_median": round(statistics.median(ratio_cpu), 3),
        "runs": rows,
    }
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
