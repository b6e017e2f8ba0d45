"""The analytics transforms on static DataFrames: each Spark step as a pure function.

The events are JSON records in the fixed `__kqs_events` format (topology/event_format.py
builds the same shapes); times are minutes after 2026-01-01 so windows are easy to read.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.testing import assertDataFrameEqual

from spark_streaming import transforms

T0 = datetime(2026, 1, 1, tzinfo=UTC)
T0_MS = int(T0.timestamp() * 1000)
ACCOUNT = "000000000000"


def at(minute: int, second: int = 0) -> int:
    """Epoch ms of T0 + minute:second."""
    return T0_MS + (minute * 60 + second) * 1000


def window(minute: int) -> tuple[datetime, datetime]:
    """The 1-minute window starting T0 + minute, as Spark returns it (UTC, naive)."""
    start = (T0 + timedelta(minutes=minute)).replace(tzinfo=None)
    return start, start + timedelta(minutes=1)


def event(kind: str, ts: int, queue: str = "orders", **fields: Any) -> dict[str, Any]:
    return {"v": 1, "type": kind, "ts": ts, "account": ACCOUNT, "queue": queue, "count": 1} | fields


def kafka_rows(spark: SparkSession, *events: dict[str, Any] | str) -> DataFrame:
    """What Spark's Kafka source yields for these `__kqs_events` values (key, value bytes)."""
    values = [e if isinstance(e, str) else json.dumps(e) for e in events]
    return spark.createDataFrame(
        [(b"k", value.encode()) for value in values], "key binary, value binary"
    )


def test_parsing_keeps_version_1_events_typed_and_drops_other_versions_and_garbage(
    spark: SparkSession,
) -> None:
    # Given a sent event, a gauges event, a future-version event and a record that is no JSON
    raw = kafka_rows(
        spark,
        event("sent", at(0, 5), message_id="m1", size=42, extra_field="ignored"),
        event("gauges", at(0, 9), visible=3, not_visible=1, delayed=0, oldest_age_s=7),
        {**event("sent", at(0, 6)), "v": 2},
        "not json",
    )
    # When parsed
    parsed = transforms.parse_events(raw).select(
        "type", "queue", "count", "size", "visible", "event_time"
    )
    # Then the version-1 events remain, with an event time from `ts`
    assertDataFrameEqual(
        parsed,
        [
            Row(
                type="sent", queue="orders", count=1, size=42, visible=None,
                event_time=window(0)[0] + timedelta(seconds=5),
            ),
            Row(
                type="gauges", queue="orders", count=1, size=None, visible=3,
                event_time=window(0)[0] + timedelta(seconds=9),
            ),
        ],
    )  # fmt: skip


def test_count_metrics_have_cloudwatch_statistics_per_queue_and_minute(
    spark: SparkSession,
) -> None:
    # Given sends (one of a batch of 3 messages), receives, deletes and empty receives in two
    # minutes, on two queues
    raw = kafka_rows(
        spark,
        event("sent", at(0, 1), message_id="a", size=10),
        event("sent", at(0, 2), message_ids=["b1", "b2", "b3"], sizes=[30, 4, 6], count=3),
        event("sent", at(1, 0), message_id="c", size=20),
        event("sent", at(0, 3), queue="billing", message_id="d", size=5),
        event("received", at(0, 4), message_id="a", receive_count=1),
        event("deleted", at(0, 5), message_id="a"),
        event("empty_receive", at(0, 6)),
        event("empty_receive", at(0, 7)),
        event("expired", at(0, 8), message_id="b"),
        event("purged", at(0, 9), count=4),
    )
    # When aggregated
    metrics = transforms.build_metrics(transforms.metric_samples(transforms.parse_events(raw)))
    # Then each (queue, metric, window) has Sum, Average, Minimum, Maximum and SampleCount
    m0, m1 = window(0), window(1)
    assertDataFrameEqual(
        metrics,
        [
            Row(account=ACCOUNT, queue="orders", metric="NumberOfMessagesSent", window_start=m0[0], window_end=m0[1], sum=4.0, average=2.0, minimum=1.0, maximum=3.0, sample_count=2),
            Row(account=ACCOUNT, queue="orders", metric="NumberOfMessagesSent", window_start=m1[0], window_end=m1[1], sum=1.0, average=1.0, minimum=1.0, maximum=1.0, sample_count=1),
            Row(account=ACCOUNT, queue="billing", metric="NumberOfMessagesSent", window_start=m0[0], window_end=m0[1], sum=1.0, average=1.0, minimum=1.0, maximum=1.0, sample_count=1),
            Row(account=ACCOUNT, queue="orders", metric="SentMessageSize", window_start=m0[0], window_end=m0[1], sum=50.0, average=12.5, minimum=4.0, maximum=30.0, sample_count=4),
            Row(account=ACCOUNT, queue="orders", metric="SentMessageSize", window_start=m1[0], window_end=m1[1], sum=20.0, average=20.0, minimum=20.0, maximum=20.0, sample_count=1),
            Row(account=ACCOUNT, queue="billing", metric="SentMessageSize", window_start=m0[0], window_end=m0[1], sum=5.0, average=5.0, minimum=5.0, maximum=5.0, sample_count=1),
            Row(account=ACCOUNT, queue="orders", metric="NumberOfMessagesReceived", window_start=m0[0], window_end=m0[1], sum=1.0, average=1.0, minimum=1.0, maximum=1.0, sample_count=1),
            Row(account=ACCOUNT, queue="orders", metric="NumberOfMessagesDeleted", window_start=m0[0], window_end=m0[1], sum=1.0, average=1.0, minimum=1.0, maximum=1.0, sample_count=1),
            Row(account=ACCOUNT, queue="orders", metric="NumberOfEmptyReceives", window_start=m0[0], window_end=m0[1], sum=2.0, average=1.0, minimum=1.0, maximum=1.0, sample_count=2),
            Row(account=ACCOUNT, queue="orders", metric="NumberOfMessagesExpired", window_start=m0[0], window_end=m0[1], sum=1.0, average=1.0, minimum=1.0, maximum=1.0, sample_count=1),
            Row(account=ACCOUNT, queue="orders", metric="NumberOfMessagesPurged", window_start=m0[0], window_end=m0[1], sum=4.0, average=4.0, minimum=4.0, maximum=4.0, sample_count=1),
        ],
    )  # fmt: skip


def test_gauge_snapshots_become_approximate_metrics_and_dlq_moves_count_on_the_source(
    spark: SparkSession,
) -> None:
    # Given two gauge snapshots of `orders` and one message moved from `orders` to `orders-dlq`
    raw = kafka_rows(
        spark,
        event("gauges", at(0, 10), visible=4, not_visible=2, delayed=0, oldest_age_s=30),
        event("gauges", at(0, 20), visible=6, not_visible=0, delayed=1, oldest_age_s=40),
        event(
            "moved_to_dlq", at(0, 30), queue="orders-dlq", message_id="m", receive_count=3,
            age_ms=5000, source_queue="orders", attributes={},
        ),
    )  # fmt: skip
    # When aggregated
    metrics = transforms.build_metrics(
        transforms.metric_samples(transforms.parse_events(raw))
    ).drop("account", "window_start", "window_end")
    # Then each snapshot value is one sample, and the move counts on the queue it left
    assertDataFrameEqual(
        metrics,
        [
            Row(queue="orders", metric="ApproximateNumberOfMessagesVisible", sum=10.0, average=5.0, minimum=4.0, maximum=6.0, sample_count=2),
            Row(queue="orders", metric="ApproximateNumberOfMessagesNotVisible", sum=2.0, average=1.0, minimum=0.0, maximum=2.0, sample_count=2),
            Row(queue="orders", metric="ApproximateNumberOfMessagesDelayed", sum=1.0, average=0.5, minimum=0.0, maximum=1.0, sample_count=2),
            Row(queue="orders", metric="ApproximateAgeOfOldestMessage", sum=70.0, average=35.0, minimum=30.0, maximum=40.0, sample_count=2),
            Row(queue="orders", metric="NumberOfMessagesMovedToDLQ", sum=1.0, average=1.0, minimum=1.0, maximum=1.0, sample_count=1),
        ],
    )  # fmt: skip


def moved(
    second: int, source: str, receive_count: int, age_ms: int, **attributes: str
) -> dict[str, Any]:
    return event(
        "moved_to_dlq", at(0, second), queue="dlq", message_id=f"m{second}",
        receive_count=receive_count, age_ms=age_ms, source_queue=source, attributes=attributes,
    )  # fmt: skip


def test_dlq_analytics_per_source_count_arrivals_receive_counts_ages_and_top_attributes(
    spark: SparkSession,
) -> None:
    # Given moves into `dlq` from two sources in one minute, with message attributes: from
    # `orders`, color=red twice, color=blue, six distinct `n` values, one message without any
    raw = kafka_rows(
        spark,
        moved(1, "orders", 3, 1000, color="red", n="1"),
        moved(2, "orders", 5, 3000, color="red", n="2"),
        moved(3, "orders", 4, 2000, color="blue", n="3"),
        moved(4, "orders", 4, 2000, n="4"),
        moved(5, "orders", 4, 2000, n="5"),
        moved(6, "orders", 4, 2000, n="6"),
        moved(7, "orders", 4, 2000),
        moved(8, "billing", 2, 500, tier="gold"),
        event("sent", at(0, 9), queue="dlq", message_id="x", size=1),
    )
    # When aggregated
    dlq = transforms.build_dlq(transforms.parse_events(raw))
    # Then each (dlq, source, window) has its arrivals, statistics and the 5 commonest values
    # (ties by name, then value)
    m0 = window(0)
    assertDataFrameEqual(
        dlq,
        [
            Row(
                account=ACCOUNT, dlq="dlq", source_queue="orders", window_start=m0[0],
                window_end=m0[1], arrivals=7,
                receive_count=Row(sum=28.0, average=4.0, minimum=3.0, maximum=5.0, sample_count=7),
                age_at_move_s=Row(sum=14.0, average=2.0, minimum=1.0, maximum=3.0, sample_count=7),
                top_attributes=[
                    Row(name="color", value="red", count=2),
                    Row(name="color", value="blue", count=1),
                    Row(name="n", value="1", count=1),
                    Row(name="n", value="2", count=1),
                    Row(name="n", value="3", count=1),
                ],
                attribute_counts=[
                    Row(name="color", value="red", count=2),
                    Row(name="color", value="blue", count=1),
                    *(Row(name="n", value=str(i), count=1) for i in range(1, 7)),
                ],
            ),
            Row(
                account=ACCOUNT, dlq="dlq", source_queue="billing", window_start=m0[0],
                window_end=m0[1], arrivals=1,
                receive_count=Row(sum=2.0, average=2.0, minimum=2.0, maximum=2.0, sample_count=1),
                age_at_move_s=Row(sum=0.5, average=0.5, minimum=0.5, maximum=0.5, sample_count=1),
                top_attributes=[Row(name="tier", value="gold", count=1)],
                attribute_counts=[Row(name="tier", value="gold", count=1)],
            ),
        ],
    )  # fmt: skip


def test_attribute_counts_of_several_windows_add_up_to_the_exact_counts(
    spark: SparkSession,
) -> None:
    # Given 12 distinct values (more than the 5 a window's top list holds) spread over three
    # minutes so that each minute has a different leader: region=us once a minute (3 in all)
    # never tops a minute, customer=c<k> k+1 times in minute k % 3
    moves = []
    for minute in range(3):
        moves.append(moved_at(minute, 1, region="us"))
    second = 2
    for k in range(9):
        for _ in range(k % 4 + 1):
            moves.append(moved_at(k % 3, second, customer=f"c{k}"))
            second += 1
    raw = kafka_rows(spark, *moves)
    # When aggregated per minute
    rows = transforms.build_dlq(transforms.parse_events(raw)).collect()
    # Then each minute's top list is cut at 5, but its counts carry every value, and summing
    # the counts over the minutes gives each value's exact total
    assert len(rows) == 3
    assert all(len(row.top_attributes) <= 5 for row in rows)
    totals: dict[tuple[str, str], int] = {}
    for row in rows:
        for entry in row.attribute_counts:
            key = (entry.name, entry.value)
            totals[key] = totals.get(key, 0) + entry["count"]
    expected = {("region", "us"): 3, **{("customer", f"c{k}"): k % 4 + 1 for k in range(9)}}
    assert totals == expected
    assert len(expected) > 5


def moved_at(minute: int, second: int, **attributes: str) -> dict[str, Any]:
    return event(
        "moved_to_dlq", at(minute, second % 60), queue="dlq",
        message_id=f"m{minute}-{second}", receive_count=2, age_ms=1000, source_queue="src",
        attributes=attributes,
    )  # fmt: skip


def test_results_become_kafka_records_in_the_fixed_json_formats(spark: SparkSession) -> None:
    # Given one send and one move without attributes
    events = transforms.parse_events(
        kafka_rows(
            spark,
            event("sent", at(2, 1), message_id="a", size=10),
            moved(3, "orders", 2, 1500),
        )
    )
    # When turned into `__kqs_metrics` and `__kqs_dlq_analytics` records
    metrics = transforms.metrics_records(
        transforms.build_metrics(transforms.metric_samples(events)).where(
            "metric = 'NumberOfMessagesSent'"
        )
    ).collect()
    dlq = transforms.dlq_records(transforms.build_dlq(events)).collect()
    # Then keys are account/queue and values carry exactly the documented fields
    assert [(row.key, json.loads(row.value)) for row in metrics] == [
        (
            f"{ACCOUNT}/orders",
            {
                "v": 1, "account": ACCOUNT, "queue": "orders", "metric": "NumberOfMessagesSent",
                "window_start": at(2), "window_end": at(3), "sum": 1.0, "average": 1.0,
                "minimum": 1.0, "maximum": 1.0, "sample_count": 1,
            },
        )
    ]  # fmt: skip
    stats = {"sum": 2.0, "average": 2.0, "minimum": 2.0, "maximum": 2.0, "sample_count": 1}
    assert [(row.key, json.loads(row.value)) for row in dlq] == [
        (
            f"{ACCOUNT}/dlq",
            {
                "v": 1, "account": ACCOUNT, "dlq": "dlq", "source_queue": "orders",
                "window_start": at(0), "window_end": at(1), "arrivals": 1,
                "receive_count": stats,
                "age_at_move_s": {**stats, "sum": 1.5, "average": 1.5, "minimum": 1.5, "maximum": 1.5},
                "top_attributes": [],
                "attribute_counts": [],
            },
        )
    ]  # fmt: skip
