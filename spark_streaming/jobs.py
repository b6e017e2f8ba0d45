"""Wiring: ``__kqs_events`` (Spark's Kafka source) -> transforms -> Kafka topics + Parquet.

Four streaming queries share one SparkSession; each reads the events topic itself and keeps
its own checkpoint under ``<data dir>/analytics/checkpoints/<query>``:

    metrics-kafka    per-queue CloudWatch statistics, update mode  -> __kqs_metrics
    metrics-parquet  the same, closed windows only, append mode    -> analytics/metrics/
    dlq-kafka        DLQ analytics, update mode                    -> __kqs_dlq_analytics
    dlq-parquet      the same, closed windows only, append mode    -> analytics/dlq/

``kqs analytics`` calls ``run`` with ``local[2]``; on a cluster the same module is the
``spark-submit`` application (see docs/CONFIGURATION.md, "Analytics on a Spark cluster"):

    spark-submit --jars <connector jars> --py-files spark_streaming.zip \\
        spark_streaming/jobs.py --bootstrap kafka:9092 --data-dir hdfs:///kqs
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import types
from collections.abc import Iterator, Sequence
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from spark_streaming import progress, sinks, transforms
from spark_streaming.progress import BatchListener
from spark_streaming.settings import AnalyticsSettings, add_run_arguments, settings_from

log = logging.getLogger("kqs.analytics")

# On Ctrl-C, how long the running batches (all queries together) may take to finish; the
# queries and Spark then stop within a few seconds more (docs/architecture/analytics.md: done within 10 s).
STOP_PATIENCE_S = 4.0
# How often the run loop checks that the queries are alive without being told (the
# listener tells it at once; this only covers a listener call that never came).
LIVENESS_CHECK_S = 30.0


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
        # Streaming queries never use adaptive execution; left on (the default), Spark warns
        # at every query start that it disables it.
        .config("spark.sql.adaptive.enabled", "false")
        # Closed windows reach the Parquet sink in a batch of their own even when no new
        # events arrive (default, stated because the file output depends on it).
        .config("spark.sql.streaming.noDataMicroBatches.enabled", "true")
    )
    if master is None:
        spark = builder.getOrCreate()
    else:
        builder = builder.master(master).config("spark.ui.enabled", "false")
        if jars:
            builder = builder.config("spark.jars", ",".join(str(jar) for jar in jars))
        with _jvm_working_directory():
            spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    _quiet_expected_warnings(spark)
    return spark


@contextlib.contextmanager
def _jvm_working_directory() -> Iterator[None]:
    """Launch the driver JVM in a scratch directory of its own, not in the user's.

    Spark 4.0 creates its session artifact root as the *relative* path ``artifacts/`` (and
    ``spark-warehouse/`` once a table is touched) in the JVM's working directory, which it
    inherits from this process when PySpark launches it. Only the launch happens in the
    scratch directory; this process's own working directory is restored at once. The
    scratch directory is removed when this process exits.
    """
    scratch = tempfile.mkdtemp(prefix="kqs-spark-")
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    here = os.getcwd()
    os.chdir(scratch)
    try:
        yield
    finally:
        os.chdir(here)


def _quiet_expected_warnings(spark: SparkSession) -> None:
    """Stopping an idle query (we stop queries between batches) makes Spark's scheduler warn
    "Failed to cancel job group ... Cannot find active jobs for it": nothing is wrong, so
    that logger only reports errors."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
        "org.apache.spark.scheduler.DAGScheduler", jvm.org.apache.logging.log4j.Level.ERROR
    )


def read_events(spark: SparkSession, settings: AnalyticsSettings) -> DataFrame:
    """``__kqs_events`` as a stream of typed events, watermarked on ``event_time``."""
    raw = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", settings.bootstrap)
        .options(**settings.spark_kafka_options())
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
    """Start the four queries (see the module docstring), micro-batches every ``trigger_s``
    for the Kafka outputs and every ``settings.file_trigger_seconds`` (at least ``trigger_s``)
    for the Parquet ones.

    ``trigger_s=None`` processes what the topic holds now (availableNow), then stops.

    The caller makes sure the topics exist first (``sinks.prepare_topics``).
    """

    def metrics() -> DataFrame:
        return transforms.build_metrics(transforms.metric_samples(read_events(spark, settings)))

    def dlq() -> DataFrame:
        return transforms.build_dlq(read_events(spark, settings))

    file_trigger_s = None if trigger_s is None else max(trigger_s, settings.file_trigger_seconds)

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
            file_trigger_s,
        ),
        sinks.to_kafka(
            transforms.dlq_records(dlq()), settings, settings.dlq_topic, "dlq-kafka", trigger_s
        ),
        sinks.to_parquet(
            transforms.with_date_partition(dlq()),
            settings,
            settings.dlq_path,
            "dlq-parquet",
            file_trigger_s,
        ),
    ]


def run_available_now(spark: SparkSession, settings: AnalyticsSettings) -> None:
    """Process everything in the events topic now, then return (tests, backfills)."""
    sinks.prepare_topics(settings)
    with listening(spark, BatchListener()):
        queries = start_queries(spark, settings, None)
        try:
            for query in queries:
                query.awaitTermination()
        finally:
            for query in queries:
                query.stop()


@contextlib.contextmanager
def listening(spark: SparkSession, listener: BatchListener) -> Iterator[BatchListener]:
    """``listener`` hears the session's queries inside the block (see ``progress.py``)."""
    handle = progress.add_listener(spark, listener)
    try:
        yield listener
    finally:
        progress.remove_listener(spark, handle)


def run(settings: AnalyticsSettings, jars: Sequence[Path], master: str | None) -> int:
    """Run the four queries until SIGINT/SIGTERM; log one line per finished batch."""
    wake = threading.Event()
    stopping: list[str] = []

    signalled: list[float] = []

    def request_stop(signum: int, _frame: types.FrameType | None) -> None:
        stopping.append(signal.Signals(signum).name)
        signalled.append(time.monotonic())
        wake.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, request_stop)
    sinks.prepare_topics(settings, stop=wake)
    if stopping:
        return 0
    began = time.monotonic()
    spark = build_session(settings, jars, master)
    # SparkContext installs its own SIGINT handler, which calls into the JVM from inside
    # whatever py4j call is running (a reentrant read that fails) and does not stop streaming
    # queries; ours only sets a flag the loop below acts on.
    signal.signal(signal.SIGINT, request_stop)
    listener = BatchListener(changed=wake)
    handle = progress.add_listener(spark, listener)
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
                "trigger_s": settings.trigger_seconds,
                "startup_s": round(time.monotonic() - began, 1),
            },
        )
        # Nothing is polled: the listener logs each batch as Spark finishes it and wakes
        # this loop when a query stops; the signal handler wakes it to stop. The timeout
        # only guards against a lost listener call.
        while not stopping:
            wake.wait(LIVENESS_CHECK_S)
            wake.clear()
            stopped = [q for q in queries if not q.isActive]
            if stopping:
                break
            if stopped or listener.failed():
                for query in stopped:
                    error = query.exception()
                    log.error("query stopped", extra={"query": query.name, "error": str(error)})
                return 1
        log.info("stopping", extra={"signal": stopping[0]})
        return 0
    finally:
        _stop_queries(queries, time.monotonic() + STOP_PATIENCE_S)
        progress.remove_listener(spark, handle)
        spark.stop()
        extra = {"seconds": round(time.monotonic() - signalled[0], 1)} if signalled else {}
        log.info("analytics stopped", extra=extra)


def _stop_queries(queries: Sequence[StreamingQuery], deadline: float) -> None:
    """Stop every query, each after its running batch if that ends before ``deadline``
    (monotonic), all at once: stopping a query waits for its thread, and one after another
    those waits add up.

    A batch cut short is simply run again from the checkpoint at the next start (Spark logs
    the aborted write as an error), but letting it finish avoids repeating its Kafka output.
    """

    def stop(query: StreamingQuery) -> None:
        while query.isActive and query.status["isTriggerActive"] and time.monotonic() < deadline:
            time.sleep(0.2)
        query.stop()

    stoppers = [
        threading.Thread(target=stop, args=(query,), name=f"stop-{query.name}") for query in queries
    ]
    for stopper in stoppers:
        stopper.start()
    for stopper in stoppers:
        stopper.join()


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
    # py4j logs every callback (each finished batch's listener call) at INFO.
    logging.getLogger("py4j").setLevel(logging.WARNING)


def main(argv: Sequence[str] | None = None) -> int:
    """``spark-submit spark_streaming/jobs.py ...``: master and jars come from spark-submit."""
    parser = argparse.ArgumentParser(prog="spark_streaming/jobs.py")
    add_run_arguments(parser, master_default=None)
    args = parser.parse_args(argv)
    configure_logging()
    return run(settings_from(args), jars=(), master=args.master)


if __name__ == "__main__":
    sys.exit(main())
