"""Which records of a source queue's log a replay covers, and how far back it may reach.

Pure functions over what the log reader found (log bounds, the time of each partition's
first record, the offsets a time maps to) and the clock, so the rules are tested without a
broker.

How far back: a replay reaches the messages the log still holds *and* the queue still
keeps. The topic keeps records `MessageRetentionPeriod` plus a margin
(`limits.RETENTION_MARGIN_MS`, so the log never drops a message before the lease store
expires it); a replay honours the queue's period, not the margin. Where the log start moved
past offset 0 (retention, or a purge's DeleteRecords), everything before the latest of the
partitions' first records is gone. The oldest time a replay can start from is the later of
the two, and a range starting before it is refused with that time in the message.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from gateway.common.errors import InvalidParameterValue

# Partition -> offset.
Offsets = dict[int, int]


@dataclass(frozen=True)
class LogView:
    """What the source's log holds now."""

    bounds: list[tuple[int, int]]  # (log start, end) per partition
    first_sent_ms: list[int | None]  # the time of each partition's first record (None: empty)


def oldest_available_ms(view: LogView, now_ms: int, retention_s: int) -> int:
    """The earliest send time a replay of this queue can start from."""
    floor = now_ms - 1000 * retention_s
    for (start, _), first in zip(view.bounds, view.first_sent_ms, strict=True):
        # Records before this partition's first are gone. (A partition emptied by
        # retention or a purge tells nothing of when: it is left out.)
        if start > 0 and first is not None:
            floor = max(floor, first)
    return floor


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def beyond_retention(oldest_ms: int) -> InvalidParameterValue:
    return InvalidParameterValue(
        "The replay range begins before the oldest message the queue's log holds; the "
        f"oldest available time is {iso(oldest_ms)} ({oldest_ms} ms since the epoch)."
    )


def check_since(since_ms: int, oldest_ms: int) -> None:
    if since_ms < oldest_ms:
        raise beyond_retention(oldest_ms)


def check_offsets(starts: Offsets, view: LogView, oldest_ms: int) -> None:
    """Given start offsets: each partition exists and its offset is still in the log."""
    for partition, offset in starts.items():
        if not 0 <= partition < len(view.bounds):
            raise InvalidParameterValue(
                f"The queue has no partition {partition}; it has {len(view.bounds)}."
            )
        if offset < view.bounds[partition][0]:
            raise beyond_retention(oldest_ms)


def ends_within(ends: Offsets, view: LogView) -> Offsets:
    """End offsets (exclusive) no further than the log's end now: a replay into its own
    queue never reads what it writes."""
    return {p: min(offset, view.bounds[p][1]) for p, offset in ends.items()}


def total(starts: Offsets, ends: Offsets) -> int:
    """How many records lie in the range (the log may have fewer: none removed is assumed)."""
    return sum(max(0, ends.get(p, 0) - offset) for p, offset in starts.items())
