"""Scan floors: where the live keys of an index range begin, so scans skip the dead ones.

The lease store deletes keys constantly (every delete removes a message's fact and its
expiry entry). In RocksDB a deleted key stays behind as a tombstone until compaction reaches
it, and a seek walks over every tombstone between the seek key and the first live key. When
the visibility index was on disk (until format 3) it was scanned from the start of a
partition's range on every receive, and without floors each receive walked over the entries
of every message received since the last compaction: measured in process on workload (a)'s
pattern, the lease-store cost per message reached 24.7 ms after 8,000 messages (0.9 ms with
floors and iterators bounded by the end of their range; bench/results/archive/profile-journal.md). The facts
(`backlog_start`, a partition's load) and the expiry index (`expire`, the oldest message) are
scanned from their start the same way.

A floor is a key of a region (an index tag and a partition) below which the region holds no
live key. Scans start at the floor instead of the region's start, and a scan that starts at
or below the floor moves it up to the first live key it found (or to its end when it found
none): everything it passed over is dead. Every put lowers the floor of its region when the
batch is committed (`written`), so the bound stays a lower bound whatever the order of
scans and writes within an operation. Floors live in memory only; an unknown floor is the
region's start, i.e. a scan as before.
"""

from __future__ import annotations

from lease_store.kv import KeyValueStore, WriteBatch


class ScanFloors:
    def __init__(self, kv: KeyValueStore, tags: tuple[bytes, ...]) -> None:
        """`tags`: the one-byte key prefixes of the indexes whose regions get floors."""
        self._kv = kv
        self._tags = frozenset(tags)
        self._floors: dict[bytes, bytes] = {}

    def scan(
        self, region: bytes, start: bytes, end: bytes, limit: int | None = None
    ) -> list[tuple[bytes, bytes]]:
        """`kv.scan(start, end, limit)` for keys of `region`, starting no lower than its floor."""
        if limit == 0:
            return []
        floor = self._floors.get(region, region)
        rows = self._kv.scan(max(start, floor), end, limit)
        if start <= floor:  # the scan covered everything from the floor on
            if rows:
                self._floors[region] = rows[0][0]
            elif end > floor:
                self._floors[region] = end
        return rows

    def written(self, prefix: bytes, batch: WriteBatch) -> None:
        """Lower floors below the keys a committed batch of partition `prefix` put."""
        for key, value in batch.ops.items():
            if value is None or key[:1] not in self._tags:
                continue
            region = key[:1] + prefix
            if not key.startswith(region):
                self._floors.clear()  # not this partition's key: forget every bound, to be safe
                continue
            floor = self._floors.get(region)
            if floor is not None and key < floor:
                self._floors[region] = key

    def forget(self, prefix: bytes) -> None:
        for tag in self._tags:
            self._floors.pop(tag + prefix, None)
