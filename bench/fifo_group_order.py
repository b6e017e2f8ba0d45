"""The cost of serving FIFO groups in the order they became available, in the lease store alone.

Two scenarios on one partition of 10,000 FIFO messages (memory store, no gateway, no Kafka):

* **receive and delete**: ReceiveMessage of 10 and the delete of what it got, until empty, with
  the messages in 1, 100 or 5,000 groups (interleaved): the common case, groups met are all
  waiting since their send;
* **returned heads**: every group's oldest message back from flight, received 2,000 times with
  VisibilityTimeout 0 (the state stays as it is): the case that reads up to
  `fifo_groups.ORDER_WINDOW` messages a receive.

It prints, for each, the Python function calls (cProfile's count: stable on a shared machine,
where timings are not) and the process CPU time per receive. Run it with PYTHONPATH at a tree
to measure that tree's lease store:

    PYTHONPATH=$PWD .venv/bin/python bench/fifo_group_order.py
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lease_store import fifo
from lease_store.keys import PartitionKey
from lease_store.memory import MemoryKeyValueStore
from lease_store.records import StoredMessage
from lease_store.store import LeaseStore

T0 = 1_700_000_000_000
PK = PartitionKey(b"\x01" * 16, 0)
RETENTION_MS = 10**10


def filled(messages: int, groups: int) -> LeaseStore:
    store = LeaseStore(MemoryKeyValueStore())
    records = [
        (
            offset,
            replace(
                StoredMessage(
                    message_id=f"m{offset}",
                    body=b"x" * 100,
                    sent_ms=T0 - 100_000 + offset,
                    message_group_id=f"g{offset % groups}",
                ),
                deduplication_id=f"d{offset}",
                deduplication_scope=fifo.SCOPE_QUEUE,
            ),
        )
        for offset in range(messages)
    ]
    for start in range(0, messages, 1000):
        store.ingest(PK, records[start : start + 1000])
    return store


def receive_and_delete(store: LeaseStore) -> int:
    now_ms, receives = T0, 0
    while delivered := store.receive_fifo(PK, now_ms, 10, 30_000, RETENTION_MS).delivered:
        store.remove_many(PK, [d.offset for d in delivered], now_ms)
        receives += 1
        now_ms += 1
    return receives + 1


def returned_heads(store: LeaseStore, groups: int, receives: int = 2000) -> int:
    now_ms = T0
    store.receive_fifo(PK, now_ms, min(groups, 10), 1000, RETENTION_MS)  # leased for 1 s...
    now_ms += 2000  # ... and back from flight
    for _ in range(receives):
        now_ms += 1
        store.receive_fifo(PK, now_ms, 10, 0, RETENTION_MS)
    return receives + 1


def measure(name: str, build: Callable[[], LeaseStore], run: Callable[[LeaseStore], int]) -> None:
    store = build()
    profile = cProfile.Profile()
    receives = profile.runcall(run, store)
    calls = pstats.Stats(profile).total_calls  # type: ignore[attr-defined]
    store = build()
    began = time.process_time()
    run(store)
    cpu_us = (time.process_time() - began) / receives * 1e6
    print(f"| {name} | {receives:,} | {calls:,} | {calls / receives:,.0f} | {cpu_us:,.0f} |")


def main() -> None:
    print("| scenario | receives | function calls | calls per receive | CPU µs per receive |")
    print("|---|---|---|---|---|")
    for groups in (1, 100, 5000):
        measure(f"receive and delete, {groups} groups", _builder(groups), receive_and_delete)
    for groups in (1, 100):
        measure(f"returned heads, {groups} groups", _builder(groups), _returning(groups))


def _builder(groups: int) -> Callable[[], LeaseStore]:
    return lambda: filled(10_000, groups)


def _returning(groups: int) -> Callable[[LeaseStore], int]:
    return lambda store: returned_heads(store, groups)


if __name__ == "__main__":
    main()
