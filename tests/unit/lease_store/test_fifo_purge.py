"""PurgeQueue clears a FIFO partition's deduplication window (`FifoOperations.forget_deduplication`),
on every backend."""

from __future__ import annotations

from dataclasses import replace

from lease_store import fifo
from lease_store.records import StoredMessage
from lease_store.store import LeaseStore
from tests.support.builders import MINUTE_MS, T0, a_message, a_partition, on_every_backend

PK = a_partition()


def sent(offset: int, dedup: str) -> tuple[int, StoredMessage]:
    message = a_message(f"m{offset}", sent_ms=T0 + offset, message_group_id="g")
    return offset, replace(message, deduplication_id=dedup, deduplication_scope=fifo.SCOPE_QUEUE)


@on_every_backend
def test_a_purge_forgets_the_window_entries_of_the_purged_messages_only(
    store: LeaseStore,
) -> None:
    # Given ids a and b sent before the purge point, c after it
    store.ingest(PK, [sent(0, "a"), sent(1, "b"), sent(2, "c")])
    # When the partition is purged below offset 2 and its window cleared
    store.purge(PK, 2, T0 + 10)
    assert store.forget_deduplication(PK, 2) == 2
    # Then a and b are forgotten, c is still remembered
    now_ms = T0 + MINUTE_MS
    assert store.deduplication_entry(PK, b"a", now_ms) is None
    assert store.deduplication_entry(PK, b"b", now_ms) is None
    assert store.deduplication_entry(PK, b"c", now_ms) == fifo.DedupEntry(T0 + 2, 2, "m2")
    # and a send of a after the purge is ingested as a new message
    assert store.ingest(PK, [sent(3, "a")]) == 1
    # and the window's time index holds no entry of the forgotten ones (pruning finds 2)
    assert store.prune_deduplication(PK, T0 + 10 * MINUTE_MS) == 2
