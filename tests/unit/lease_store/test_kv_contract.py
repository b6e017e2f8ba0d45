"""The `KeyValueStore` contract, run against every implementation.

The lease store is written against this contract only, so both backends must agree on it
exactly: ordering is bytewise, `scan` is half-open, and a batch applies its final operation
per key.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lease_store.kv import KeyValueStore, WriteBatch
from lease_store.rocks import RocksKeyValueStore
from tests.support.builders import on_every_backend


def put(kv: KeyValueStore, *entries: tuple[bytes, bytes]) -> None:
    batch = WriteBatch()
    for key, value in entries:
        batch.put(key, value)
    kv.write(batch)


def delete(kv: KeyValueStore, *keys: bytes) -> None:
    batch = WriteBatch()
    for key in keys:
        batch.delete(key)
    kv.write(batch)


def keys_of(entries: list[tuple[bytes, bytes]]) -> list[bytes]:
    return [key for key, _ in entries]


# -- get, put, delete ---------------------------------------------------------------------


@on_every_backend
def test_get_of_a_missing_key_returns_none(kv: KeyValueStore) -> None:
    # Given an empty store
    # When / Then
    assert kv.get(b"absent") is None


@on_every_backend
def test_get_returns_the_value_that_was_put(kv: KeyValueStore) -> None:
    # Given
    put(kv, (b"key", b"value"))

    # When
    value = kv.get(b"key")

    # Then
    assert value == b"value"


@on_every_backend
def test_put_of_an_existing_key_replaces_its_value(kv: KeyValueStore) -> None:
    # Given
    put(kv, (b"key", b"old"))

    # When
    put(kv, (b"key", b"new"))

    # Then
    assert kv.get(b"key") == b"new"
    assert kv.scan(b"", b"\xff") == [(b"key", b"new")]


@on_every_backend
def test_an_empty_value_is_stored_and_not_mistaken_for_a_missing_key(kv: KeyValueStore) -> None:
    # Given
    put(kv, (b"empty", b""))

    # When
    value = kv.get(b"empty")

    # Then
    assert value == b""
    assert kv.scan(b"", b"\xff") == [(b"empty", b"")]


@on_every_backend
def test_binary_keys_and_values_round_trip_unchanged(kv: KeyValueStore) -> None:
    # Given
    key, value = bytes(range(256)), bytes(reversed(range(256))) * 4

    # When
    put(kv, (key, value))

    # Then
    assert kv.get(key) == value


@on_every_backend
def test_delete_removes_the_key(kv: KeyValueStore) -> None:
    # Given
    put(kv, (b"a", b"1"), (b"b", b"2"))

    # When
    delete(kv, b"a")

    # Then
    assert kv.get(b"a") is None
    assert kv.get(b"b") == b"2"
    assert kv.scan(b"", b"\xff") == [(b"b", b"2")]


@on_every_backend
def test_delete_of_a_missing_key_is_a_no_op(kv: KeyValueStore) -> None:
    # Given
    put(kv, (b"a", b"1"))

    # When
    delete(kv, b"never-written")

    # Then
    assert kv.scan(b"", b"\xff") == [(b"a", b"1")]


@on_every_backend
def test_a_deleted_key_can_be_written_again(kv: KeyValueStore) -> None:
    # Given
    put(kv, (b"a", b"1"))
    delete(kv, b"a")

    # When
    put(kv, (b"a", b"2"))

    # Then
    assert kv.get(b"a") == b"2"
    assert kv.scan(b"", b"\xff") == [(b"a", b"2")]


# -- scan ---------------------------------------------------------------------------------


@on_every_backend
def test_scan_returns_entries_in_ascending_bytewise_key_order(kv: KeyValueStore) -> None:
    # Given keys written out of order, including high bytes and shared prefixes
    written = [b"\xff", b"b", b"a\x00", b"\x80", b"ab", b"a", b"\x00", b"\x7f"]
    put(kv, *[(key, b"v-" + key) for key in written])

    # When
    entries = kv.scan(b"", b"\xff\xff")

    # Then bytes compare unsigned, and a prefix sorts before its extensions
    assert keys_of(entries) == [b"\x00", b"a", b"a\x00", b"ab", b"b", b"\x7f", b"\x80", b"\xff"]
    assert all(value == b"v-" + key for key, value in entries)


@on_every_backend
def test_scan_includes_start_and_excludes_end(kv: KeyValueStore) -> None:
    # Given
    put(kv, *[(bytes([k]), b"v") for k in range(1, 6)])

    # When
    entries = kv.scan(b"\x02", b"\x04")

    # Then
    assert keys_of(entries) == [b"\x02", b"\x03"]


@on_every_backend
def test_scan_bounds_need_not_be_existing_keys(kv: KeyValueStore) -> None:
    # Given
    put(kv, (b"b", b"1"), (b"d", b"2"), (b"f", b"3"))

    # When
    entries = kv.scan(b"c", b"e")

    # Then
    assert keys_of(entries) == [b"d"]


@on_every_backend
def test_scan_of_a_prefix_range_excludes_neighbouring_prefixes(kv: KeyValueStore) -> None:
    # Given two "partitions" whose prefixes differ only in the last byte
    put(kv, (b"P\x01k1", b"x"), (b"P\x01k2", b"x"), (b"P\x00k9", b"x"), (b"P\x02k0", b"x"))

    # When
    entries = kv.scan(b"P\x01", b"P\x02")

    # Then
    assert keys_of(entries) == [b"P\x01k1", b"P\x01k2"]


@on_every_backend
@pytest.mark.parametrize(("start", "end"), [(b"c", b"c"), (b"d", b"b"), (b"x", b"z")])
def test_scan_of_an_empty_or_inverted_range_returns_nothing(
    kv: KeyValueStore, start: bytes, end: bytes
) -> None:
    # Given
    put(kv, (b"a", b"1"), (b"c", b"2"), (b"e", b"3"))

    # When
    entries = kv.scan(start, end)

    # Then
    assert entries == []


@on_every_backend
def test_scan_returns_at_most_limit_entries_from_the_start(kv: KeyValueStore) -> None:
    # Given
    put(kv, *[(bytes([k]), b"v") for k in range(10)])

    # When
    entries = kv.scan(b"\x02", b"\xff", limit=3)

    # Then
    assert keys_of(entries) == [b"\x02", b"\x03", b"\x04"]


@on_every_backend
def test_scan_with_a_limit_beyond_the_range_returns_the_whole_range(kv: KeyValueStore) -> None:
    # Given
    put(kv, (b"a", b"1"), (b"b", b"2"))

    # When
    entries = kv.scan(b"", b"\xff", limit=100)

    # Then
    assert keys_of(entries) == [b"a", b"b"]


@on_every_backend
def test_scan_with_limit_zero_returns_nothing(kv: KeyValueStore) -> None:
    # Given
    put(kv, (b"a", b"1"))

    # When
    entries = kv.scan(b"", b"\xff", limit=0)

    # Then
    assert entries == []


@on_every_backend
def test_scan_does_not_return_deleted_keys(kv: KeyValueStore) -> None:
    # Given
    put(kv, (b"a", b"1"), (b"b", b"2"), (b"c", b"3"))
    delete(kv, b"b")

    # When
    entries = kv.scan(b"a", b"z")

    # Then
    assert entries == [(b"a", b"1"), (b"c", b"3")]


@on_every_backend
def test_scan_result_is_a_snapshot_unaffected_by_later_writes(kv: KeyValueStore) -> None:
    # Given
    put(kv, (b"a", b"1"), (b"b", b"2"))
    entries = kv.scan(b"", b"\xff")

    # When
    put(kv, (b"a", b"changed"), (b"c", b"3"))
    delete(kv, b"b")

    # Then
    assert entries == [(b"a", b"1"), (b"b", b"2")]


# -- write batches ------------------------------------------------------------------------


@on_every_backend
def test_a_batch_applies_all_its_puts_and_deletes(kv: KeyValueStore) -> None:
    # Given
    put(kv, (b"keep", b"k"), (b"drop", b"d"))
    batch = WriteBatch()
    batch.put(b"new-1", b"1")
    batch.put(b"new-2", b"2")
    batch.delete(b"drop")

    # When
    kv.write(batch)

    # Then
    assert kv.scan(b"", b"\xff") == [(b"keep", b"k"), (b"new-1", b"1"), (b"new-2", b"2")]


@on_every_backend
def test_a_later_put_on_the_same_key_in_one_batch_wins(kv: KeyValueStore) -> None:
    # Given
    batch = WriteBatch()
    batch.put(b"key", b"first")
    batch.put(b"key", b"second")

    # When
    kv.write(batch)

    # Then
    assert kv.get(b"key") == b"second"


@on_every_backend
def test_a_delete_after_a_put_on_the_same_key_in_one_batch_wins(kv: KeyValueStore) -> None:
    # Given the key exists before the batch, and the batch rewrites then deletes it
    put(kv, (b"key", b"before"))
    batch = WriteBatch()
    batch.put(b"key", b"during")
    batch.delete(b"key")

    # When
    kv.write(batch)

    # Then
    assert kv.get(b"key") is None
    assert kv.scan(b"", b"\xff") == []


@on_every_backend
def test_a_put_after_a_delete_on_the_same_key_in_one_batch_wins(kv: KeyValueStore) -> None:
    # Given
    put(kv, (b"key", b"before"))
    batch = WriteBatch()
    batch.delete(b"key")
    batch.put(b"key", b"after")

    # When
    kv.write(batch)

    # Then
    assert kv.get(b"key") == b"after"
    assert kv.scan(b"", b"\xff") == [(b"key", b"after")]


@on_every_backend
def test_a_put_and_delete_of_a_new_key_in_one_batch_leaves_no_trace(kv: KeyValueStore) -> None:
    # Given
    batch = WriteBatch()
    batch.put(b"ghost", b"x")
    batch.delete(b"ghost")

    # When
    kv.write(batch)

    # Then
    assert kv.get(b"ghost") is None
    assert kv.scan(b"", b"\xff") == []


@on_every_backend
def test_an_empty_batch_changes_nothing(kv: KeyValueStore) -> None:
    # Given
    put(kv, (b"a", b"1"))

    # When
    kv.write(WriteBatch())
    kv.write(WriteBatch(), sync=True)

    # Then
    assert kv.scan(b"", b"\xff") == [(b"a", b"1")]


@on_every_backend
def test_a_batch_is_not_applied_before_it_is_written(kv: KeyValueStore) -> None:
    # Given
    batch = WriteBatch()
    batch.put(b"pending", b"x")

    # When nothing is written
    # Then
    assert kv.get(b"pending") is None


@on_every_backend
def test_a_synced_write_is_readable_like_any_other(kv: KeyValueStore) -> None:
    # Given
    batch = WriteBatch()
    batch.put(b"durable", b"yes")
    batch.put(b"other", b"too")

    # When
    kv.write(batch, sync=True)

    # Then
    assert kv.get(b"durable") == b"yes"
    assert keys_of(kv.scan(b"", b"\xff")) == [b"durable", b"other"]


@on_every_backend
def test_sync_makes_earlier_unsynced_writes_durable_and_keeps_them_readable(
    kv: KeyValueStore,
) -> None:
    # Given unsynced writes
    put(kv, (b"a", b"1"), (b"b", b"2"))
    delete(kv, b"a")

    # When
    kv.sync()

    # Then (durability itself is the backend's promise; here: nothing changes by it)
    assert kv.scan(b"", b"\xff") == [(b"b", b"2")]


# -- durability (RocksDB only) ------------------------------------------------------------


def test_unsynced_writes_synced_together_survive_a_reopen(tmp_path: Path) -> None:
    # Given unsynced writes made durable by one sync
    path = tmp_path / "kv"
    first = RocksKeyValueStore(path)
    put(first, (b"x", b"1"), (b"y", b"2"))
    first.sync()
    first.close()

    # When
    reopened = RocksKeyValueStore(path)
    try:
        entries = reopened.scan(b"", b"\xff")
    finally:
        reopened.close()

    # Then
    assert entries == [(b"x", b"1"), (b"y", b"2")]


def test_reopening_a_rocks_store_on_the_same_path_keeps_its_data(tmp_path: Path) -> None:
    # Given a store with plain and synced writes, one of them since deleted
    path = tmp_path / "kv"
    first = RocksKeyValueStore(path)
    put(first, (b"a", b"1"), (b"b", b"2"), (b"c", b"3"))
    delete(first, b"b")
    synced = WriteBatch()
    synced.put(b"d", b"4")
    first.write(synced, sync=True)
    first.close()

    # When
    reopened = RocksKeyValueStore(path)
    try:
        entries = reopened.scan(b"", b"\xff")
        a_value = reopened.get(b"a")
    finally:
        reopened.close()

    # Then
    assert entries == [(b"a", b"1"), (b"c", b"3"), (b"d", b"4")]
    assert a_value == b"1"


def test_stores_at_different_paths_are_independent(tmp_path: Path) -> None:
    # Given
    one, two = RocksKeyValueStore(tmp_path / "one"), RocksKeyValueStore(tmp_path / "two")
    try:
        # When
        put(one, (b"key", b"in one"))

        # Then
        assert two.get(b"key") is None
        assert one.get(b"key") == b"in one"
    finally:
        one.close()
        two.close()


@on_every_backend
def test_delete_range_removes_exactly_the_keys_from_start_to_before_end(kv: KeyValueStore) -> None:
    # Given
    put(kv, (b"a", b"1"), (b"b", b"2"), (b"b\x00", b"3"), (b"c", b"4"), (b"d", b"5"))

    # When
    kv.delete_range(b"b", b"d")

    # Then
    assert kv.scan(b"", b"\xff") == [(b"a", b"1"), (b"d", b"5")]
    assert kv.get(b"b") is None and kv.get(b"c") is None


@on_every_backend
def test_delete_range_of_an_empty_or_inverted_range_changes_nothing(kv: KeyValueStore) -> None:
    # Given
    put(kv, (b"a", b"1"), (b"b", b"2"))

    # When
    kv.delete_range(b"x", b"z")
    kv.delete_range(b"b", b"a")

    # Then
    assert kv.scan(b"", b"\xff") == [(b"a", b"1"), (b"b", b"2")]


@on_every_backend
def test_keys_written_after_a_delete_range_are_kept(kv: KeyValueStore) -> None:
    # Given
    put(kv, (b"k1", b"old"), (b"k2", b"old"))
    kv.delete_range(b"k", b"l")

    # When
    put(kv, (b"k1", b"new"))

    # Then
    assert kv.scan(b"k", b"l") == [(b"k1", b"new")]
