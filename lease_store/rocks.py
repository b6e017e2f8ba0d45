"""The durable `KeyValueStore`, on RocksDB through rocksdict."""

from __future__ import annotations

from pathlib import Path

from rocksdict import Options, Rdict, WriteOptions
from rocksdict import WriteBatch as RocksWriteBatch

from lease_store.kv import KeyValueStore, WriteBatch


class RocksKeyValueStore(KeyValueStore):
    def __init__(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        self._db = Rdict(str(path), options)
        self._sync = WriteOptions()
        self._sync.sync = True
        self._nosync = WriteOptions()

    def get(self, key: bytes) -> bytes | None:
        value: bytes | None = self._db.get(key)
        return value

    def scan(self, start: bytes, end: bytes, limit: int | None = None) -> list[tuple[bytes, bytes]]:
        out: list[tuple[bytes, bytes]] = []
        it = self._db.iter()
        try:
            it.seek(start)
            while it.valid() and (limit is None or len(out) < limit):
                key = it.key()
                if key >= end:
                    break
                out.append((key, it.value()))
                it.next()
        finally:
            del it
        return out

    def write(self, batch: WriteBatch, *, sync: bool = False) -> None:
        if not batch.ops:
            return
        rocks_batch = RocksWriteBatch(raw_mode=True)
        for key, value in batch.ops.items():
            if value is None:
                rocks_batch.delete(key)
            else:
                rocks_batch.put(key, value)
        self._db.write(rocks_batch, self._sync if sync else self._nosync)

    def close(self) -> None:
        self._db.close()
