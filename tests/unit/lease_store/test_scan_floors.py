"""Scan floors skip dead keys without ever hiding a live one."""

from __future__ import annotations

import random

import pytest

from lease_store.floors import ScanFloors
from lease_store.kv import WriteBatch
from lease_store.memory import MemoryKeyValueStore

PREFIXES = [b"\x00\x01", b"\x00\x02"]
TAGS = (b"V", b"X")


def _key(rng: random.Random, prefix: bytes) -> bytes:
    return rng.choice(TAGS) + prefix + rng.randrange(200).to_bytes(2, "big")


@pytest.mark.parametrize("seed", range(20))
def test_scans_through_floors_return_what_plain_scans_return(seed: int) -> None:
    # Given random puts, deletes and scans of two partitions' index regions
    rng = random.Random(seed)
    kv = MemoryKeyValueStore()
    floors = ScanFloors(kv, TAGS)
    for _ in range(3000):
        prefix = rng.choice(PREFIXES)
        if rng.random() < 0.5:
            batch = WriteBatch()
            for _ in range(rng.randrange(1, 4)):
                key = _key(rng, prefix)
                if rng.random() < 0.5:
                    batch.put(key, b"v")
                else:
                    batch.delete(key)
            kv.write(batch)
            floors.written(prefix, batch)
        else:
            region = rng.choice(TAGS) + prefix
            low, high = sorted(rng.randrange(210) for _ in range(2))
            start = region + low.to_bytes(2, "big") if rng.random() < 0.7 else region
            end = region + high.to_bytes(2, "big")
            limit = rng.choice([None, 0, 1, 3])
            # Then each scan sees exactly the live keys a plain scan sees
            assert floors.scan(region, start, end, limit) == kv.scan(start, end, limit)


def test_a_scan_from_the_floor_starts_after_the_dead_keys() -> None:
    # Given a region whose first 100 keys were put and deleted, and one live key after them
    kv = MemoryKeyValueStore()
    floors = ScanFloors(kv, TAGS)
    region = b"V" + PREFIXES[0]
    for i in range(100):
        batch = WriteBatch()
        batch.put(region + i.to_bytes(2, "big"), b"v")
        kv.write(batch)
        floors.written(PREFIXES[0], batch)
    batch = WriteBatch()
    for i in range(100):
        batch.delete(region + i.to_bytes(2, "big"))
    batch.put(region + (150).to_bytes(2, "big"), b"live")
    kv.write(batch)
    floors.written(PREFIXES[0], batch)
    assert floors.scan(region, region, region + b"\xff\xff", 1)[0][1] == b"live"
    # When the next scan runs, the store is asked from the live key on
    asked: list[bytes] = []
    plain_scan = kv.scan

    def spy(start: bytes, end: bytes, limit: int | None = None) -> list[tuple[bytes, bytes]]:
        asked.append(start)
        return plain_scan(start, end, limit)

    kv.scan = spy  # type: ignore[method-assign]
    floors.scan(region, region, region + b"\xff\xff", 1)
    assert asked == [region + (150).to_bytes(2, "big")]
    # And a key put below the floor is found again
    batch = WriteBatch()
    batch.put(region + (5).to_bytes(2, "big"), b"new")
    kv.write(batch)
    floors.written(PREFIXES[0], batch)
    assert floors.scan(region, region, region + b"\xff\xff", 1)[0][1] == b"new"
