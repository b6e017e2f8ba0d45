"""`/metrics` rendering without a server: the exposition is well formed, histograms are
cumulative, labels are escaped, each gateway's registry is its own, and librdkafka statistics
are read."""

from __future__ import annotations

import json

import pytest

from gateway.observability.metrics import (
    DURATION_BUCKETS_S,
    GatewayMetrics,
    QueueGauge,
    Snapshot,
)
from tests.support.prometheus_text import parse
from topology.producer_stats import (
    ProducerStatistics,
    StatisticsHolder,
    parse_statistics,
    without_topics,
)


def test_request_counts_and_durations_render_by_action_protocol_and_outcome() -> None:
    # Given three answered requests, one a long poll and one an error
    metrics = GatewayMetrics(Snapshot)
    metrics.requests.observe("SendMessage", "json", "ok", 0.004)
    metrics.requests.observe("SendMessage", "json", "InvalidParameterValue", 0.0005)
    metrics.requests.observe("ReceiveMessage", "query", "ok", 19.5, long_poll=True)

    # When rendered and read back
    exposition = parse(metrics.exposition().decode())

    # Then the counters are per (action, protocol, outcome)
    assert exposition.types["kqs_requests_total"] == "counter"
    assert (
        exposition.value("kqs_requests_total", action="SendMessage", protocol="json", outcome="ok")
        == 1
    )
    assert (
        exposition.value(
            "kqs_requests_total",
            action="SendMessage",
            protocol="json",
            outcome="InvalidParameterValue",
        )
        == 1
    )
    # And the histograms are cumulative, end in +Inf = count, and keep long polls apart
    assert exposition.types["kqs_request_duration_seconds"] == "histogram"
    send = {"action": "SendMessage", "long_poll": "false"}
    buckets = [
        exposition.value("kqs_request_duration_seconds_bucket", **send, le=repr(bound))
        for bound in DURATION_BUCKETS_S
    ]
    assert buckets[0] == 1  # 0.5 ms <= 1 ms
    assert buckets[DURATION_BUCKETS_S.index(0.005)] == 2
    assert buckets == sorted(buckets)
    assert exposition.value("kqs_request_duration_seconds_bucket", **send, le="+Inf") == 2
    assert exposition.value("kqs_request_duration_seconds_count", **send) == 2
    assert exposition.value("kqs_request_duration_seconds_sum", **send) == pytest.approx(0.0045)
    poll = {"action": "ReceiveMessage", "long_poll": "true"}
    assert exposition.value("kqs_request_duration_seconds_bucket", **poll, le="10.0") == 0
    assert exposition.value("kqs_request_duration_seconds_bucket", **poll, le="20.0") == 1


def test_queue_gauges_event_counters_and_producer_statistics_render() -> None:
    # Given a snapshot with a queue whose name needs escaping in a label
    snapshot = Snapshot(
        queues=[QueueGauge("000000000000", 'odd"name\\', 3, 2, 1, 42, "eu-west-1")],
        events_published=10,
        events_dropped={"buffer_full": 4, "delivery_failed": 1},
        events_buffered=5,
        producers={
            "messages": ProducerStatistics(
                queue_messages=7, bytes_sent=1000, broker_rtt_avg_s={"b:9092/1": 0.002}
            )
        },
        changelog_records=9,
    )

    # When rendered and read back
    exposition = parse(GatewayMetrics(lambda: snapshot).exposition().decode())

    # Then
    queue = {"account": "000000000000", "queue": 'odd"name\\', "region": "eu-west-1"}
    assert exposition.value("kqs_queue_messages", **queue, state="visible") == 3
    assert exposition.value("kqs_queue_messages", **queue, state="not_visible") == 2
    assert exposition.value("kqs_queue_messages", **queue, state="delayed") == 1
    assert exposition.value("kqs_queue_oldest_message_age_seconds", **queue) == 42
    assert exposition.types["kqs_queue_messages"] == "gauge"
    assert exposition.value("kqs_events_published_total") == 10
    assert exposition.value("kqs_events_dropped_total", reason="buffer_full") == 4
    assert exposition.value("kqs_events_dropped_total", reason="delivery_failed") == 1
    assert exposition.value("kqs_events_buffered") == 5
    assert exposition.value("kqs_kafka_producer_queue_messages", producer="messages") == 7
    assert exposition.value("kqs_kafka_producer_bytes_sent_total", producer="messages") == 1000
    assert (
        exposition.value(
            "kqs_kafka_producer_broker_rtt_avg_seconds", producer="messages", broker="b:9092/1"
        )
        == 0.002
    )
    assert exposition.value("kqs_lease_changelog_records_total") == 9


def test_every_family_is_there_before_anything_happened_and_none_has_created_series() -> None:
    # Given a gateway's metrics before any request, over an empty snapshot
    text = GatewayMetrics(Snapshot).exposition().decode()

    # When read back
    exposition = parse(text)

    # Then every family is announced, with its type, and the library adds no `_created`
    # series (the exposition had none before it)
    assert exposition.types["kqs_requests_total"] == "counter"
    assert exposition.types["kqs_request_duration_seconds"] == "histogram"
    assert exposition.types["kqs_queue_messages"] == "gauge"
    assert exposition.types["kqs_kafka_producer_bytes_sent_total"] == "counter"
    assert exposition.types["kqs_kafka_producer_broker_rtt_avg_seconds"] == "gauge"
    assert len(exposition.types) == 24
    assert "_created" not in text
    assert exposition.value("kqs_partitions_served") == 0


def test_two_gateways_in_one_process_count_apart_and_read_their_own_snapshot() -> None:
    # Given two gateways' metrics in one process, each over a snapshot of its own
    read = {"a": 0}

    def snapshot_a() -> Snapshot:
        read["a"] += 1
        return Snapshot(partitions_served=4)

    a = GatewayMetrics(snapshot_a)
    b = GatewayMetrics(lambda: Snapshot(partitions_served=2))

    # When each answers requests of its own
    a.requests.observe("SendMessage", "json", "ok", 0.002)
    a.requests.observe("SendMessage", "json", "ok", 0.002)
    b.requests.observe("SendMessage", "json", "ok", 0.002)

    # Then each counts its own, and reads its snapshot once per scrape, not before
    assert read["a"] == 0
    first = parse(a.exposition().decode())
    second = parse(b.exposition().decode())
    assert read["a"] == 1
    send = {"action": "SendMessage", "protocol": "json", "outcome": "ok"}
    assert first.value("kqs_requests_total", **send) == 2
    assert second.value("kqs_requests_total", **send) == 1
    assert first.value("kqs_partitions_served") == 4
    assert second.value("kqs_partitions_served") == 2


# What the reports below say, as read.
REPORTED = ProducerStatistics(
    queue_messages=3,
    queue_bytes=300,
    requests_sent=20,
    bytes_sent=4000,
    responses_received=19,
    bytes_received=900,
    messages_sent=55,
    broker_rtt_avg_s={"127.0.0.1:9092/1": 0.0015},
)


def test_librdkafka_statistics_are_read_and_bootstrap_entries_skipped() -> None:
    # Given a statistics document shaped as librdkafka's STATISTICS.md describes
    raw = json.dumps(
        {
            "name": "rdkafka#producer-1",
            "type": "producer",
            "msg_cnt": 3,
            "msg_size": 300,
            "tx": 20,
            "tx_bytes": 4000,
            "rx": 19,
            "rx_bytes": 900,
            "txmsgs": 55,
            "brokers": {
                "127.0.0.1:9092/bootstrap": {"nodeid": -1, "rtt": {"avg": 0}},
                "127.0.0.1:9092/1": {"nodeid": 1, "rtt": {"avg": 1500, "min": 900}},
            },
        }
    )
    # When the producer's stats callback is called with it
    holder = StatisticsHolder()
    holder.on_statistics(raw)
    # Then
    assert holder.latest == REPORTED
    assert parse_statistics("{}") == ProducerStatistics()


# As librdkafka 2.x lays a producer's report out: brokers, topics (one entry per topic and
# partition it knows), eos, then the totals; the same spacing.
LIBRDKAFKA_REPORT = (
    '{ "name": "rdkafka#producer-1", "type": "producer", "msg_cnt":3, "msg_size":300, '
    '"brokers":{ "127.0.0.1:9092/1": { "nodeid":1, "tx":7, "rtt": { "avg":1500 } } } , '
    '"topics":{ "q1": { "topic":"q1", "partitions":{ "0": { "partition":0, "txmsgs":5 } } } } , '
    '"eos": { "idemp_state": "Assigned" }, "tx":20, "tx_bytes":4000, "rx":19, '
    '"rx_bytes":900, "txmsgs":55, "txmsg_bytes":0}'
)


def test_a_report_is_read_without_its_topics() -> None:
    # Given a report laid out as librdkafka writes it
    # When the topics are cut out, and the report parsed
    cut = without_topics(LIBRDKAFKA_REPORT)
    parsed = parse_statistics(LIBRDKAFKA_REPORT)

    # Then the rest is a JSON document without them, and every figure read is the report's
    assert "topics" not in json.loads(cut)
    assert json.loads(cut)["tx"] == 20
    assert parsed == REPORTED


def test_a_report_laid_out_otherwise_is_read_whole() -> None:
    # Given reports whose totals come before the topics, or with a topic named as a key
    # that follows them (the cut would end inside the topics, and not parse)
    totals_first = json.dumps({"tx": 20, "topics": {"q1": {"tx": 1}}, "msg_cnt": 3})
    odd = json.dumps({"topics": {"eos": {"partitions": {}}}, "eos": {}, "tx": 20})

    # Then they are read whole, with the same figures
    assert parse_statistics(totals_first).requests_sent == 20
    assert parse_statistics(totals_first).queue_messages == 3
    assert parse_statistics(odd).requests_sent == 20
