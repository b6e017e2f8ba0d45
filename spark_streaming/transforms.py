"""Pure DataFrame -> DataFrame steps of the analytics jobs; no sources, sinks or sessions here.

Every function works on a static DataFrame (that is how the tests call them) and on a
streaming one (that is how ``jobs.py`` wires them), so none of them uses an operation that
Structured Streaming refuses on a stream (sorting, window functions, joins). Theory:

* ``parse_events``: Kafka records of ``__kqs_events`` (``key``, ``value`` bytes) -> one typed
  row per event with ``event_time``; records of another format version or without the
  fields every event has are dropped (the format may only grow within version 1).
* ``metric_samples``: each event -> the CloudWatch data points it stands for, as
  (account, queue, metric, event_time, value). A count event (sent, received, ...) is one
  sample whose value is the event's ``count``; a ``gauges`` snapshot is one sample per
  Approximate* metric; a ``sent`` event is also one SentMessageSize sample per message
  (``size``, or each of ``sizes`` when the event stands for several messages).
* ``build_metrics``: samples -> per (account, queue, metric, 1-minute event-time window) the
  five CloudWatch statistics: Sum, Average (= Sum / SampleCount), Minimum, Maximum,
  SampleCount (number of samples).
* ``build_dlq``: ``moved_to_dlq`` events -> per (account, DLQ, source queue, window) the
  arrivals, statistics of the receive count and of the age at the move (seconds), the
  count of every message-attribute value (``attribute_counts``), and the top ones.
* ``metrics_records`` / ``dlq_records``: result rows -> Kafka (key, value) JSON records,
  the fixed formats in docs/ARCHITECTURE.md ("Analytics (Spark)").

The top attribute values are computed *inside* the one streaming aggregation: the window's
state keeps the list of (count, attributes) of its moves, and a projection after the
aggregation counts equal (name, value) pairs by sorting them and summing each run, so the
ranking is exact, O(n log n) per window and legal in every output mode. State therefore
grows with the number of DLQ arrivals per open window (attribute values are at most 256
characters); the watermark drops it when the window closes.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from spark_streaming.settings import TOP_ATTRIBUTES, WINDOW

FORMAT_VERSION = 1

EVENT_SCHEMA = StructType(
    [
        StructField("v", IntegerType()),
        StructField("type", StringType()),
        StructField("ts", LongType()),
        StructField("account", StringType()),
        StructField("queue", StringType()),
        StructField("count", LongType()),
        StructField("message_id", StringType()),
        StructField("size", LongType()),
        StructField("sizes", ArrayType(LongType())),
        StructField("receive_count", LongType()),
        StructField("age_ms", LongType()),
        StructField("source_queue", StringType()),
        StructField("attributes", MapType(StringType(), StringType())),
        StructField("visible", LongType()),
        StructField("not_visible", LongType()),
        StructField("delayed", LongType()),
        StructField("oldest_age_s", LongType()),
    ]
)

# (event type, CloudWatch metric, the event's field that is the sample value)
_COUNT = "count"
METRIC_SOURCES: tuple[tuple[str, str, str], ...] = (
    ("sent", "NumberOfMessagesSent", _COUNT),
    ("sent", "SentMessageSize", "size"),
    ("received", "NumberOfMessagesReceived", _COUNT),
    ("deleted", "NumberOfMessagesDeleted", _COUNT),
    ("empty_receive", "NumberOfEmptyReceives", _COUNT),
    # KQS extras, not CloudWatch metrics; a DLQ move counts on the queue it left.
    ("moved_to_dlq", "NumberOfMessagesMovedToDLQ", _COUNT),
    ("expired", "NumberOfMessagesExpired", _COUNT),
    ("purged", "NumberOfMessagesPurged", _COUNT),
    ("gauges", "ApproximateNumberOfMessagesVisible", "visible"),
    ("gauges", "ApproximateNumberOfMessagesNotVisible", "not_visible"),
    ("gauges", "ApproximateNumberOfMessagesDelayed", "delayed"),
    ("gauges", "ApproximateAgeOfOldestMessage", "oldest_age_s"),
)

STAT_FIELDS = ("sum", "average", "minimum", "maximum", "sample_count")


def parse_events(raw: DataFrame) -> DataFrame:
    """Kafka records (binary or string ``value``) -> typed events with ``event_time``."""
    event = F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e")
    return (
        raw.select(event)
        .select("e.*")
        .where(
            (F.col("v") == FORMAT_VERSION)
            & F.col("type").isNotNull()
            & F.col("ts").isNotNull()
            & F.col("account").isNotNull()
            & F.col("queue").isNotNull()
        )
        .withColumn("count", F.coalesce(F.col("count"), F.lit(1)))
        .withColumn("event_time", F.timestamp_millis(F.col("ts")))
        .drop("v")
    )


def metric_samples(events: DataFrame) -> DataFrame:
    """Events -> (account, queue, metric, event_time, value) CloudWatch data points."""
    candidates = []
    for event_type, metric, field in METRIC_SOURCES:
        # A DLQ move is keyed by the DLQ; its NumberOfMessagesMovedToDLQ belongs to the source.
        queue = (
            F.coalesce(F.col("source_queue"), F.col("queue"))
            if event_type == "moved_to_dlq"
            else F.col("queue")
        )
        candidates.append(
            F.when(
                (F.col("type") == event_type) & F.col(field).isNotNull(),
                F.struct(
                    queue.alias("queue"),
                    F.lit(metric).alias("metric"),
                    F.col(field).cast("double").alias("value"),
                ),
            )
        )
    samples = F.filter(F.array(*candidates), lambda sample: sample.isNotNull())
    # A send of several messages is one event with each message's SentMessageSize in `sizes`.
    sizes = F.when(F.col("type") == "sent", F.col("sizes"))
    size_samples = F.transform(
        F.coalesce(sizes, F.array().cast(ArrayType(LongType()))),
        lambda size: F.struct(
            F.col("queue").alias("queue"),
            F.lit("SentMessageSize").alias("metric"),
            size.cast("double").alias("value"),
        ),
    )
    samples = F.concat(samples, size_samples)
    return events.select("account", "event_time", F.explode(samples).alias("s")).select(
        "account", "s.queue", "s.metric", "event_time", "s.value"
    )


def _statistics(value: Column) -> list[Column]:
    return [
        F.sum(value).alias("sum"),
        F.avg(value).alias("average"),
        F.min(value).alias("minimum"),
        F.max(value).alias("maximum"),
        F.count(value).alias("sample_count"),
    ]


def build_metrics(samples: DataFrame, window: str = WINDOW) -> DataFrame:
    """Samples -> the five statistics per (account, queue, metric, event-time window)."""
    return (
        samples.groupBy(
            "account", "queue", "metric", F.window("event_time", window).alias("window")
        )
        .agg(*_statistics(F.col("value")))
        .select(
            "account",
            "queue",
            "metric",
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            *STAT_FIELDS,
        )
    )


def build_dlq(events: DataFrame, window: str = WINDOW, top: int = TOP_ATTRIBUTES) -> DataFrame:
    """``moved_to_dlq`` events -> DLQ analytics per (account, dlq, source_queue, window)."""
    # The predicate mentions the event-time column on purpose: the optimizer pushes filters
    # that do not below `withWatermark`, and the watermark would then follow DLQ moves only,
    # so a window would close (reach Parquet) only when a later move arrives, maybe never.
    # `event_time` is never null here, so this keeps exactly the moves.
    moves = events.where(F.when(F.col("event_time").isNotNull(), F.col("type") == "moved_to_dlq"))
    receive_count = F.col("receive_count").cast("double")
    age_s = F.col("age_ms").cast("double") / 1000.0
    with_attributes = F.when(
        F.size(F.col("attributes")) > 0,
        F.struct(F.col("count").alias("n"), F.col("attributes").alias("attributes")),
    )
    grouped = moves.groupBy(
        "account",
        F.col("queue").alias("dlq"),
        F.coalesce(F.col("source_queue"), F.lit("")).alias("source_queue"),
        F.window("event_time", window).alias("window"),
    ).agg(
        F.sum("count").alias("arrivals"),
        F.struct(*_statistics(receive_count)).alias("receive_count"),
        F.struct(*_statistics(age_s)).alias("age_at_move_s"),
        F.collect_list(with_attributes).alias("moves_with_attributes"),
    )
    return grouped.select(
        "account",
        "dlq",
        "source_queue",
        F.col("window.start").alias("window_start"),
        F.col("window.end").alias("window_end"),
        "arrivals",
        "receive_count",
        "age_at_move_s",
        top_attribute_values(F.col("moves_with_attributes"), top).alias("top_attributes"),
        attribute_counts(F.col("moves_with_attributes")).alias("attribute_counts"),
    )


def top_attribute_values(moves: Column, top: int = TOP_ATTRIBUTES) -> Column:
    """array<struct<n, attributes map>> -> the ``top`` most frequent (name, value, count)."""
    return F.slice(attribute_counts(moves), 1, top)


def attribute_counts(moves: Column) -> Column:
    """array<struct<n, attributes map>> -> every (name, value, count), most frequent first.

    Ties rank by name, then value. Each (name, value) counts the messages (``n``) that
    carried it. The pairs are sorted so that equal ones are adjacent; each run's start is
    found by comparing neighbours, and a run's count is the sum over its slice. Every value
    is kept, so counts of several windows add up exactly (a per-window top list would drop
    the values outside each window's top).
    """
    entries = F.flatten(
        F.transform(
            moves,
            lambda move: F.transform(
                F.map_entries(move["attributes"]),
                lambda entry: F.struct(
                    entry["key"].alias("name"),
                    F.coalesce(entry["value"], F.lit("")).alias("value"),
                    move["n"].cast("long").alias("n"),
                ),
            ),
        )
    )
    pairs = F.array_sort(entries)
    size = F.size(pairs)

    def starts_run(i: Column) -> Column:
        here, before = F.element_at(pairs, i), F.element_at(pairs, i - 1)
        return (
            F.when(i > size, F.lit(False))
            .when(i == 1, F.lit(True))
            .otherwise((here["name"] != before["name"]) | (here["value"] != before["value"]))
        )

    starts = F.filter(F.sequence(F.lit(1), F.greatest(size, F.lit(1))), starts_run)

    def run(start: Column, index: Column) -> Column:
        end = F.when(index + 1 < F.size(starts), F.element_at(starts, index + 2)).otherwise(
            size + 1
        )
        first = F.element_at(pairs, start)
        return F.struct(
            first["name"].alias("name"),
            first["value"].alias("value"),
            F.aggregate(
                F.slice(pairs, start, end - start),
                F.lit(0).cast("long"),
                lambda acc, e: acc + e["n"],
            ).alias("count"),
        )

    counted = F.transform(starts, run)

    def by_rank(a: Column, b: Column) -> Column:
        return (
            F.when(a["count"] > b["count"], -1)
            .when(a["count"] < b["count"], 1)
            .when(a["name"] < b["name"], -1)
            .when(a["name"] > b["name"], 1)
            .when(a["value"] < b["value"], -1)
            .when(a["value"] > b["value"], 1)
            .otherwise(0)
        )

    return F.array_sort(counted, by_rank)


def _epoch_ms(column: str) -> Column:
    return F.unix_millis(F.col(column))


def metrics_records(metrics: DataFrame) -> DataFrame:
    """Metric rows -> ``__kqs_metrics`` records: key ``account/queue``, JSON value."""
    value = F.struct(
        F.lit(FORMAT_VERSION).alias("v"),
        "account",
        "queue",
        "metric",
        _epoch_ms("window_start").alias("window_start"),
        _epoch_ms("window_end").alias("window_end"),
        *STAT_FIELDS,
    )
    return metrics.select(
        F.concat_ws("/", "account", "queue").alias("key"), F.to_json(value).alias("value")
    )


def dlq_records(dlq: DataFrame) -> DataFrame:
    """DLQ rows -> ``__kqs_dlq_analytics`` records: key ``account/dlq``, JSON value."""
    value = F.struct(
        F.lit(FORMAT_VERSION).alias("v"),
        "account",
        "dlq",
        "source_queue",
        _epoch_ms("window_start").alias("window_start"),
        _epoch_ms("window_end").alias("window_end"),
        "arrivals",
        "receive_count",
        "age_at_move_s",
        "top_attributes",
        "attribute_counts",
    )
    return dlq.select(
        F.concat_ws("/", "account", "dlq").alias("key"), F.to_json(value).alias("value")
    )


def with_date_partition(frame: DataFrame) -> DataFrame:
    """Adds ``date``, the day of the window start (session time zone: UTC), to partition by."""
    return frame.withColumn("date", F.to_date(F.col("window_start")))
