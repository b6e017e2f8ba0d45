"""The dashboard model: folding analytics records in, and the summary the page draws."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dashboard.model import MAX_GAUGES, MAX_WINDOWS, DashboardModel, rate_per_s
from dashboard.records import decode_dlq, decode_gauges, decode_metric
from tests.support.dashboard_builders import MINUTE_MS, dlq_window, gauges, metric

T0 = 1_760_000_040_000  # a minute boundary


def fold_metric(model: DashboardModel, **kwargs: Any) -> None:
    record = decode_metric(json.dumps(metric(**kwargs)))
    assert record is not None
    model.apply_metric(record)


def fold_gauges(model: DashboardModel, *args: Any) -> None:
    record = decode_gauges(json.dumps(gauges(*args)))
    assert record is not None
    model.apply_gauges(record)


def only_queue(summary: dict[str, Any]) -> dict[str, Any]:
    (queue,) = summary["queues"]
    assert isinstance(queue, dict)
    return queue


def test_a_complete_window_rate_is_its_sum_over_sixty_seconds() -> None:
    # Given a minute that ended
    model = DashboardModel()
    fold_metric(model, queue="orders", name="NumberOfMessagesSent", window_start_ms=T0, total=120)
    # When it is summarised later
    series = only_queue(model.summary(T0 + 5 * MINUTE_MS))["series"]
    # Then its rate is 120 / 60 s
    assert isinstance(series, list)
    assert series[0]["sent"] == 120
    assert series[0]["sent_per_s"] == pytest.approx(2.0)
    assert series[0]["complete"] is True


def test_the_current_window_rate_is_its_sum_over_the_time_elapsed() -> None:
    # Given a window 15 s into its minute with 30 messages sent
    model = DashboardModel()
    fold_metric(model, queue="orders", name="NumberOfMessagesSent", window_start_ms=T0, total=30)
    # When summarised now
    queue = only_queue(model.summary(T0 + 15_000))
    # Then the rate is 30 / 15 s, not 30 / 60 s
    assert queue["series"][0]["sent_per_s"] == pytest.approx(2.0)
    assert queue["series"][0]["complete"] is False
    assert queue["rates"]["sent_per_s"] == pytest.approx(2.0)


def test_rate_of_a_window_just_started_counts_at_least_one_second() -> None:
    assert rate_per_s(5, T0, T0 + MINUTE_MS, T0 + 10) == pytest.approx(5.0)


def test_a_re_emitted_window_replaces_the_earlier_one() -> None:
    # Given Spark's update mode emitting the same window twice as it fills
    model = DashboardModel()
    fold_metric(model, queue="q", name="NumberOfMessagesDeleted", window_start_ms=T0, total=10)
    fold_metric(model, queue="q", name="NumberOfMessagesDeleted", window_start_ms=T0, total=25)
    # Then the latest wins and the window is counted once
    queue = only_queue(model.summary(T0 + 2 * MINUTE_MS))
    assert [p["deleted"] for p in queue["series"]] == [25]
    assert queue["totals"]["deleted"] == 25


def test_only_the_latest_sixty_windows_are_kept() -> None:
    # Given 70 minutes of windows, folded newest first
    model = DashboardModel()
    for minute in reversed(range(70)):
        start = T0 + minute * MINUTE_MS
        fold_metric(model, queue="q", name="NumberOfMessagesSent", window_start_ms=start, total=1)
    # Then the 60 newest remain, in time order
    series = only_queue(model.summary(T0 + 70 * MINUTE_MS))["series"]
    assert isinstance(series, list)
    assert len(series) == MAX_WINDOWS
    assert series[0]["t"] == T0 + 10 * MINUTE_MS
    assert series[-1]["t"] == T0 + 69 * MINUTE_MS


def test_a_window_older_than_every_kept_one_is_dropped_once_full() -> None:
    model = DashboardModel()
    for minute in range(1, MAX_WINDOWS + 1):
        start = T0 + minute * MINUTE_MS
        fold_metric(model, queue="q", name="NumberOfMessagesSent", window_start_ms=start, total=1)
    # When a late record for an older minute arrives
    fold_metric(model, queue="q", name="NumberOfMessagesSent", window_start_ms=T0, total=99)
    # Then it does not push out a newer one
    series = only_queue(model.summary(T0 + 90 * MINUTE_MS))["series"]
    assert isinstance(series, list)
    assert series[0]["t"] == T0 + MINUTE_MS
    assert all(p["sent"] == 1 for p in series)


def test_a_count_spark_did_not_emit_for_a_window_is_zero() -> None:
    # Given a minute with depth samples but no receive at all
    model = DashboardModel()
    fold_metric(model, queue="q", name="NumberOfMessagesSent", window_start_ms=T0, total=6)
    # Then its empty receives are 0 (drawn), not unknown
    point = only_queue(model.summary(T0 + 2 * MINUTE_MS))["series"][0]
    assert (point["empty_receives"], point["received_per_s"]) == (0.0, 0.0)


def test_depth_is_the_window_average_and_age_the_window_maximum() -> None:
    model = DashboardModel()
    fold_metric(
        model,
        queue="q",
        name="ApproximateNumberOfMessagesVisible",
        window_start_ms=T0,
        total=60,
        count=6,
        maximum=30,
    )
    fold_metric(
        model,
        queue="q",
        name="ApproximateAgeOfOldestMessage",
        window_start_ms=T0,
        total=60,
        count=6,
        maximum=42,
    )
    point = only_queue(model.summary(T0 + 2 * MINUTE_MS))["series"][0]
    assert point["visible"] == 10
    assert point["oldest_age_s"] == 42
    assert point["not_visible"] is None  # no record: nothing drawn, not zero


def test_current_depth_comes_from_gauges_newer_than_the_last_window() -> None:
    # Given a window, then gauge samples taken during and after it
    model = DashboardModel()
    for name, total in (
        ("ApproximateNumberOfMessagesVisible", 5),
        ("ApproximateNumberOfMessagesNotVisible", 1),
        ("ApproximateNumberOfMessagesDelayed", 0),
        ("ApproximateAgeOfOldestMessage", 3),
    ):
        fold_metric(model, queue="q", name=name, window_start_ms=T0, total=total)
    fold_gauges(model, "q", T0 - 10_000, 1, 1, 1, 1.0)
    fold_gauges(model, "q", T0 + 70_000, 7, 2, 3, 9.5)
    # When summarised
    queue = only_queue(model.summary(T0 + 75_000))
    # Then the current depth is the newest sample, and the depth series is the window followed
    # by the samples after its start (the one before it is not drawn)
    assert queue["current"] == {
        "as_of_ms": T0 + 70_000,
        "source": "gauges",
        "visible": 7,
        "not_visible": 2,
        "delayed": 3,
        "oldest_age_s": 9.5,
    }
    depth = queue["depth"]
    assert isinstance(depth, list)
    assert [(p["t"], p["source"], p["visible"]) for p in depth] == [
        (T0, "window", 5),
        (T0 + 70_000, "gauge", 7),
    ]


def test_depth_before_any_spark_window_is_the_gauge_samples() -> None:
    model = DashboardModel()
    for k in range(MAX_GAUGES + 5):
        fold_gauges(model, "q", T0 + k * 10_000, k, 0, 0, 0.0)
    queue = only_queue(model.summary(T0 + MAX_GAUGES * 10_000))
    depth = queue["depth"]
    assert isinstance(depth, list)
    assert len(depth) == MAX_GAUGES
    assert depth[-1]["visible"] == MAX_GAUGES + 4
    assert queue["series"] == []
    assert queue["current"]["source"] == "gauges"
    assert set(queue["rates"].values()) == {None}  # unknown until a Spark job runs, not 0


def test_rates_now_are_zero_when_the_latest_window_is_long_past() -> None:
    # Spark emits no window for a minute without events
    model = DashboardModel()
    fold_metric(model, queue="q", name="NumberOfMessagesSent", window_start_ms=T0, total=600)
    queue = only_queue(model.summary(T0 + 10 * MINUTE_MS))
    assert queue["rates"]["sent_per_s"] == 0.0
    assert queue["totals"]["sent"] == 600


def test_queues_are_kept_apart_by_account_and_name() -> None:
    model = DashboardModel()
    fold_metric(model, queue="a", name="NumberOfMessagesSent", window_start_ms=T0, total=1)
    fold_metric(
        model,
        queue="a",
        name="NumberOfMessagesSent",
        window_start_ms=T0,
        total=2,
        account="111111111111",
    )
    fold_metric(model, queue="b", name="NumberOfMessagesSent", window_start_ms=T0, total=3)
    summary = model.summary(T0 + 2 * MINUTE_MS)
    assert [(q["account"], q["queue"], q["totals"]["sent"]) for q in summary["queues"]] == [
        ("000000000000", "a", 1),
        ("000000000000", "b", 3),
        ("111111111111", "a", 2),
    ]


def test_dlq_summary_merges_windows_and_top_attribute_values() -> None:
    # Given two minutes of moves from one source queue into its DLQ
    model = DashboardModel()
    for window in (
        dlq_window("q-dlq", "q", T0, 2, [5, 5], [10.0, 30.0], [("error", "Timeout", 2)]),
        dlq_window(
            "q-dlq",
            "q",
            T0 + MINUTE_MS,
            3,
            [3, 5, 7],
            [60.0, 90.0, 120.0],
            [("error", "Timeout", 1), ("tenant", "acme", 3)],
        ),
    ):
        record = decode_dlq(json.dumps(window))
        assert record is not None
        model.apply_dlq(record)
    # When summarised
    (dlq,) = model.summary(T0 + 3 * MINUTE_MS)["dlqs"]
    # Then arrivals, receive counts and ages per window, and the attribute values over both
    assert (dlq["dlq"], dlq["source_queue"], dlq["total_arrivals"]) == ("q-dlq", "q", 5)
    assert dlq["receive_count_avg"] == pytest.approx(5.0)
    assert dlq["receive_count_max"] == 7
    assert dlq["age_at_move_max_s"] == 120
    assert [(p["arrivals"], p["age_at_move_avg_s"]) for p in dlq["series"]] == [
        (2, 20.0),
        (3, 90.0),
    ]
    assert dlq["series"][0]["arrivals_per_s"] == pytest.approx(2 / 60)
    assert dlq["top_attributes"] == [
        {"name": "error", "value": "Timeout", "count": 3},
        {"name": "tenant", "value": "acme", "count": 3},
    ]
    # ... from the windows' top lists only (records without every value's count): approximate
    assert dlq["top_attributes_exact"] is False


def test_top_attribute_values_are_exact_over_windows_with_more_values_than_shown() -> None:
    # Given three minutes of moves with 16 distinct values in all, each minute's top 5 list
    # leaving some out: region=us twice a minute (in no minute's top 5, yet the largest
    # total), and customers c0..c14, five a minute, each 3 or 4 times in one minute only
    model = DashboardModel()
    expected: dict[tuple[str, str], int] = {("region", "us"): 6}
    for minute in range(3):
        customers = {f"c{k}": 3 + k % 2 for k in range(minute * 5, minute * 5 + 5)}
        expected.update({("customer", c): n for c, n in customers.items()})
        counts = sorted(
            [("customer", c, n) for c, n in customers.items()] + [("region", "us", 2)],
            key=lambda item: (-item[2], item[0], item[1]),
        )
        assert ("region", "us", 2) not in counts[:5]
        record = decode_dlq(
            json.dumps(
                dlq_window("q-dlq", "q", T0 + minute * MINUTE_MS, 5, [2], [1.0], counts[:5],
                           attribute_counts=counts)
            )
        )  # fmt: skip
        assert record is not None
        model.apply_dlq(record)
    # When summarised
    (dlq,) = model.summary(T0 + 4 * MINUTE_MS)["dlqs"]
    # Then the list holds the 10 largest exact totals (ties by name, then value), and says so
    ranked = sorted(expected.items(), key=lambda item: (-item[1], item[0]))[:10]
    assert dlq["top_attributes"] == [
        {"name": name, "value": value, "count": count} for (name, value), count in ranked
    ]
    assert dlq["top_attributes"][0] == {"name": "region", "value": "us", "count": 6}
    assert dlq["top_attributes_exact"] is True
    assert dlq["distinct_attribute_values"] == len(expected) == 16


def test_a_queue_card_totals_the_counts_and_a_dlq_its_arrivals() -> None:
    # Given two minutes of a source queue and one of its DLQ's arrivals
    model = DashboardModel()
    for minute, (sent, moved) in enumerate([(40, 2), (25, 3)]):
        start = T0 + minute * MINUTE_MS
        fold_metric(model, queue="q", name="NumberOfMessagesSent", window_start_ms=start,
                    total=sent)  # fmt: skip
        fold_metric(model, queue="q", name="NumberOfMessagesMovedToDLQ", window_start_ms=start,
                    total=moved)  # fmt: skip
        fold_metric(model, queue="q-dlq", name="ApproximateNumberOfMessagesVisible",
                    window_start_ms=start, total=moved)  # fmt: skip
        record = decode_dlq(json.dumps(dlq_window("q-dlq", "q", start, moved, [3], [1.0])))
        assert record is not None
        model.apply_dlq(record)
    # When summarised
    queues = {q["queue"]: q for q in model.summary(T0 + 3 * MINUTE_MS)["queues"]}
    # Then the source's totals count what it sent and moved, the DLQ's what arrived
    assert queues["q"]["totals"]["sent"] == 65
    assert queues["q"]["totals"]["moved_to_dlq"] == 5
    assert (queues["q"]["is_dlq"], queues["q"]["totals"]["dlq_arrivals"]) == (False, 0)
    assert (queues["q-dlq"]["is_dlq"], queues["q-dlq"]["totals"]["dlq_arrivals"]) == (True, 5)
    assert queues["q"]["totals_since_ms"] == T0


@pytest.mark.parametrize(
    "value",
    [
        None,
        b"not json",
        b"[1, 2]",
        json.dumps({**metric("q", "NumberOfMessagesSent", T0, 1), "v": 2}).encode(),
        json.dumps({"v": 1, "queue": "q"}).encode(),
    ],
)
def test_a_metric_record_not_understood_is_skipped(value: bytes | None) -> None:
    assert decode_metric(value) is None


def test_events_other_than_gauges_are_skipped() -> None:
    sent = {"v": 1, "type": "sent", "ts": T0, "account": "a", "queue": "q", "count": 1}
    assert decode_gauges(json.dumps(sent).encode()) is None
    assert decode_gauges(json.dumps(gauges("q", T0, 1, 2, 3, 4.0)).encode()) is not None


def test_statistics_spark_left_out_as_null_default_from_the_sum() -> None:
    # Spark's to_json drops null fields, e.g. the statistics of a DLQ window without ages
    window = dlq_window("q-dlq", "q", T0, 2, [4, 6], [1.0])
    del window["age_at_move_s"]
    del window["receive_count"]["average"]
    del window["receive_count"]["maximum"]
    record = decode_dlq(json.dumps(window))
    assert record is not None
    assert (record.receive_count.average, record.receive_count.maximum) == (5.0, 5.0)
    assert record.receive_count.minimum == 4
    assert record.age_at_move_s.sample_count == 0


def test_pruning_forgets_old_windows_and_queues_left_empty() -> None:
    # Given a queue deleted long ago, and one with an old and a recent window
    model = DashboardModel()
    fold_metric(model, queue="gone", name="NumberOfMessagesSent", window_start_ms=T0, total=1)
    fold_gauges(model, "gone", T0, 1, 0, 0, 1.0)
    fold_metric(model, queue="live", name="NumberOfMessagesSent", window_start_ms=T0, total=1)
    later = T0 + 90 * MINUTE_MS
    fold_metric(model, queue="live", name="NumberOfMessagesSent", window_start_ms=later, total=2)
    for window in (
        dlq_window("gone-dlq", "gone", T0, 1, [3], [5.0]),
        dlq_window("live-dlq", "live", later, 1, [3], [5.0]),
    ):
        record = decode_dlq(json.dumps(window))
        assert record is not None
        model.apply_dlq(record)
    # When pruned to the last hour
    model.prune(later - 60 * MINUTE_MS)
    # Then only the recent window, its queue and its DLQ source remain
    summary = model.summary(later + MINUTE_MS)
    assert [(q["queue"], [p["sent"] for p in q["series"]]) for q in summary["queues"]] == [
        ("live", [2])
    ]
    assert [d["dlq"] for d in summary["dlqs"]] == ["live-dlq"]


def test_with_a_limit_the_busiest_queues_of_the_last_minutes_come_first_and_search_filters() -> (
    None
):
    # Given 300 queues: q-0000 to q-0299, each with as many messages sent now as its number,
    # and one queue busy an hour ago only
    model = DashboardModel()
    now = T0 + 60 * MINUTE_MS + 30_000
    latest = now - now % MINUTE_MS
    for i in range(300):
        fold_metric(
            model, queue=f"q-{i:04d}", name="NumberOfMessagesSent", window_start_ms=latest, total=i
        )
    fold_metric(model, queue="old", name="NumberOfMessagesSent", window_start_ms=T0, total=10**6)
    # When the 5 busiest are asked for, then those matching "-001"
    busiest = model.summary(now, limit=5)
    found = model.summary(now, limit=5, search="-001")
    # Then they are the 5 with the most sent in the last minutes, busiest first, of 301
    assert [q["queue"] for q in busiest["queues"]] == [
        f"q-{i:04d}" for i in (299, 298, 297, 296, 295)
    ]
    assert busiest["queue_count"] == 301
    # And a search keeps the queues whose names contain the text, busiest first
    assert [q["queue"] for q in found["queues"]] == [f"q-{i:04d}" for i in range(19, 14, -1)]
    # And without a limit every queue is there, by name
    assert [q["queue"] for q in model.summary(now)["queues"]][:2] == ["old", "q-0000"]
