"""The analytics on a real Spark standalone cluster, exact through driver crashes and restarts.

A master and two workers from the PySpark distribution run on 127.0.0.1 (no Docker); the
analytics are submitted to them as docs/CONFIGURATION.md says (`spark-submit --master
spark://... --jars <kqs analytics fetch> --py-files kqs-spark.zip spark_streaming/jobs.py
--bootstrap ... --data-dir ...`, with 1 s / 2 s triggers for a test's pace), against a broker
and a gateway of this module's own (so the broker can be restarted under the jobs).

Under traffic through the gateway (a known workload, then a steady send/receive/delete
stream), the driver is SIGKILLed and resubmitted `KQS_ANALYTICS_CRASHES` times (1 in CI), then
the gateway and then the broker are restarted under the running jobs (each time the jobs
must go on finishing batches). At the end the
gateway stops (its events are all in Kafka) and one event stamped minutes later (a queue of
its own) moves the watermark past every window. Then, for this module's queues:

* the Parquet outputs hold each closed window exactly once, with the statistics that the
  events in `__kqs_events` give (tests/support/analytics_oracle.py computes them in Python);
* the Kafka outputs, latest record per window, hold the same values;
* the known workload's counts are the client's own;
* `local[2]` over the same events (availableNow) writes the same Parquet rows.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from spark_streaming import jars, jobs
from spark_streaming.settings import EVENTS_TOPIC, AnalyticsSettings
from tests.support import analytics_oracle as oracle
from tests.support.harness import (
    ACCOUNT_ID,
    REGION,
    GatewayProcess,
    eventually,
    free_port,
    json_client,
)
from tests.support.spark_cluster import (
    READY_S,
    StandaloneCluster,
    SubmittedAnalytics,
    application_dir,
)
from tests.support.workload import Workload, run_workload
from topology import event_format
from topology.embedded import broker

# CI's reduced size kills the driver once (~6 min alone here); the full run,
# `KQS_ANALYTICS_CRASHES=4`, four times (~12 min).
CRASHES = int(os.environ.get("KQS_ANALYTICS_CRASHES", "1"))
# Batches each query must finish after a restart of the gateway or the broker before the
# next step: one in CI, two in a full run.
AFTER_RESTART = 1 if CRASHES == 1 else 2
WAIT_S = 240.0  # upper bound for the outputs to catch up on a loaded machine
STATS = ("sum", "minimum", "maximum", "sample_count")


class Broker:
    """A jar broker of this module's own, restartable on its ports and data directory."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.port, self.controller_port = free_port(), free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"

    def start(self) -> None:
        # A restart beside a Spark cluster on a loaded machine outlasted the default 60 s.
        broker.start(
            self.data_dir,
            port=self.port,
            controller_port=self.controller_port,
            ready_timeout=READY_S,
        )

    def stop(self) -> None:
        broker.stop(self.data_dir, timeout=30)


@pytest.fixture(scope="module")
def own_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    kafka = Broker(tmp_path_factory.mktemp("cluster-broker") / "kafka")
    kafka.start()
    try:
        yield kafka
    finally:
        kafka.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    spark_cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-standalone"))
    try:
        spark_cluster.start()
        yield spark_cluster
    finally:
        spark_cluster.stop()


class Traffic:
    """A steady send / receive / delete stream on one queue, riding out restarts."""

    def __init__(self, endpoint: str, queue: str) -> None:
        self.sqs = json_client(endpoint)
        self.url: str = self.sqs.create_queue(QueueName=queue)["QueueUrl"]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="traffic", daemon=True)
        self.rounds = 0

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                entries = [{"Id": str(i), "MessageBody": f"m{i}"} for i in range(5)]
                self.sqs.send_message_batch(QueueUrl=self.url, Entries=entries)
                got = self.sqs.receive_message(QueueUrl=self.url, MaxNumberOfMessages=5)
                handles = [m["ReceiptHandle"] for m in got.get("Messages", [])]
                if handles:
                    self.sqs.delete_message_batch(
                        QueueUrl=self.url,
                        Entries=[{"Id": str(i), "ReceiptHandle": h} for i, h in enumerate(handles)],
                    )
                self.rounds += 1
            except Exception:  # noqa: BLE001 - the gateway or broker is restarting: go on
                self.stop.wait(0.5)
            self.stop.wait(0.1)


def publish_event_stamped_at(bootstrap: str, ts_ms: int) -> dict[str, Any]:
    """A Kafka-native producer's event of a queue of its own: the watermark passes every
    window before `ts_ms` minus the watermark delay."""
    queue = f"clock-{uuid.uuid4().hex[:8]}"
    event = event_format.sent(ts_ms, ACCOUNT_ID, queue, [("m-clock", 1)], region=REGION)
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(EVENTS_TOPIC, json.dumps(event).encode(), f"{ACCOUNT_ID}/{queue}".encode())
    assert producer.flush(60) == 0
    return event


def parquet_metrics(spark: SparkSession, path: str, queues: set[str]) -> list[Any]:
    """The metric rows of `queues` in the Parquet output (through the file sink's log)."""
    try:
        return spark.read.parquet(path).where(F.col("queue").isin(*queues)).collect()
    except AnalysisException:  # no window written yet: no file to take the schema from
        return []


def metric_key(row: Any) -> oracle.MetricKey:
    return (row.queue, row.metric, int(row.window_start.timestamp() * 1000))


def test_the_cluster_analytics_are_exact_through_driver_crashes_and_restarts_and_equal_local(
    cluster: StandaloneCluster,
    own_broker: Broker,
    spark: SparkSession,
    tmp_path: Path,
) -> None:
    # Given a gateway on the module's broker (gauges every 2 s) and the analytics submitted
    # to the standalone cluster as the docs say
    gateway = GatewayProcess(
        tmp_path / "gateway", own_broker.bootstrap, env={"KQS_GAUGE_INTERVAL_S": "2"}
    )
    gateway.start()
    data_dir = tmp_path / "analytics"
    driver = SubmittedAnalytics(
        application_dir(tmp_path),
        cluster.master_url,
        jars.fetch(),
        [
            "--bootstrap", own_broker.bootstrap, "--data-dir", str(data_dir),
            "--trigger-seconds", "1", "--file-trigger-seconds", "2",
        ],
        tmp_path / "driver.log",
    )  # fmt: skip
    settings = replace(AnalyticsSettings(), bootstrap=own_broker.bootstrap, data_dir=str(data_dir))
    traffic: Traffic | None = None
    try:
        driver.start()
        # And a known workload through the gateway, then a steady stream
        workload = Workload(sends=23, receives=17, deletes=11, empty_receives=3, dead_lettered=4)
        result = run_workload(json_client(gateway.endpoint), workload, prefix="cluster")
        traffic = Traffic(gateway.endpoint, f"cluster-traffic-{uuid.uuid4().hex[:8]}")
        traffic.thread.start()
        queues = {result.main, result.source, result.dlq, traffic.url.rsplit("/", 1)[1]}
        driver.wait_for_batches(1)

        # When the driver is SIGKILLed mid-stream and resubmitted, several times
        for _ in range(CRASHES):
            driver.kill()
            driver.start()
            driver.wait_for_batches(1)
        # and the gateway and then the broker restart under the running jobs
        gateway.terminate()
        gateway.start()
        driver.wait_for_more_batches(AFTER_RESTART)
        own_broker.stop()
        own_broker.start()
        driver.wait_for_more_batches(AFTER_RESTART)
        rounds_before_end = traffic.rounds
        traffic.stop.set()
        traffic.thread.join(timeout=30)
        assert rounds_before_end > 0, "no traffic went through"
        gateway.terminate()  # every event it took is in Kafka
        clock = publish_event_stamped_at(own_broker.bootstrap, int(time.time() * 1000) + 180_000)

        # Then the Parquet outputs hold every window of the events, exactly once
        events = [
            e for e in oracle.read_topic(own_broker.bootstrap, EVENTS_TOPIC)
            if e.get("queue") in queues
        ]  # fmt: skip
        expected = oracle.expected_metrics(events)
        deadline = time.monotonic() + WAIT_S
        while True:
            rows = parquet_metrics(spark, settings.metrics_path, queues)
            if {metric_key(r) for r in rows} >= set(expected) or time.monotonic() > deadline:
                break
            assert driver.running(), driver.lines()[-4000:]
            time.sleep(2)
        written = Counter(metric_key(r) for r in rows)
        assert {k: n for k, n in written.items() if n != 1} == {}, "windows written twice"
        assert set(written) == set(expected)
        from_files = {metric_key(r): tuple(getattr(r, s) for s in STATS) for r in rows}
        assert from_files == {k: v.as_tuple() for k, v in expected.items()}

        # And the Kafka outputs, latest record per window, hold the same values
        latest = oracle.latest_per_window(
            oracle.read_topic(own_broker.bootstrap, settings.metrics_topic), "queue", "metric"
        )
        from_kafka = {
            key: tuple(record[s] for s in STATS)
            for key, record in latest.items()
            if key[0] in queues
        }
        assert from_kafka == from_files

        # And the DLQ analytics count every move once
        moves = oracle.expected_dlq_arrivals(events)
        assert sum(moves.values()) == workload.dead_lettered
        dlq_rows = spark.read.parquet(settings.dlq_path).where(F.col("dlq").isin(*queues))
        dlq_files: dict[oracle.DlqKey, int] = {}
        for row in dlq_rows.collect():
            key = (row.dlq, row.source_queue, int(row.window_start.timestamp() * 1000))
            assert key not in dlq_files, f"DLQ window {key} written twice"
            dlq_files[key] = row.arrivals
        assert dict(dlq_files) == moves
        dlq_latest = oracle.latest_per_window(
            oracle.read_topic(own_broker.bootstrap, settings.dlq_topic), "dlq", "source_queue"
        )
        assert {k: r["arrivals"] for k, r in dlq_latest.items() if k[0] in queues} == moves

        # And the known workload's counts are the client's
        totals: Counter[tuple[str, str]] = Counter()
        for (queue, metric, _), stats in from_files.items():
            totals[(queue, metric)] += int(stats[0])
        for queue in (result.main, result.source):
            for kind, metric in oracle.COUNT_METRICS.items():
                if kind != "moved_to_dlq":
                    assert totals[(queue, metric)] == result.expected[queue][kind], (queue, kind)
        assert totals[(result.source, "NumberOfMessagesMovedToDLQ")] == workload.dead_lettered

        # And the aggregation keeps no state for the closed windows: once a batch has run
        # past the watermark, what is left is the clock event's own open window
        open_rows = len(oracle.expected_metrics([clock]))
        eventually(
            lambda: driver.state_rows("metrics-kafka") == open_rows or None,
            f"metrics-kafka's state down to the open window's {open_rows} rows",
            WAIT_S,
        )

        # And local[2] over the same events writes the same rows
        local = replace(
            settings,
            data_dir=str(tmp_path / "local"),
            metrics_topic=f"__kqs_metrics_local_{uuid.uuid4().hex[:8]}",
            dlq_topic=f"__kqs_dlq_analytics_local_{uuid.uuid4().hex[:8]}",
        )
        jobs.run_available_now(spark, local)
        columns = ("queue", "metric", "window_start", "window_end", "average", *STATS)
        on_cluster = {tuple(r[c] for c in columns) for r in rows}
        in_local = {
            tuple(r[c] for c in columns) for r in parquet_metrics(spark, local.metrics_path, queues)
        }
        assert in_local == on_cluster
    finally:
        if traffic is not None:
            traffic.stop.set()
        if driver.running():
            driver.kill()
        gateway.stop()
