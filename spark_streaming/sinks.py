"""Where results go: Kafka topics (live, update mode) and Parquet files (closed windows).

* Kafka, ``outputMode("update")``: every trigger re-emits the windows that changed, so a
  window's numbers appear within one trigger interval; a reader keeps the latest record
  per (queue, metric, window_start) or (dlq, source_queue, window_start).
* Parquet, ``outputMode("append")``: a window is written once, when the watermark passes
  its end, so the files hold final values only; partitioned by ``date`` (UTC day of the
  window start). Spark's file sink keeps a ``_spark_metadata`` log, so each window lands
  exactly once even across restarts; read the directory with Spark (or any reader that
  honours that log) rather than globbing the files.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.streaming.readwriter import DataStreamWriter

from spark_streaming.settings import AnalyticsSettings

log = logging.getLogger("kqs.analytics")

# Output topics keep a week of windows: enough for a dashboard to show history after a restart.
OUTPUT_RETENTION_MS = 7 * 24 * 3600 * 1000


def prepare_topics(
    settings: AnalyticsSettings, timeout_s: float = 30.0, stop: threading.Event | None = None
) -> None:
    """Create the output topics if missing, then wait until the events topic exists.

    The gateway creates ``__kqs_events`` (with its retention); Spark's Kafka source fails
    on a topic that does not exist, so analytics started before the first ``kqs serve``
    waits for it. Returns early if ``stop`` is set.
    """
    try:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import (  # type: ignore[attr-defined]  # not in __all__
            AdminClient,
            NewTopic,
        )
    except ImportError:  # on a cluster driver without confluent-kafka: rely on the broker
        log.warning("confluent-kafka not installed; not creating the output topics")
        return
    # librdkafka's messages through logging, not raw on stderr (served by poll(), below).
    config: dict[str, Any] = {
        **settings.admin_config(),
        "logger": logging.getLogger("kqs.librdkafka"),
    }
    admin = AdminClient(config)
    stop = stop or threading.Event()
    announced = ""
    while not stop.is_set():
        try:
            existing = set(admin.list_topics(timeout=timeout_s).topics)
        except KafkaException as error:  # the cluster is not up yet (`kqs serve` starts it)
            reason = f"waiting for Kafka at {settings.bootstrap}: {error}"
        else:
            if settings.events_topic in existing:
                _create_outputs(admin, NewTopic, settings, existing, timeout_s)
                return
            reason = f"waiting for {settings.events_topic} (the gateway creates it)"
        admin.poll(0)  # serves librdkafka's log messages
        if reason != announced:
            log.info(reason)
            announced = reason
        stop.wait(2.0)


def _create_outputs(
    admin: Any, new_topic: Any, settings: AnalyticsSettings, existing: set[str], timeout_s: float
) -> None:
    wanted = [
        new_topic(
            topic,
            num_partitions=1,
            replication_factor=settings.replication_factor,
            config={"retention.ms": str(OUTPUT_RETENTION_MS)},
        )
        for topic in (settings.metrics_topic, settings.dlq_topic)
        if topic not in existing
    ]
    if not wanted:
        return
    for topic, future in admin.create_topics(wanted, request_timeout=timeout_s).items():
        try:
            future.result(timeout=timeout_s)
            log.info("created topic", extra={"topic": topic})
        except Exception as error:  # another process may have created it first: fine
            if "TOPIC_ALREADY_EXISTS" not in str(error):
                raise


def to_kafka(
    records: DataFrame,
    settings: AnalyticsSettings,
    topic: str,
    name: str,
    trigger_s: float | None,
) -> StreamingQuery:
    """Start a query writing (key, value) string records to ``topic`` in update mode."""
    writer = (
        records.writeStream.queryName(name)
        .format("kafka")
        .outputMode("update")
        .option("kafka.bootstrap.servers", settings.bootstrap)
        .options(**settings.spark_kafka_options())
        .option("topic", topic)
        .option("checkpointLocation", settings.checkpoint(name))
    )
    return _start(writer, trigger_s)


def to_parquet(
    rows: DataFrame,
    settings: AnalyticsSettings,
    path: str,
    name: str,
    trigger_s: float | None,
) -> StreamingQuery:
    """Start a query appending closed windows to Parquet under ``path``, by ``date``."""
    writer = (
        rows.writeStream.queryName(name)
        .format("parquet")
        .outputMode("append")
        .partitionBy("date")
        .option("path", path)
        .option("checkpointLocation", settings.checkpoint(name))
    )
    return _start(writer, trigger_s)


def _start(writer: DataStreamWriter, trigger_s: float | None) -> StreamingQuery:
    """``trigger_s``: micro-batch interval; None processes what is available, then stops."""
    if trigger_s is None:
        return writer.trigger(availableNow=True).start()
    return writer.trigger(processingTime=f"{trigger_s:g} seconds").start()
