"""A/B of the lease store alone over a message's whole life: fill, batch drain, reopen.

    .venv/bin/python -m bench.micro.lease_cycle --base-src /tmp/kqs-base [--messages 100000]
        [--rounds 3]

Each round runs the same child once per tree (a subprocess with that tree first on
PYTHONPATH, trees alternating, this tree first in odd rounds): into a RocksDB lease store in
a temporary directory it ingests N 1 KB messages in batches of 10 (as ingest applies a
SendMessageBatch), drains them as workload (b) does (`receive` of 10 with a 30 s visibility
timeout, then `remove_many` and one `sync`), then fills N more, closes the store, opens it
again and times the first call that touches the partition (`counts`: a store that keeps
state in memory builds it then). It prints CPU µs per message of each phase (process time, so
RocksDB's own threads count and fsync waits do not), the reopen's wall time and the peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

_CHILD = r"""
import json, resource, sys, tempfile, time
from pathlib import Path
from lease_store.records import StoredMessage
from lease_store.rocks import RocksKeyValueStore
from lease_store.store import LeaseStore
try:
    from lease_store.keys import PartitionKey
except ImportError:  # a tree from before store.py's key layout moved to keys.py
    from lease_store.store import PartitionKey
n = int(sys.argv[1])
pk = PartitionKey(b"\x01" * 16, 0)
now = 1_700_000_000_000
body = b"x" * 1024
retention = 345_600_000
out = {}
def fill(store, first):
    for start in range(first, first + n, 10):
        store.ingest(pk, [(o, StoredMessage(f"m{o}", body, now)) for o in range(start, start + 10)], now)
with tempfile.TemporaryDirectory() as tmp:
    path = Path(tmp) / "leases"
    store = LeaseStore(RocksKeyValueStore(path))
    store.upgrade_format()
    cpu = time.process_time()
    fill(store, 0)
    out["fill_us"] = (time.process_time() - cpu) / n * 1e6
    cpu = time.process_time()
    drained = 0
    while delivered := store.receive(pk, now, 10, 30_000, retention).delivered:
        drained += len(store.remove_many(pk, [d.offset for d in delivered], now))
        store.sync()
        now += 1
    out["drain_us"] = (time.process_time() - cpu) / n * 1e6
    assert drained == n, drained
    fill(store, n)
    store.close()
    wall = time.perf_counter()
    store = LeaseStore(RocksKeyValueStore(path))
    counts = store.counts(pk, now)
    out["reopen_ms"] = (time.perf_counter() - wall) * 1e3
    assert counts.visible == n, counts
    store.close()
out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""

_PHASES = ("fill_us", "drain_us", "reopen_ms", "peak_rss_mb")


def _run(src: Path, messages: int) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(messages)],
        env={**os.environ, "PYTHONPATH": str(src)},
        cwd=src,
        capture_output=True,
        text=True,
        check=True,
        timeout=1800,
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--base-src", type=Path, required=True)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    trees = {"this tree": Path.cwd(), "base": args.base_src.resolve()}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for round_no in range(args.rounds):
        order = list(trees) if round_no % 2 == 0 else list(reversed(trees))
        for name in order:
            result = _run(trees[name], args.messages)
            runs[name].append(result)
            figures = ", ".join(f"{k} {result[k]:.1f}" for k in _PHASES)
            print(f"round {round_no + 1} {name}: {figures}", flush=True)
    print(f"\nmedians of {args.rounds} rounds, {args.messages:,} messages:")
    print(f"| tree | {' | '.join(_PHASES)} |")
    print(f"|---|{'---|' * len(_PHASES)}")
    for name, results in runs.items():
        medians = [statistics.median(r[k] for r in results) for k in _PHASES]
        print(f"| {name} | {' | '.join(f'{m:.1f}' for m in medians)} |")


if __name__ == "__main__":
    main()
