"""The rule that fails a whole SendMessageBatch to a FIFO queue (`gateway/sqs/fifo.py`)."""

from __future__ import annotations

import pytest

from gateway.common.errors import InvalidParameterValue
from gateway.sqs.fifo import check_fifo_batch
from topology.catalog import QueueRecord

FIFO = QueueRecord("000000000000", "orders.fifo", "ab" * 16, 1, {"FifoQueue": "true"})
CONTENT_BASED = FIFO.changed(attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"})
NO_DEDUPLICATION_ID = (
    "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId "
    "provided explicitly"
)
NO_GROUP = "The request must contain the parameter MessageGroupId."


def test_entries_with_group_and_deduplication_id_pass() -> None:
    check_fifo_batch(FIFO, [("g", "d1"), ("g", "d2")])


def test_content_based_deduplication_needs_no_deduplication_id() -> None:
    check_fifo_batch(CONTENT_BASED, [("g", None)])


@pytest.mark.parametrize(
    ("record", "entries", "message"),
    [
        (FIFO, [("g", "d1"), ("g", None)], NO_DEDUPLICATION_ID),
        (FIFO, [("g", "d1"), (None, "d2")], NO_GROUP),
        (CONTENT_BASED, [(None, None)], NO_GROUP),
        # entry by entry, the deduplication id before the group
        (FIFO, [(None, None), ("g", None)], NO_DEDUPLICATION_ID),
        (FIFO, [(None, "d1"), ("g", None)], NO_GROUP),
    ],
)
def test_one_entry_without_what_the_queue_needs_fails_the_batch(
    record: QueueRecord, entries: list[tuple[str | None, str | None]], message: str
) -> None:
    with pytest.raises(InvalidParameterValue) as excinfo:
        check_fifo_batch(record, entries)
    assert str(excinfo.value) == message
