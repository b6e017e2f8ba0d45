"""The lease store under random operation sequences: what it serves from what it keeps in
memory (the visibility of every message, scan floors, the sweep point) always agrees with a
store freshly opened on the same data, and every message still there is received in the end.

Callers' clock readings are not monotonic here on purpose: a receive may use a time read
before an await while another request already swept the partition at a later time.
"""

from __future__ import annotations

import random

import pytest

from lease_store.errors import LeaseError
from lease_store.keys import PartitionKey
from lease_store.kv import KeyValueStore
from lease_store.memory import MemoryKeyValueStore
from lease_store.records import StoredMessage
from lease_store.store import LeaseStore
from tests.support.builders import DAY_MS, SECOND_MS, T0, a_partition

PK = a_partition()
FOREVER_MS = 1000 * DAY_MS


def _agrees_with_a_fresh_store(store: LeaseStore, kv: KeyValueStore, now_ms: int) -> None:
    # A fresh store builds the visibility from the facts and knows no floors, so it is the
    # reference for what the running store serves.
    fresh = LeaseStore(kv)
    running = store.partition_state(PK, now_ms)
    reference = fresh.partition_state(PK, now_ms)
    assert (running.visible, running.in_flight, running.delayed) == (
        reference.visible,
        reference.in_flight,
        reference.delayed,
    )
    at_ms = max(now_ms, store.partition_state(PK).swept_until_ms)
    assert store.has_visible(PK, at_ms) == fresh.has_visible(PK, at_ms)
    assert store.next_visible_at_ms(PK, at_ms) == fresh.next_visible_at_ms(PK, at_ms)


def _offsets(kv: KeyValueStore, pk: PartitionKey) -> set[int]:
    start = b"F" + pk.prefix
    rows = kv.scan(start, start + b"\xff" * 8)
    return {int.from_bytes(key[len(start) :], "big", signed=True) for key, _ in rows}


def _one_step(
    rng: random.Random,
    store: LeaseStore,
    now_ms: int,
    unapplied: list[tuple[int, StoredMessage]],
    leases: dict[int, int],
    next_offset: int,
) -> int:
    """One random operation; returns the next offset to produce."""
    roll = rng.random()
    if roll < 0.3:
        for _ in range(rng.randint(1, 5)):
            sent_ms = now_ms - rng.choice([0, 0, 10, 20 * SECOND_MS])  # late: a slow produce
            delay_s = rng.choice([0, 0, 0, 2])
            unapplied.append(
                (next_offset, StoredMessage(f"m{next_offset}", b"x", sent_ms, delay_s))
            )
            next_offset += 1
        applied = rng.randint(0, len(unapplied))
        store.ingest(PK, unapplied[:applied])
        del unapplied[:applied]
    elif roll < 0.55:
        outcome = store.receive(
            PK,
            now_ms,
            max_messages=rng.randint(1, 10),
            visibility_ms=rng.choice([0, 100, 30 * SECOND_MS]),
            retention_ms=FOREVER_MS,
            max_receive_count=rng.choice([None, 3]),
        )
        leases.update((d.offset, d.fact.receive_count) for d in outcome.delivered)
        for moved in outcome.dead_letter:
            store.remove(PK, moved.offset, now_ms)
    elif roll < 0.7 and leases:
        offset = rng.choice(sorted(leases))
        store.remove(PK, offset, now_ms, sync=False)
        del leases[offset]
    elif roll < 0.8 and leases:
        offset = rng.choice(sorted(leases))
        try:
            store.change_visibility(
                PK, offset, leases[offset], now_ms, rng.choice([0, 10, 5 * SECOND_MS]), sync=False
            )
        except LeaseError:
            pass  # a superseded lease: refused, as it should be
    elif roll < 0.85:
        store.counts(PK, now_ms)
    elif roll < 0.9:
        store.has_visible(PK, now_ms)
    elif roll < 0.95:
        store.next_visible_at_ms(PK, now_ms)
    else:
        store.expire_ids(PK, now_ms, rng.choice([FOREVER_MS, 60 * SECOND_MS]))
    return next_offset


@pytest.mark.parametrize("seed", range(60))
def test_random_operations_keep_the_store_consistent_and_lose_nothing(seed: int) -> None:
    rng = random.Random(seed)
    kv = MemoryKeyValueStore()
    store = LeaseStore(kv)
    now_ms = T0
    unapplied: list[tuple[int, StoredMessage]] = []
    leases: dict[int, int] = {}  # offset -> receipt epoch of its latest receive
    next_offset = 0
    for _ in range(300):
        now_ms += rng.choice([0, 0, 1, 5, 50, SECOND_MS, 31 * SECOND_MS])
        # A reading taken a little earlier, by a caller that awaited since.
        stale_ms = now_ms - rng.choice([1, 10]) if rng.random() < 0.1 else now_ms
        next_offset = _one_step(rng, store, stale_ms, unapplied, leases, next_offset)
        _agrees_with_a_fresh_store(store, kv, now_ms)

    # Everything still in the store is received once every lease and delay has ended.
    store.ingest(PK, unapplied)
    now_ms += DAY_MS
    remaining = _offsets(kv, PK)
    received: set[int] = set()
    while outcome := store.receive(PK, now_ms, 10, FOREVER_MS, FOREVER_MS).delivered:
        received.update(d.offset for d in outcome)
    assert received == remaining
