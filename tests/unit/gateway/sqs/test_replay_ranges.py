"""How far back a replay may reach (gateway/sqs/replay/ranges.py), and the replay origin a
replayed record carries (topology/record_format.py)."""

from __future__ import annotations

import pytest

from gateway.common.errors import InvalidParameterValue
from gateway.sqs.replay import ranges
from lease_store.records import StoredMessage
from topology.record_format import HEADER_REPLAY_OF, ReplayOrigin, from_record, to_headers

NOW_MS = 1_800_000_000_000
DAY_S = 86_400


def test_a_log_never_trimmed_reaches_back_to_the_retention_period() -> None:
    view = ranges.LogView([(0, 10), (0, 0)], [NOW_MS - 5_000_000, None])
    assert ranges.oldest_available_ms(view, NOW_MS, 4 * DAY_S) == NOW_MS - 4 * DAY_S * 1000


def test_a_trimmed_partition_bounds_the_reach_at_its_first_record() -> None:
    # Partition 1's log start moved (retention or a purge): before its first record, its
    # records are gone; an emptied partition tells nothing and is left out
    view = ranges.LogView([(0, 10), (7, 12), (3, 3)], [NOW_MS - 9_000, NOW_MS - 2_000, None])
    assert ranges.oldest_available_ms(view, NOW_MS, DAY_S) == NOW_MS - 2_000


def test_a_range_before_the_oldest_available_time_is_refused_naming_it() -> None:
    ranges.check_since(NOW_MS - 1_000, NOW_MS - 1_000)
    with pytest.raises(InvalidParameterValue) as refused:
        ranges.check_since(NOW_MS - 1_001, NOW_MS - 1_000)
    assert "oldest available time is 2027-01-15T07:59:59.000Z" in refused.value.message
    assert f"({NOW_MS - 1_000} ms since the epoch)" in refused.value.message


def test_start_offsets_must_name_partitions_and_offsets_the_log_holds() -> None:
    view = ranges.LogView([(5, 10), (0, 3)], [NOW_MS, NOW_MS])
    ranges.check_offsets({0: 5, 1: 0}, view, NOW_MS)
    with pytest.raises(InvalidParameterValue, match="oldest available time"):
        ranges.check_offsets({0: 4}, view, NOW_MS)
    with pytest.raises(InvalidParameterValue, match="no partition 2"):
        ranges.check_offsets({2: 0}, view, NOW_MS)


def test_a_range_ends_at_the_log_end_it_found_and_counts_its_records() -> None:
    view = ranges.LogView([(0, 10), (0, 3)], [NOW_MS, NOW_MS])
    ends = ranges.ends_within({0: 50, 1: 2}, view)
    assert ends == {0: 10, 1: 2}
    assert ranges.total({0: 4, 1: 0}, ends) == 8


def test_a_replay_origin_travels_as_a_header_and_comes_back() -> None:
    origin = ReplayOrigin("task-1", 2, 41, "original-id", NOW_MS)
    message = StoredMessage("new-id", b"body", NOW_MS + 5, replay_of=origin.encode())
    headers = to_headers(message)
    assert (HEADER_REPLAY_OF, origin.encode().encode()) in headers
    read = from_record("topic", 0, 7, b"new-id", b"body", NOW_MS + 5, headers)
    assert ReplayOrigin.decode(read.replay_of) == origin
    assert ReplayOrigin.decode(None) is None
    assert ReplayOrigin.decode("not json") is None
