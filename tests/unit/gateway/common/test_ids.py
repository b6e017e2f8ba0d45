"""Request and message ids (`gateway.common.ids.new_uuid`): random UUIDs of version 4."""

from __future__ import annotations

import uuid

from gateway.common.ids import new_uuid


def test_ids_are_distinct_version_4_uuids_in_their_canonical_text() -> None:
    ids = [new_uuid() for _ in range(20_000)]
    assert len(set(ids)) == len(ids)
    for text in ids:
        parsed = uuid.UUID(text)
        assert (parsed.version, parsed.variant, str(parsed)) == (4, uuid.RFC_4122, text)
