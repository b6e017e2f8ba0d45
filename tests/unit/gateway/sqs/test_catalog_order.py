"""The registry follows the catalog in log order, without I/O: which record is current.

Every gateway applies the records of `__kqs_queues` it reads back (its own included) and the
ones it writes; `QueueRegistry.apply` decides by catalog offset. The two-gateway behaviour on
a real broker is in `test_e2e_catalog_live.py`.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from gateway.sqs.queues import QueueRegistry
from topology.catalog import QueueRecord

ACCOUNT = "000000000000"
FIRST = "ab" * 16
SECOND = "cd" * 16


class RecordingCatalog:
    """Takes the registry's catalog writes; each lands at the next offset given."""

    def __init__(self, next_offset: int = 100) -> None:
        self.written: list[QueueRecord] = []
        self.next_offset = next_offset

    async def put(self, record: QueueRecord) -> int:
        self.written.append(record)
        self.next_offset += 1
        return self.next_offset - 1


class Transitions:
    def __init__(self) -> None:
        self.created: list[str] = []
        self.deleted: list[str] = []


def a_registry() -> tuple[QueueRegistry, RecordingCatalog, Transitions]:
    catalog, seen = RecordingCatalog(), Transitions()
    registry = QueueRegistry(
        cast(Any, catalog),
        cast(Any, None),
        1,
        lambda record: seen.created.append(record.incarnation),
        lambda record: seen.deleted.append(record.incarnation),
    )
    return registry, catalog, seen


def a_record(incarnation: str = FIRST, **changes: Any) -> QueueRecord:
    return QueueRecord(ACCOUNT, "orders", incarnation, 1, **changes)


def test_a_queue_created_elsewhere_is_created_here() -> None:
    # Given
    registry, _, seen = a_registry()
    # When
    applied = registry.apply(a_record(), 5)
    # Then
    assert applied
    assert registry.active("us-east-1", ACCOUNT, "orders") == a_record()
    assert seen.created == [FIRST]


def test_a_record_coming_back_from_the_log_changes_nothing() -> None:
    # Given: this gateway wrote the change and applied it when the write was acknowledged
    registry, _, seen = a_registry()
    registry.apply(a_record(), 5)
    changed = a_record(tags={"team": "a"})
    registry.apply(changed, 6)
    # When: both records are read back by the follower
    again = [registry.apply(a_record(), 5), registry.apply(changed, 6)]
    # Then
    assert again == [False, False]
    assert registry.active("us-east-1", ACCOUNT, "orders") == changed
    assert seen.created == [FIRST]


def test_a_change_elsewhere_replaces_attributes_without_recreating() -> None:
    # Given
    registry, _, seen = a_registry()
    registry.apply(a_record(), 5)
    # When
    registry.apply(a_record(attributes={"VisibilityTimeout": "7"}), 9)
    # Then
    current = registry.active("us-east-1", ACCOUNT, "orders")
    assert current is not None and current.attributes == {"VisibilityTimeout": "7"}
    assert seen.created == [FIRST] and seen.deleted == []


def test_a_deletion_elsewhere_ends_the_queue_here() -> None:
    # Given
    registry, _, seen = a_registry()
    registry.apply(a_record(), 5)
    # When
    registry.apply(a_record(deleted_ms=1_000), 6)
    # Then
    assert registry.active("us-east-1", ACCOUNT, "orders") is None
    assert seen.deleted == [FIRST]


def test_a_new_incarnation_ends_the_old_one_and_starts_its_own() -> None:
    # Given: the deletion in between was compacted away, or not read yet
    registry, _, seen = a_registry()
    registry.apply(a_record(FIRST), 5)
    # When
    registry.apply(a_record(SECOND), 8)
    # Then
    assert seen.deleted == [FIRST]
    assert seen.created == [FIRST, SECOND]


def test_a_change_written_without_seeing_the_deletion_does_not_revive_the_queue() -> None:
    async def scenario() -> None:
        # Given: deleted here, then another gateway's change of the same incarnation follows
        registry, catalog, seen = a_registry()
        registry.apply(a_record(), 5)
        registry.apply(a_record(deleted_ms=1_000), 6)
        # When
        applied = registry.apply(a_record(tags={"late": "yes"}), 7)
        await asyncio.sleep(0)  # the deletion is written again in the background
        # Then
        assert not applied
        assert registry.active("us-east-1", ACCOUNT, "orders") is None
        assert seen.created == [FIRST] and seen.deleted == [FIRST]
        assert [r.deleted_ms for r in catalog.written] == [1_000]

    asyncio.run(scenario())


def test_a_deletion_read_after_this_gateways_own_later_change_still_deletes() -> None:
    async def scenario() -> None:
        # Given: this gateway's change landed at 7, after another gateway's deletion at 6
        registry, catalog, seen = a_registry()
        registry.apply(a_record(), 5)
        registry.apply(a_record(tags={"late": "yes"}), 7)
        # When: the deletion is read back
        applied = registry.apply(a_record(deleted_ms=1_000), 6)
        await asyncio.sleep(0)
        # Then: deleted, and the deletion written again so that it is the log's last word
        assert applied
        assert registry.active("us-east-1", ACCOUNT, "orders") is None
        assert seen.deleted == [FIRST]
        assert [r.deleted_ms for r in catalog.written] == [1_000]

    asyncio.run(scenario())
