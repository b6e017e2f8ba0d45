"""Builders for lease-store test data, so each test states only what matters to it."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest

from lease_store.handles import ReceiptHandle
from lease_store.keys import PartitionKey
from lease_store.kv import KeyValueStore
from lease_store.memory import MemoryKeyValueStore
from lease_store.records import AttributeValue, LeaseFact, StoredMessage
from lease_store.rocks import RocksKeyValueStore

T0 = 1_700_000_000_000
"""The start time of every test's ManualClock, in ms since the epoch."""

SECOND_MS = 1_000
MINUTE_MS = 60 * SECOND_MS
HOUR_MS = 60 * MINUTE_MS
DAY_MS = 24 * HOUR_MS

SECRET = b"test-secret-0123456789abcdef"
OTHER_SECRET = b"another-secret-0123456789abcd"

BACKENDS = ("memory", "rocks")

on_every_backend = pytest.mark.parametrize("kv", BACKENDS, indirect=True)
"""Run a test once per `KeyValueStore` implementation, through the module's `kv` fixture."""


def open_kv(backend: str, path: Path) -> KeyValueStore:
    """A fresh store of the named backend; a Rocks store lives under `path`."""
    if backend == "memory":
        return MemoryKeyValueStore()
    if backend == "rocks":
        return RocksKeyValueStore(path)
    raise ValueError(f"unknown backend {backend!r}")


def an_incarnation(n: int = 1) -> bytes:
    """A 16-byte queue incarnation id, distinct for each `n`."""
    return n.to_bytes(16, "big")


def a_partition(queue: int = 1, partition: int = 0) -> PartitionKey:
    return PartitionKey(incarnation=an_incarnation(queue), partition=partition)


def a_message(
    message_id: str = "msg-1",
    *,
    body: bytes = b"hello",
    sent_ms: int = T0,
    delay_s: int = 0,
    attributes: dict[str, AttributeValue] | None = None,
    sender_id: str = "AIDATESTSENDER",
    message_group_id: str | None = None,
) -> StoredMessage:
    return StoredMessage(
        message_id=message_id,
        body=body,
        sent_ms=sent_ms,
        delay_s=delay_s,
        attributes=dict(attributes or {}),
        sender_id=sender_id,
        message_group_id=message_group_id,
    )


def records(
    offsets: Iterable[int], *, sent_ms: int = T0, delay_s: int = 0
) -> list[tuple[int, StoredMessage]]:
    """Queue-topic records at `offsets`, each message named after its offset."""
    return [
        (
            offset,
            a_message(
                f"msg-{offset}", body=f"body {offset}".encode(), sent_ms=sent_ms, delay_s=delay_s
            ),
        )
        for offset in offsets
    ]


def a_fact(
    *,
    sent_ms: int = T0,
    visible_at_ms: int | None = None,
    receive_count: int = 0,
    first_receive_ms: int = 0,
    last_receive_ms: int = 0,
) -> LeaseFact:
    """A lease fact; by default a message sent at T0 and visible from then on."""
    return LeaseFact(
        sent_ms=sent_ms,
        visible_at_ms=sent_ms if visible_at_ms is None else visible_at_ms,
        receive_count=receive_count,
        first_receive_ms=first_receive_ms,
        last_receive_ms=last_receive_ms,
    )


def an_in_flight_fact(
    *, received_ms: int = T0, visibility_ms: int = 30 * SECOND_MS, receive_count: int = 1
) -> LeaseFact:
    """A message received (last) at `received_ms`, leased for `visibility_ms`."""
    return a_fact(
        sent_ms=received_ms - MINUTE_MS,
        visible_at_ms=received_ms + visibility_ms,
        receive_count=receive_count,
        first_receive_ms=received_ms,
        last_receive_ms=received_ms,
    )


def a_receipt_handle(
    *, queue: int = 1, partition: int = 3, offset: int = 42, epoch: int = 1
) -> ReceiptHandle:
    return ReceiptHandle(
        incarnation=an_incarnation(queue), partition=partition, offset=offset, epoch=epoch
    )
