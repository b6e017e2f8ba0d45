"""The messages ingested last, kept as objects for the receive that follows (`fresh.py`):
what a receive finds there is what the store's copy holds, and the bound holds."""

from __future__ import annotations

from lease_store.clock import ManualClock
from lease_store.fresh import FreshMessages
from lease_store.kv import KeyValueStore
from lease_store.records import AttributeValue, StoredMessage
from lease_store.store import LeaseStore
from tests.support.builders import DAY_MS, SECOND_MS, a_message, a_partition, on_every_backend

PK = a_partition()


def _receive_all(
    store: LeaseStore, clock: ManualClock, count: int
) -> list[tuple[int, StoredMessage]]:
    outcome = store.receive(
        PK, clock.now_ms(), max_messages=count, visibility_ms=30 * SECOND_MS, retention_ms=DAY_MS
    )
    return [(delivery.offset, delivery.message) for delivery in outcome.delivered]


def _messages(count: int, body_bytes: int = 100) -> list[tuple[int, StoredMessage]]:
    return [
        (
            offset,
            a_message(
                f"msg-{offset}",
                body=bytes([offset % 256]) * body_bytes,
                attributes={"n": AttributeValue("Number", string_value=str(offset))},
                message_group_id="g" if offset % 2 else None,
            ),
        )
        for offset in range(count)
    ]


@on_every_backend
def test_a_message_received_soon_after_its_ingest_is_what_the_store_holds(
    kv: KeyValueStore, clock: ManualClock
) -> None:
    # Given ten messages ingested by one store
    sent = _messages(10)
    store = LeaseStore(kv)
    store.ingest(PK, sent)

    # When they are received at once (kept since the ingest)
    received = _receive_all(store, clock, 10)

    # Then each is the message sent and the one a store reading its copies would give
    assert received == sent
    reader = LeaseStore(kv)  # nothing kept: it reads and decodes the stored copies
    stored = [(offset, reader.message(PK, offset)) for offset, _ in sent]
    assert received == stored
    assert [m.md5_of_body() for _, m in received] == [m.md5_of_body() for _, m in stored if m]


@on_every_backend
def test_messages_past_the_bound_are_received_from_the_stored_copies(
    kv: KeyValueStore, clock: ManualClock
) -> None:
    # Given a store that keeps room for about two of the twenty messages ingested
    sent = _messages(20, body_bytes=1000)
    store = LeaseStore(kv, fresh_bytes=3000)
    store.ingest(PK, sent)

    # When all are received
    received = _receive_all(store, clock, 10) + _receive_all(store, clock, 10)

    # Then every one arrives whole, oldest first
    assert received == sent


def test_the_bound_lets_the_oldest_go_first() -> None:
    fresh = FreshMessages(max_bytes=3 * (100 + 512))
    for offset, message in _messages(5):
        fresh.add(offset.to_bytes(8, "big"), message)

    kept = [offset for offset in range(5) if fresh.get(offset.to_bytes(8, "big")) is not None]

    assert kept == [2, 3, 4]


def test_a_discarded_message_frees_its_room() -> None:
    fresh = FreshMessages(max_bytes=2 * (100 + 512))
    messages = _messages(3)
    fresh.add(b"0", messages[0][1])
    fresh.add(b"1", messages[1][1])

    fresh.discard(b"0")
    fresh.add(b"2", messages[2][1])

    assert fresh.get(b"0") is None
    assert fresh.get(b"1") is messages[1][1]
    assert fresh.get(b"2") is messages[2][1]
    assert len(fresh) == 2
