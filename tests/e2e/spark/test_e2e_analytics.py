"""Accuracy: a known workload through the real gateway; the Spark jobs count it exactly.

The workload (tests/support/workload.py: N sends incl. batches, M receives, K deletes, E empty
receives, D dead-lettered) runs through `kqs serve` with boto3; the gateway publishes its
events to `__kqs_events` on the real broker; the four streaming queries of `spark_streaming`
run once over everything there (availableNow) and their Kafka and Parquet outputs must add up
to the workload's numbers, exactly.

The Parquet sinks only get closed windows, i.e. windows whose end the watermark has passed.
With a watermark of 0 s that happens once any event is stamped in a later minute, so before
running the jobs the test publishes one (as a Kafka-native producer would) instead of waiting
up to a minute for the gateway's periodic `gauges` of the next minute.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import defaultdict
from dataclasses import replace
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from spark_streaming import jobs
from spark_streaming.settings import EVENTS_TOPIC, AnalyticsSettings
from tests.support.events import events_published, read_events
from tests.support.harness import ACCOUNT_ID, REGION, GatewayProcess
from tests.support.workload import Workload, run_workload
from topology import event_format

WAIT_S = 150.0
COUNT_METRICS = {
    "sent": "NumberOfMessagesSent",
    "received": "NumberOfMessagesReceived",
    "deleted": "NumberOfMessagesDeleted",
    "empty_receive": "NumberOfEmptyReceives",
}


def read_topic(bootstrap: str, topic: str) -> list[dict[str, Any]]:
    """Every record value (JSON) of `topic`, partition by partition, up to its current end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex}"})
    values: list[dict[str, Any]] = []
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        for partition in sorted(partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), 10)
            consumer.assign([TopicPartition(topic, partition, low)])
            offset, deadline = low, time.monotonic() + WAIT_S
            while offset < high:
                assert time.monotonic() < deadline, f"{topic} not readable"
                msg = consumer.poll(1.0)
                if msg is None:
                    continue
                assert msg.error() is None, msg.error()
                offset = (msg.offset() or 0) + 1
                values.append(json.loads(msg.value() or b"null"))
    finally:
        consumer.close()
    return values


def publish_an_event_stamped_at(bootstrap: str, ts_ms: int) -> None:
    """A Kafka-native producer's `sent` event of a queue of its own, stamped `ts_ms`: to the
    jobs it is what the gateway's first event of a later minute would be (it moves the
    watermark past the windows before it), without waiting for the clock to get there."""
    queue = f"clock-{uuid.uuid4().hex[:8]}"
    event = event_format.sent(ts_ms, ACCOUNT_ID, queue, [("m-clock", 1)], region=REGION)
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(EVENTS_TOPIC, json.dumps(event).encode(), f"{ACCOUNT_ID}/{queue}".encode())
    assert producer.flush(WAIT_S) == 0, "the later event was not acknowledged"


def latest(records: list[dict[str, Any]], *key: str) -> list[dict[str, Any]]:
    """The last record per `key` fields + window_start: update mode re-emits changed windows."""
    last: dict[tuple[Any, ...], dict[str, Any]] = {}
    for record in records:
        last[(*(record[k] for k in key), record["window_start"])] = record
    return list(last.values())


@pytest.mark.parametrize("protocol", ["json"], indirect=True)
def test_spark_metrics_and_dlq_analytics_equal_a_known_workload_exactly(
    spark: SparkSession, sqs: Any, gateway: GatewayProcess, kafka_bootstrap: str, tmp_path: Any
) -> None:
    # Given N=23 sends, M=17 receives, K=11 deletes, E=3 empty receives, D=4 dead-lettered,
    # driven through the gateway, and all their events in Kafka
    workload = Workload(sends=23, receives=17, deletes=11, empty_receives=3, dead_lettered=4)
    result = run_workload(sqs, workload, prefix="spark")
    # and, into a DLQ of their own, three messages with attributes (color red, red, blue)
    colored_dlq = dead_letter_with_attributes(sqs, ["red", "red", "blue"])
    events_published(gateway.endpoint)
    next_minute_ms = (time.time_ns() // 60_000_000_000 + 1) * 60_000
    publish_an_event_stamped_at(kafka_bootstrap, next_minute_ms)
    tag = uuid.uuid4().hex[:8]
    settings = replace(
        AnalyticsSettings(),
        bootstrap=kafka_bootstrap,
        data_dir=str(tmp_path),
        watermark_seconds=0,
        # Outputs of its own, so other tests reading the real topics see nothing of this run.
        metrics_topic=f"__kqs_metrics_test_{tag}",
        dlq_topic=f"__kqs_dlq_analytics_test_{tag}",
    )

    # When the analytics process everything in `__kqs_events`
    jobs.run_available_now(spark, settings)

    # Then the per-queue count metrics, summed over their windows, equal the workload's
    # counts, in the Kafka topic (latest record per window) and in the Parquet files
    expected: dict[tuple[str, str], float] = defaultdict(float)
    for queue, counts in result.expected.items():
        for kind, count in counts.items():
            if kind in COUNT_METRICS:
                expected[(queue, COUNT_METRICS[kind])] += count
    expected[(result.source, "NumberOfMessagesMovedToDLQ")] = workload.dead_lettered
    assert expected[(result.main, "NumberOfMessagesSent")] == workload.sends
    assert expected[(result.main, "NumberOfMessagesDeleted")] == workload.deletes
    ours = {result.main, result.source, result.dlq}
    metrics = [
        r for r in latest(read_topic(kafka_bootstrap, settings.metrics_topic), "queue", "metric")
        if r["queue"] in ours
    ]  # fmt: skip
    from_kafka: dict[tuple[str, str], float] = defaultdict(float)
    samples: dict[tuple[str, str], int] = defaultdict(int)
    for record in metrics:
        from_kafka[(record["queue"], record["metric"])] += record["sum"]
        samples[(record["queue"], record["metric"])] += record["sample_count"]
    assert {k: v for k, v in from_kafka.items() if k in expected} == expected
    assert {k for k in from_kafka if k[1].startswith("NumberOf")} == set(expected)

    parquet = (
        spark.read.parquet(settings.metrics_path)
        .where(F.col("queue").isin(*ours))
        .groupBy("queue", "metric")
        .agg(F.sum("sum").alias("sum"), F.count("*").alias("windows"))
        .collect()
    )
    from_files = {(r.queue, r.metric): r.sum for r in parquet if r.metric.startswith("NumberOf")}
    assert from_files == expected

    # And SentMessageSize has one sample per message sent, summing their sizes
    for queue, sizes in result.sizes.items():
        assert samples[(queue, "SentMessageSize")] == len(sizes)
        assert from_kafka[(queue, "SentMessageSize")] == sum(sizes.values())

    # And the DLQ analytics count the D moves from the source queue, with the receive counts
    # and ages the gateway reported for them
    moves = [
        e for e in read_events(kafka_bootstrap, f"/{ACCOUNT_ID}/{result.dlq}")
        if e["type"] == "moved_to_dlq"
    ]  # fmt: skip
    dlq = [
        r for r in latest(read_topic(kafka_bootstrap, settings.dlq_topic), "dlq", "source_queue")
        if r["dlq"] == result.dlq
    ]  # fmt: skip
    assert {r["source_queue"] for r in dlq} == {result.source}
    assert sum(r["arrivals"] for r in dlq) == workload.dead_lettered == len(moves)
    assert sum(r["receive_count"]["sample_count"] for r in dlq) == workload.dead_lettered
    assert sum(r["receive_count"]["sum"] for r in dlq) == sum(e["receive_count"] for e in moves)
    assert min(r["receive_count"]["minimum"] for r in dlq) >= 1
    assert sum(r["age_at_move_s"]["sum"] for r in dlq) == pytest.approx(
        sum(e["age_ms"] for e in moves) / 1000.0
    )
    dlq_files = spark.read.parquet(settings.dlq_path).where(F.col("dlq") == result.dlq).collect()
    assert sum(r.arrivals for r in dlq_files) == workload.dead_lettered
    assert {r.source_queue for r in dlq_files} == {result.source}

    # And the attribute values of dead-lettered messages are counted
    colored = [
        r for r in latest(read_topic(kafka_bootstrap, settings.dlq_topic), "dlq", "source_queue")
        if r["dlq"] == colored_dlq
    ]  # fmt: skip
    top: dict[tuple[str, str], int] = defaultdict(int)
    for record in colored:
        for entry in record["top_attributes"]:
            top[(entry["name"], entry["value"])] += entry["count"]
    assert dict(top) == {("color", "red"): 2, ("color", "blue"): 1}


def dead_letter_with_attributes(sqs: Any, colors: list[str]) -> str:
    """Send one message per color (attribute `color`) to a fresh queue whose RedrivePolicy
    moves a message after one receive, receive them all, make them visible again and
    receive once more, which moves them to a fresh DLQ; returns the DLQ's name."""
    tag = uuid.uuid4().hex[:10]
    dlq, source = f"spark-colors-dlq-{tag}", f"spark-colors-{tag}"
    sqs.create_queue(QueueName=dlq)
    redrive = {
        "deadLetterTargetArn": f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:{dlq}",
        "maxReceiveCount": 1,
    }
    url = sqs.create_queue(QueueName=source, Attributes={"RedrivePolicy": json.dumps(redrive)})[
        "QueueUrl"
    ]
    for color in colors:
        sqs.send_message(
            QueueUrl=url,
            MessageBody=color,
            MessageAttributes={"color": {"DataType": "String", "StringValue": color}},
        )
    leased: dict[str, str] = {}
    while len(leased) < len(colors):
        for message in sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600, WaitTimeSeconds=1
        ).get("Messages", []):
            leased[message["MessageId"]] = message["ReceiptHandle"]
    for handle in leased.values():
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=0)
    assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0)
    return dlq
