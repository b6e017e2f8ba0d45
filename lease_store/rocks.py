"""The durable `KeyValueStore`, on RocksDB through rocksdict."""

from __future__ import annotations

import time
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import cast

from rocksdict import AccessType, Options, Rdict, ReadOptions, WriteOptions
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
        # The bound matters as much as the seek: the lease store deletes keys all the time,
        # and an unbounded iterator that finds nothing live before `end` walks on over every
        # tombstone after it (a short-poll receive on an empty queue skipped thousands of
        # deleted lease-index keys, milliseconds each time) until it finds a live key.
        options = ReadOptions()
        options.set_iterate_upper_bound(end)
        # rocksdict's `items` steps the iterator in Rust: 0.36 µs a row against 0.65 for a
        # Python loop of key() / value() / next() (a partition's facts are read at its load).
        # (raw mode: keys and values are bytes, which rocksdict's stubs cannot say)
        rows = cast(Iterator[tuple[bytes, bytes]], self._db.items(from_key=start, read_opt=options))
        try:
            return list(rows if limit is None else islice(rows, limit))
        finally:
            del rows

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

    def delete_range(self, start: bytes, end: bytes) -> None:
        if start < end:
            self._db.delete_range(start, end, self._nosync)

    def sync(self) -> None:
        self._db.flush_wal(True)  # write and fsync the WAL: what `sync=True` writes would do

    def close(self) -> None:
        self._db.close()


class ReadOnlyRocksKeyValueStore(RocksKeyValueStore):
    """A read-only view of a lease store that a running gateway may hold open.

    RocksDB's read-only mode takes no lock, so it opens while the gateway writes: it reads
    the MANIFEST and replays the live WAL files, which gives the state as of the open, whole
    write batches only (each batch is one WAL record). The gateway may delete a file it
    just made obsolete (a flushed WAL, a compacted SST) while the view opens; RocksDB then
    reports the missing file, and the open is retried.

    A secondary instance (`AccessType.secondary`) was measured too: it needs a scratch
    directory, and under sustained writes its open took from 0.3 s up to a minute, where the
    read-only open took milliseconds and failed, retryably, on about 3 % of attempts.
    """

    def __init__(self, path: Path, attempts: int = 10) -> None:
        if not (path / "CURRENT").is_file():
            raise FileNotFoundError(f"no RocksDB database in {path}")
        access = AccessType.read_only(False)  # error_if_log_file_exist=False: the WAL is live
        for attempt in range(attempts):
            try:
                self._db = Rdict(str(path), Options(raw_mode=True), access_type=access)
                return
            except Exception as exc:  # rocksdict raises a bare Exception
                if "No such file" not in str(exc) or attempt == attempts - 1:
                    raise
                time.sleep(0.02 * (attempt + 1))

    def write(self, batch: WriteBatch, *, sync: bool = False) -> None:
        raise PermissionError("this view of the lease store is read-only")

    def delete_range(self, start: bytes, end: bytes) -> None:
        raise PermissionError("this view of the lease store is read-only")

    def sync(self) -> None:
        raise PermissionError("this view of the lease store is read-only")
