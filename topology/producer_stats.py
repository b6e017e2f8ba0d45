"""librdkafka statistics of a producer, kept as the latest snapshot for `/metrics`.

With `statistics.interval.ms` set, librdkafka calls `stats_cb` with a JSON document (see
librdkafka's STATISTICS.md) from `poll()`, i.e. on the producer's poll thread. The callback
parses the few numbers worth exporting and swaps in one immutable snapshot, so readers on
the event loop never see half an update.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("kqs.producer")

STATISTICS_INTERVAL_MS = 5_000


@dataclass(frozen=True, slots=True)
class ProducerStatistics:
    queue_messages: int = 0  # msg_cnt: in the local queue, not yet acknowledged
    queue_bytes: int = 0  # msg_size
    requests_sent: int = 0  # tx: requests sent to brokers
    bytes_sent: int = 0  # tx_bytes
    responses_received: int = 0  # rx
    bytes_received: int = 0  # rx_bytes
    messages_sent: int = 0  # txmsgs: messages transmitted (produced) to brokers
    # Average round-trip time of each broker (by "host:port/id") over the last interval, in s.
    broker_rtt_avg_s: dict[str, float] = field(default_factory=dict)


# The top-level keys librdkafka writes after "topics" (STATISTICS.md; librdkafka 2.x writes
# the totals, "tx" first, last).
_AFTER_TOPICS = ('"cgrp":', '"eos":', '"tx":')
_TAIL_CHARS = 65_536


def without_topics(raw: str) -> str:
    """The statistics document without its "topics" object, which nothing here reads: an
    entry per topic and partition the producer knows, megabytes a report with thousands of
    queues (its parse was 5-12 % of the gateway's GIL time at seed 004's 10,000 queues,
    bench/results/archive/profile-journal.md, 2026-11-27 (7d628ec)). The whole document when the object's end is not where expected."""
    start = raw.find('"topics":')
    if start < 0:
        return raw
    # What follows the topics is short (a producer's idempotence state and the totals).
    tail = max(start + 1, len(raw) - _TAIL_CHARS)
    ends = [found for key in _AFTER_TOPICS if (found := raw.find(key, tail)) >= 0]
    return raw[:start] + raw[min(ends) :] if ends else raw


def parse_statistics(raw: str | bytes) -> ProducerStatistics:
    text = raw.decode() if isinstance(raw, bytes) else raw
    try:
        doc: dict[str, Any] = json.loads(without_topics(text))
    except ValueError:
        doc = json.loads(text)  # laid out otherwise than expected: read it whole
    rtt: dict[str, float] = {}
    for name, broker in (doc.get("brokers") or {}).items():
        if int(broker.get("nodeid", -1)) < 0:
            continue  # the bootstrap entry, not a broker of the cluster
        rtt[name] = float((broker.get("rtt") or {}).get("avg", 0)) / 1_000_000
    return ProducerStatistics(
        queue_messages=int(doc.get("msg_cnt", 0)),
        queue_bytes=int(doc.get("msg_size", 0)),
        requests_sent=int(doc.get("tx", 0)),
        bytes_sent=int(doc.get("tx_bytes", 0)),
        responses_received=int(doc.get("rx", 0)),
        bytes_received=int(doc.get("rx_bytes", 0)),
        messages_sent=int(doc.get("txmsgs", 0)),
        broker_rtt_avg_s=rtt,
    )


class StatisticsHolder:
    """The `stats_cb` of a producer and the latest snapshot it delivered."""

    def __init__(self) -> None:
        self.latest = ProducerStatistics()

    def config(self, interval_ms: int = STATISTICS_INTERVAL_MS) -> dict[str, Any]:
        """Producer settings that make librdkafka report here every `interval_ms`."""
        return {"statistics.interval.ms": interval_ms, "stats_cb": self.on_statistics}

    def on_statistics(self, raw: str) -> None:
        try:
            self.latest = parse_statistics(raw)
        except (ValueError, TypeError, AttributeError) as exc:
            log.warning("unreadable producer statistics", extra={"error": str(exc)})


class CombinedStatistics:
    """The statistics of several producers (the shards of one `AsyncProducer`), summed."""

    def __init__(self) -> None:
        self._holders: list[StatisticsHolder] = []

    def add(self, holder: StatisticsHolder) -> None:
        self._holders.append(holder)

    @property
    def latest(self) -> ProducerStatistics:
        if len(self._holders) == 1:
            return self._holders[0].latest
        snapshots = [holder.latest for holder in self._holders]
        rtt: dict[str, list[float]] = {}
        for snapshot in snapshots:
            for broker, seconds in snapshot.broker_rtt_avg_s.items():
                rtt.setdefault(broker, []).append(seconds)
        return ProducerStatistics(
            queue_messages=sum(s.queue_messages for s in snapshots),
            queue_bytes=sum(s.queue_bytes for s in snapshots),
            requests_sent=sum(s.requests_sent for s in snapshots),
            bytes_sent=sum(s.bytes_sent for s in snapshots),
            responses_received=sum(s.responses_received for s in snapshots),
            bytes_received=sum(s.bytes_received for s in snapshots),
            messages_sent=sum(s.messages_sent for s in snapshots),
            # The shards share the brokers: their mean round trip.
            broker_rtt_avg_s={b: sum(v) / len(v) for b, v in rtt.items()},
        )
