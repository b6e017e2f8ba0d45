"""Wiring: ``__kqs_events`` (Spark's Kafka source) -> transforms -> Kafka topics + Parquet.

Four streaming queries share one SparkSession; each reads the events topic itself and keeps
its own checkpoint under ``<data dir>/analytics/checkpoints/<query>``:

    metrics-kafka    per-queue CloudWatch statistics, update mode  -> __kqs_metrics
    metrics-parquet  the same, closed windows only, append mode    -> analytics/metrics/
    dlq-kafka        DLQ analytics, update mode                    -> __kqs_dlq_analytics
    dlq-parquet      the same, closed windows only, append mode    -> analytics/dlq/

``kqs analytics`` calls ``run`` with ``local[2]``; on a cluster the same module is the
``spark-submit`` application (see README, "Analytics"):

    spark-submit --jars <connector jars> --py-files spark_streaming.zip \\
        spark_streaming/jobs.py --bootstrap kafka:9092 --data-dir hdfs:///kqs
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from spark_streaming import sinks, transforms
from spark_streaming.settings import AnalyticsSettings, add_run_arguments, settings_from

log = logging.getLogger("kqs.analytics")

# On Ctrl-C, how long the running batches (all queries together) may take to finish.
STOP_PATIENCE_S = 10.0


def build_session(
    settings: AnalyticsSettings, jars: Sequence[Path] = (), master: str | None = None
) -> SparkSession:
    """A SparkSession sized for a small machine. ``master=None`` keeps spark-submit's."""
    # Python workers must be this interpreter (the venv's), not whatever `python3` is on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.appName("kqs-analytics")
        .config("spark.driver.memory", settings.driver_memory)
        .config("spark.sql.shuffle.partitions", str(settings.shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
        # Closed windows reach the Parquet sink in a batch of their own even when no new
        # events arrive (default, stated because the file output depends on it).
        .config("spark.sql.streaming.noDataMicroBatches.enabled", "true")
    )
    if master is not None:
        builder = builder.master(master).config("spark.ui.enabled", "false")
    if jars:
        builder = builder.config("spark.jars", ",".join(str(jar) for jar in jars))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def read_events(spark: SparkSession, settings: AnalyticsSettings) -> DataFrame:
    """``__kqs_events`` as a stream of typed events, watermarked on ``event_time``."""
    raw = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", settings.bootstrap)
        .option("subscribe", settings.events_topic)
        .option("startingOffsets", settings.starting_offsets)
        .option("maxOffsetsPerTrigger", str(settings.max_offsets_per_trigger))
        # Retention deletes old events; a query that was stopped for long resumes at the
        # oldest one still there instead of failing.
        .option("failOnDataLoss", "false")
        .load()
    )
    return transforms.parse_events(raw).withWatermark(
        "event_time", f"{settings.watermark_seconds} seconds"
    )


def start_queries(
    spark: SparkSession, settings: AnalyticsSettings, trigger_s: float | None
) -> list[StreamingQuery]:
    """Start the four queries (see the module docstring), micro-batches every ``trigger_s``.

    ``trigger_s=None`` processes what the topic holds now (availableNow), then stops.

    The caller makes sure the topics exist first (``sinks.prepare_topics``).
    """

    def metrics() -> DataFrame:
        return transforms.build_metrics(transforms.metric_samples(read_events(spark, settings)))

    def dlq() -> DataFrame:
        return transforms.build_dlq(read_events(spark, settings))

    return [
        sinks.to_kafka(
            transforms.metrics_records(metrics()),
            settings,
            settings.metrics_topic,
            "metrics-kafka",
            trigger_s,
        ),
        sinks.to_parquet(
            transforms.with_date_partition(metrics()),
            settings,
            settings.metrics_path,
            "metrics-parquet",
            trigger_s,
        ),
        sinks.to_kafka(
            transforms.dlq_records(dlq()), settings, settings.dlq_topic, "dlq-kafka", trigger_s
        ),
        sinks.to_parquet(
            transforms.with_date_partition(dlq()),
            settings,
            settings.dlq_path,
            "dlq-parquet",
            trigger_s,
        ),
    ]


def run_available_now(spark: SparkSession, settings: AnalyticsSettings) -> None:
    """Process everything in the events topic now, then return (tests, backfills)."""
    sinks.prepare_topics(settings)
    queries = start_queries(spark, settings, None)
    try:
        for query in queries:
            query.awaitTermination()
            _log_progress(query, -1)
    finally:
        for query in queries:
            query.stop()


def _log_progress(query: StreamingQuery, last_logged: int) -> int:
    """Log the batches of ``query`` finished since batch ``last_logged``; returns the newest."""
    newest = last_logged
    for progress in query.recentProgress:
        batch = int(progress["batchId"])
        if batch <= last_logged:
            continue
        newest = max(newest, batch)
        durations: dict[str, Any] = progress.get("durationMs") or {}
        sink: dict[str, Any] = progress.get("sink") or {}
        log.info(
            "batch",
            extra={
                "query": query.name,
                "batch": batch,
                "rows_in": progress.get("numInputRows", 0),
                "rows_out": sink.get("numOutputRows"),  # the file sink does not count
                "duration_ms": durations.get("triggerExecution"),
                "watermark": (progress.get("eventTime") or {}).get("watermark"),
            },
        )
    return newest


def run(settings: AnalyticsSettings, jars: Sequence[Path], master: str | None) -> int:
    """Run the four queries until SIGINT/SIGTERM; log one line per finished batch."""
    stop = threading.Event()

    def request_stop(signum: int, _frame: types.FrameType | None) -> None:
        log.info("stopping", extra={"signal": signal.Signals(signum).name})
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, request_stop)
    sinks.prepare_topics(settings, stop=stop)
    if stop.is_set():
        return 0
    began = time.monotonic()
    spark = build_session(settings, jars, master)
    # SparkContext installs its own SIGINT handler, which calls into the JVM from inside
    # whatever py4j call is running (a reentrant read that fails) and does not stop streaming
    # queries; ours only sets a flag the loop below acts on.
    signal.signal(signal.SIGINT, request_stop)
    queries: list[StreamingQuery] = []
    try:
        queries = start_queries(spark, settings, settings.trigger_seconds)
        log.info(
            "analytics running",
            extra={
                "master": spark.sparkContext.master,
                "spark": spark.version,
                "bootstrap": settings.bootstrap,
                "events_topic": settings.events_topic,
                "output": settings.analytics_dir,
                "startup_s": round(time.monotonic() - began, 1),
            },
        )
        logged = {query.name: -1 for query in queries}
        while not stop.is_set():
            stop.wait(1.0)
            for query in queries:
                logged[query.name] = _log_progress(query, logged[query.name])
                if not query.isActive:
                    error = query.exception()
                    log.error("query stopped", extra={"query": query.name, "error": str(error)})
                    return 1
        return 0
    finally:
        deadline = time.monotonic() + STOP_PATIENCE_S
        for query in queries:
            _stop_between_batches(query, deadline)
        spark.stop()
        log.info("analytics stopped")


def _stop_between_batches(query: StreamingQuery, deadline: float) -> None:
    """Stop ``query``, after its running batch if that ends before ``deadline`` (monotonic).

    A batch cut short is simply run again from the checkpoint at the next start (Spark logs
    the aborted write as an error), but letting it finish avoids repeating its Kafka output.
    """
    while query.isActive and query.status["isTriggerActive"] and time.monotonic() < deadline:
        time.sleep(0.2)
    query.stop()


class KeyValueFormatter(logging.Formatter):
    """``<time> <logger> <message> key=value ...``: the ``extra=`` fields on one line."""

    _standard = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
        "message",
        "asctime",
    }

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = " ".join(
            f"{key}={value}" for key, value in vars(record).items() if key not in self._standard
        )
        return f"{line} {fields}" if fields else line


def configure_logging() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(KeyValueFormatter("%(asctime)s %(name)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)


def main(argv: Sequence[str] | None = None) -> int:
    """``spark-submit spark_streaming/jobs.py ...``: master and jars come from spark-submit."""
    parser = argparse.ArgumentParser(prog="spark_streaming/jobs.py")
    add_run_arguments(parser, master_default=None)
    args = parser.parse_args(argv)
    configure_logging()
    return run(settings_from(args), jars=(), master=args.master)


if __name__ == "__main__":
    sys.exit(main())
