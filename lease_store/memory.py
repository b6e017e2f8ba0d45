"""An in-memory `KeyValueStore`: the same contract as RocksDB, for tests and throwaway runs."""

from __future__ import annotations

import bisect

from lease_store.kv import KeyValueStore, WriteBatch


class MemoryKeyValueStore(KeyValueStore):
    def __init__(self) -> None:
        self._values: dict[bytes, bytes] = {}
        self._keys: list[bytes] = []  # sorted, for range scans
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the key-value store is closed")

    def get(self, key: bytes) -> bytes | None:
        self._check_open()
        return self._values.get(key)

    def scan(self, start: bytes, end: bytes, limit: int | None = None) -> list[tuple[bytes, bytes]]:
        self._check_open()
        out: list[tuple[bytes, bytes]] = []
        i = bisect.bisect_left(self._keys, start)
        while i < len(self._keys) and self._keys[i] < end:
            if limit is not None and len(out) >= limit:
                break
            key = self._keys[i]
            out.append((key, self._values[key]))
            i += 1
        return out

    def sync(self) -> None:
        self._check_open()  # nothing to make durable: this store lives in memory only

    def write(self, batch: WriteBatch, *, sync: bool = False) -> None:
        self._check_open()
        for key, value in batch.ops.items():
            if value is None:
                if self._values.pop(key, None) is not None:
                    del self._keys[bisect.bisect_left(self._keys, key)]
            else:
                if key not in self._values:
                    bisect.insort(self._keys, key)
                self._values[key] = value

    def delete_range(self, start: bytes, end: bytes) -> None:
        self._check_open()
        low = bisect.bisect_left(self._keys, start)
        high = max(low, bisect.bisect_left(self._keys, end))
        for key in self._keys[low:high]:
            del self._values[key]
        del self._keys[low:high]

    def close(self) -> None:
        self._values.clear()
        self._keys.clear()
        self._closed = True
