"""`GET /metrics`: the gateway's numbers in the Prometheus text exposition format 0.0.4.

Request counters and latency histograms are kept here as the requests are answered
(`RequestMetrics.observe`, called by `gateway/http/pipeline.py`); everything else is read when scraped
(`Snapshot`): the queues' exact Approximate* counters, the event publisher's counters, and
the latest librdkafka statistics of both producers. Rendering is a pure function, so the
format is tested without a server. The metric list is in `docs/ARCHITECTURE.md`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from topology.producer_stats import ProducerStatistics

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

Labels = tuple[tuple[str, str], ...]


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

    def cumulative(self) -> list[int]:
        out, running = [], 0
        for count in self.counts:
            running += count
            out.append(running)
        return out


class RequestMetrics:
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


def render(requests: RequestMetrics, snapshot: Snapshot) -> str:
    out = _Exposition()
    out.family(
        "kqs_requests_total",
        "SQS requests answered, by action, protocol and outcome (ok or the SQS error code).",
        (
            ({"action": a, "protocol": p, "outcome": o}, n)
            for (a, p, o), n in sorted(requests.requests.items())
        ),
    )
    out.histogram(
        "kqs_request_duration_seconds",
        "Time to answer an SQS request, by action; long polls (long_poll=true) apart.",
        (
            ({"action": action, "long_poll": "true" if long_poll else "false"}, histogram)
            for (action, long_poll), histogram in sorted(
                requests.durations.items(), key=lambda item: item[0]
            )
        ),
    )
    queues = sorted(snapshot.queues, key=lambda q: (q.account, q.queue, q.region))
    out.family(
        "kqs_queue_messages",
        "Messages in each queue by state (the exact ApproximateNumberOfMessages* counters).",
        (
            ({"account": q.account, "queue": q.queue, "region": q.region, "state": state}, value)
            for q in queues
            for state, value in (
                ("visible", q.visible),
                ("not_visible", q.not_visible),
                ("delayed", q.delayed),
            )
        ),
        kind="gauge",
    )
    out.family(
        "kqs_queue_oldest_message_age_seconds",
        "Age of the oldest message in each queue (ApproximateAgeOfOldestMessage).",
        (
            ({"account": q.account, "queue": q.queue, "region": q.region}, q.oldest_age_s)
            for q in queues
        ),
        kind="gauge",
    )
    out.family(
        "kqs_events_published_total",
        "Analytics events acknowledged by Kafka (__kqs_events).",
        [({}, snapshot.events_published)],
    )
    out.family(
        "kqs_events_dropped_total",
        "Analytics events dropped: buffer full, or not delivered in time.",
        (({"reason": r}, n) for r, n in sorted(snapshot.events_dropped.items())),
    )
    out.family(
        "kqs_events_buffered",
        "Analytics events waiting for Kafka.",
        [({}, snapshot.events_buffered)],
        kind="gauge",
    )
    out.family(
        "kqs_events_errors_total",
        "Analytics events that could not be built (a bug; logged).",
        [({}, snapshot.events_errors)],
    )
    _producer_families(out, snapshot.producers)
    out.family(
        "kqs_lease_changelog_records_total",
        "Records produced to the lease changelog (__kqs_leases).",
        [({}, snapshot.changelog_records)],
    )
    out.family(
        "kqs_lease_changelog_failures_total",
        "Lease changelog records Kafka did not acknowledge.",
        [({}, snapshot.changelog_failures)],
    )
    out.family(
        "kqs_lease_changelog_pending",
        "Lease changelog records not acknowledged by Kafka yet (the changelog's lag).",
        [({}, snapshot.changelog_pending)],
        kind="gauge",
    )
    out.family(
        "kqs_lease_store_syncs_total",
        "fsyncs of the lease store made for deletes and visibility changes (group commit).",
        [({}, snapshot.lease_syncs)],
    )
    out.family(
        "kqs_queue_segment_syncs_total",
        "fsyncs of the embedded broker's queue-topic segments (and their directories) made by "
        "the gateway before acknowledging sends; 0 where the broker syncs them.",
        [({}, snapshot.segment_syncs)],
    )
    out.family(
        "kqs_lease_store_sync_waiters_total",
        "Requests (deletes, visibility changes, their batches) that waited for a lease-store fsync.",
        [({}, snapshot.lease_sync_waiters)],
    )
    out.family(
        "kqs_long_polls_parked",
        "ReceiveMessage calls waiting for a message now (long polls).",
        [({}, snapshot.long_polls_parked)],
        kind="gauge",
    )
    out.family(
        "kqs_partitions_served",
        "Queue partitions whose lease state this gateway serves now (all, with one gateway).",
        [({}, snapshot.partitions_served)],
        kind="gauge",
    )
    return out.text()


def _producer_families(out: _Exposition, producers: Mapping[str, ProducerStatistics]) -> None:
    names = sorted(producers)
    fields = (
        ("queue_messages", "gauge", "Records in the producer's local queue, not yet acknowledged."),
        ("queue_bytes", "gauge", "Bytes in the producer's local queue."),
        ("requests_sent_total", "counter", "Requests sent to brokers."),
        ("bytes_sent_total", "counter", "Bytes sent to brokers."),
        ("responses_received_total", "counter", "Responses received from brokers."),
        ("bytes_received_total", "counter", "Bytes received from brokers."),
        ("messages_sent_total", "counter", "Records sent to brokers."),
    )
    attribute = {
        "queue_messages": "queue_messages",
        "queue_bytes": "queue_bytes",
        "requests_sent_total": "requests_sent",
        "bytes_sent_total": "bytes_sent",
        "responses_received_total": "responses_received",
        "bytes_received_total": "bytes_received",
        "messages_sent_total": "messages_sent",
    }
    for suffix, kind, help_text in fields:
        out.family(
            f"kqs_kafka_producer_{suffix}",
            help_text + " From librdkafka statistics.",
            (({"producer": n}, getattr(producers[n], attribute[suffix])) for n in names),
            kind=kind,
        )
    out.family(
        "kqs_kafka_producer_broker_rtt_avg_seconds",
        "Average broker round-trip time over the last statistics interval.",
        (
            ({"producer": n, "broker": broker}, rtt)
            for n in names
            for broker, rtt in sorted(producers[n].broker_rtt_avg_s.items())
        ),
        kind="gauge",
    )


class _Exposition:
    def __init__(self) -> None:
        self._lines: list[str] = []

    def family(
        self,
        name: str,
        help_text: str,
        samples: Iterable[tuple[Mapping[str, str], float]],
        kind: str = "counter",
    ) -> None:
        self._header(name, kind, help_text)
        for labels, value in samples:
            self._sample(name, labels, value)

    def histogram(
        self,
        name: str,
        help_text: str,
        series: Iterable[tuple[Mapping[str, str], Histogram]],
    ) -> None:
        self._header(name, "histogram", help_text)
        for labels, histogram in series:
            for bound, count in zip(histogram.buckets, histogram.cumulative(), strict=True):
                self._sample(f"{name}_bucket", {**labels, "le": _number(bound)}, count)
            self._sample(f"{name}_bucket", {**labels, "le": "+Inf"}, histogram.total)
            self._sample(f"{name}_sum", labels, histogram.sum_s)
            self._sample(f"{name}_count", labels, histogram.total)

    def text(self) -> str:
        return "\n".join(self._lines) + "\n"

    def _header(self, name: str, kind: str, help_text: str) -> None:
        self._lines.append(f"# HELP {name} {_escape_help(help_text)}")
        self._lines.append(f"# TYPE {name} {kind}")

    def _sample(self, name: str, labels: Mapping[str, str], value: float) -> None:
        if labels:
            inner = ",".join(f'{k}="{_escape_label(v)}"' for k, v in labels.items())
            self._lines.append(f"{name}{{{inner}}} {_number(value)}")
        else:
            self._lines.append(f"{name} {_number(value)}")


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _number(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    return repr(float(value))
