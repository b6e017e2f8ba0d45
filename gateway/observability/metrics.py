"""`GET /metrics`: the gateway's numbers in the Prometheus text exposition format 0.0.4,
written by `prometheus_client`.

Each gateway has a registry of its own (`GatewayMetrics`; never the library's global one), so
several gateways, or tests, in one process keep their series apart. Two collectors feed it.
`RequestMetrics` counts the requests and times them as they are answered
(`RequestMetrics.observe`, called by `gateway/http/pipeline.py`) in plain dicts, and hands
them to the library when scraped: the library's own `Counter` and `Histogram` (a lock per
value, checks on every call) cost 11,000-14,500 more instructions per request, 3 % of a
GetQueueUrl and 2 % of a SendMessage
(bench/results/archive/2026-12-02-metrics-prometheus-client.md). `SnapshotCollector` reads
everything else when scraped (`Snapshot`): the queues' exact Approximate* counters, the event
publisher's counters, and the latest librdkafka statistics of both producers. The metric
list is in `docs/ARCHITECTURE.md`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from topology.producer_stats import ProducerStatistics

# The format `generate_latest` writes, as scrapers were told before the library. Its
# CONTENT_TYPE_LATEST says version=1.0.0 in recent releases (0.26), 0.0.4 in older ones.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# 1 ms to 30 s: a send waits for acks=all (milliseconds), a long poll up to 20 s.
DURATION_BUCKETS_S: tuple[float, ...] = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    20.0,
    30.0,
)


# The buckets' `le` labels, as the library's own histogram writes them.
_LE = tuple(repr(bound) for bound in DURATION_BUCKETS_S)


@dataclass
class Histogram:
    buckets: tuple[float, ...] = DURATION_BUCKETS_S
    counts: list[int] = field(default_factory=lambda: [0] * len(DURATION_BUCKETS_S))
    total: int = 0
    sum_s: float = 0.0

    def observe(self, seconds: float) -> None:
        self.total += 1
        self.sum_s += seconds
        for i, bound in enumerate(self.buckets):
            if seconds <= bound:
                self.counts[i] += 1
                break

    def cumulative(self) -> list[tuple[str, float]]:
        """(le, observations at or under it) for each bucket, "+Inf" last."""
        out: list[tuple[str, float]] = []
        running = 0
        for le, count in zip(_LE, self.counts, strict=True):
            running += count
            out.append((le, running))
        out.append(("+Inf", self.total))
        return out


class RequestMetrics(Collector):
    """SQS requests answered: counts by action, protocol and outcome, and their durations."""

    def __init__(self) -> None:
        self.requests: dict[tuple[str, str, str], int] = defaultdict(int)
        self.durations: dict[tuple[str, bool], Histogram] = {}

    def observe(
        self, action: str, protocol: str, outcome: str, seconds: float, long_poll: bool = False
    ) -> None:
        """One answered request; `outcome` is "ok" or the SQS error code."""
        self.requests[(action, protocol, outcome)] += 1
        histogram = self.durations.get((action, long_poll))
        if histogram is None:
            histogram = self.durations[(action, long_poll)] = Histogram()
        histogram.observe(seconds)

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            "kqs_requests_total",
            "SQS requests answered, by action, protocol and outcome (ok or the SQS error code).",
            labels=("action", "protocol", "outcome"),
        )
        for labels, count in sorted(self.requests.items()):
            requests.add_metric(labels, count)
        yield requests
        durations = HistogramMetricFamily(
            "kqs_request_duration_seconds",
            "Time to answer an SQS request, by action; long polls (long_poll=true) apart.",
            labels=("action", "long_poll"),
        )
        for (action, long_poll), histogram in sorted(self.durations.items()):
            durations.add_metric(
                (action, "true" if long_poll else "false"),
                histogram.cumulative(),
                histogram.sum_s,
            )
        yield durations

    def describe(self) -> Iterator[Metric]:
        # The names, for the registry to refuse a clash.
        return RequestMetrics().collect()


@dataclass(frozen=True, slots=True)
class QueueGauge:
    account: str
    queue: str
    visible: int
    not_visible: int
    delayed: int
    oldest_age_s: int
    region: str  # the same name in two regions is two queues, two series


@dataclass(frozen=True)
class Snapshot:
    """What `/metrics` reads at scrape time, besides the request metrics."""

    queues: list[QueueGauge] = field(default_factory=list)
    events_published: int = 0
    events_dropped: Mapping[str, int] = field(default_factory=dict)
    events_buffered: int = 0
    events_errors: int = 0
    producers: Mapping[str, ProducerStatistics] = field(default_factory=dict)
    changelog_records: int = 0
    changelog_failures: int = 0
    changelog_pending: int = 0
    lease_syncs: int = 0
    segment_syncs: int = 0
    lease_sync_waiters: int = 0
    long_polls_parked: int = 0
    partitions_served: int = 0


class SnapshotCollector(Collector):
    """The families read from a `Snapshot`, taken once per scrape by `read`."""

    def __init__(self, read: Callable[[], Snapshot]) -> None:
        self._read = read

    def collect(self) -> Iterator[Metric]:
        return _families(self._read())

    def describe(self) -> Iterator[Metric]:
        # The names, for the registry to refuse a clash, without reading a snapshot.
        return _families(Snapshot())


class GatewayMetrics:
    """One gateway's `/metrics`: its registry, the request metrics, and the snapshot read at
    scrape time (`read_snapshot`)."""

    def __init__(self, read_snapshot: Callable[[], Snapshot]) -> None:
        self.registry = CollectorRegistry()
        self.requests = RequestMetrics()
        self.registry.register(self.requests)
        self.registry.register(SnapshotCollector(read_snapshot))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def _counter(name: str, help_text: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, help_text, value=value)


def _gauge(name: str, help_text: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, help_text, value=value)


def _families(snapshot: Snapshot) -> Iterator[Metric]:
    queue_labels = ("account", "queue", "region")
    messages = GaugeMetricFamily(
        "kqs_queue_messages",
        "Messages in each queue by state (the exact ApproximateNumberOfMessages* counters).",
        labels=(*queue_labels, "state"),
    )
    oldest = GaugeMetricFamily(
        "kqs_queue_oldest_message_age_seconds",
        "Age of the oldest message in each queue (ApproximateAgeOfOldestMessage).",
        labels=queue_labels,
    )
    for q in sorted(snapshot.queues, key=lambda q: (q.account, q.queue, q.region)):
        where = (q.account, q.queue, q.region)
        messages.add_metric((*where, "visible"), q.visible)
        messages.add_metric((*where, "not_visible"), q.not_visible)
        messages.add_metric((*where, "delayed"), q.delayed)
        oldest.add_metric(where, q.oldest_age_s)
    yield messages
    yield oldest
    yield _counter(
        "kqs_events_published_total",
        "Analytics events acknowledged by Kafka (__kqs_events).",
        snapshot.events_published,
    )
    dropped = CounterMetricFamily(
        "kqs_events_dropped_total",
        "Analytics events dropped: buffer full, or not delivered in time.",
        labels=("reason",),
    )
    for reason, count in sorted(snapshot.events_dropped.items()):
        dropped.add_metric((reason,), count)
    yield dropped
    yield _gauge(
        "kqs_events_buffered", "Analytics events waiting for Kafka.", snapshot.events_buffered
    )
    yield _counter(
        "kqs_events_errors_total",
        "Analytics events that could not be built (a bug; logged).",
        snapshot.events_errors,
    )
    yield from _producer_families(snapshot.producers)
    yield _counter(
        "kqs_lease_changelog_records_total",
        "Records produced to the lease changelog (__kqs_leases).",
        snapshot.changelog_records,
    )
    yield _counter(
        "kqs_lease_changelog_failures_total",
        "Lease changelog records Kafka did not acknowledge.",
        snapshot.changelog_failures,
    )
    yield _gauge(
        "kqs_lease_changelog_pending",
        "Lease changelog records not acknowledged by Kafka yet (the changelog's lag).",
        snapshot.changelog_pending,
    )
    yield _counter(
        "kqs_lease_store_syncs_total",
        "fsyncs of the lease store made for deletes and visibility changes (group commit).",
        snapshot.lease_syncs,
    )
    yield _counter(
        "kqs_queue_segment_syncs_total",
        "fsyncs of the embedded broker's queue-topic segments (and their directories) made by "
        "the gateway before acknowledging sends; 0 where the broker syncs them.",
        snapshot.segment_syncs,
    )
    yield _counter(
        "kqs_lease_store_sync_waiters_total",
        "Requests (deletes, visibility changes, their batches) that waited for a lease-store fsync.",
        snapshot.lease_sync_waiters,
    )
    yield _gauge(
        "kqs_long_polls_parked",
        "ReceiveMessage calls waiting for a message now (long polls).",
        snapshot.long_polls_parked,
    )
    yield _gauge(
        "kqs_partitions_served",
        "Queue partitions whose lease state this gateway serves now (all, with one gateway).",
        snapshot.partitions_served,
    )


# The librdkafka statistics of each producer: (name suffix, type, ProducerStatistics field, help).
_PRODUCER_FIELDS: tuple[tuple[str, str, str, str], ...] = (
    (
        "queue_messages",
        "gauge",
        "queue_messages",
        "Records in the producer's local queue, not yet acknowledged.",
    ),
    ("queue_bytes", "gauge", "queue_bytes", "Bytes in the producer's local queue."),
    ("requests_sent_total", "counter", "requests_sent", "Requests sent to brokers."),
    ("bytes_sent_total", "counter", "bytes_sent", "Bytes sent to brokers."),
    (
        "responses_received_total",
        "counter",
        "responses_received",
        "Responses received from brokers.",
    ),
    ("bytes_received_total", "counter", "bytes_received", "Bytes received from brokers."),
    ("messages_sent_total", "counter", "messages_sent", "Records sent to brokers."),
)


def _producer_families(producers: Mapping[str, ProducerStatistics]) -> Iterator[Metric]:
    names = sorted(producers)
    for suffix, kind, attribute, help_text in _PRODUCER_FIELDS:
        family = (GaugeMetricFamily if kind == "gauge" else CounterMetricFamily)(
            f"kqs_kafka_producer_{suffix}",
            help_text + " From librdkafka statistics.",
            labels=("producer",),
        )
        for name in names:
            family.add_metric((name,), getattr(producers[name], attribute))
        yield family
    rtt = GaugeMetricFamily(
        "kqs_kafka_producer_broker_rtt_avg_seconds",
        "Average broker round-trip time over the last statistics interval.",
        labels=("producer", "broker"),
    )
    for name in names:
        for broker, seconds in sorted(producers[name].broker_rtt_avg_s.items()):
            rtt.add_metric((name, broker), seconds)
    yield rtt
