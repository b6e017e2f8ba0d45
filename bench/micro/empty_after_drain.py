"""What an empty receive costs on a queue that was just drained (the lease store alone).

    .venv/bin/python -m bench.micro.empty_after_drain [--messages 100000] [--polls 1000]

Ingests N 1 KB messages into one partition of a RocksDB lease store, drains them
(`receive` of 10 with a 30 s visibility timeout, then `remove_many`), then times what a
parked long poll does on the empty partition while those leases' tombstones still lie ahead
of the clock: an empty `receive` and `next_visible_at_ms`. Run it with `PYTHONPATH` set to
another source tree (and from there) to compare trees.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from lease_store.keys import PartitionKey
from lease_store.rocks import RocksKeyValueStore
from lease_store.store import LeaseStore
from tests.support.builders import a_message

RETENTION_MS = 4 * 86_400_000


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--polls", type=int, default=1000)
    args = parser.parse_args()
    store = LeaseStore(RocksKeyValueStore(Path(tempfile.mkdtemp(prefix="kqs-empty-"))))
    pk = PartitionKey(b"q" * 16, 0)
    now_ms = 1_700_000_000_000
    for start in range(0, args.messages, 100):
        ends = range(start, min(start + 100, args.messages))
        store.ingest(pk, [(i, a_message(f"m{i}", body=b"x" * 1000)) for i in ends], now_ms)
    began = time.perf_counter()
    drained = 0
    while delivered := store.receive(pk, now_ms, 10, 30_000, RETENTION_MS).delivered:
        drained += len(store.remove_many(pk, [d.offset for d in delivered], now_ms))
        now_ms += drained % 60 == 0  # ~6,000 messages a second
    drain_s = time.perf_counter() - began
    began = time.perf_counter()
    for _ in range(args.polls):
        store.receive(pk, now_ms, 10, 30_000, RETENTION_MS)
        store.next_visible_at_ms(pk, now_ms)
        now_ms += 5
    poll_s = time.perf_counter() - began
    print(
        f"{drained:,} drained at {drain_s / drained * 1e6:.1f} µs per message; then "
        f"{args.polls:,} empty polls at {poll_s / args.polls * 1e6:,.0f} µs each"
    )
    store.close()


if __name__ == "__main__":
    main()
