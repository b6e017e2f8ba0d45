"""The dashboard's bounded in-memory model, and the JSON summary the page draws. No I/O.

Theory of operation. Records are folded in as they are read (`apply_*`), in any order:

* A metric window is kept per (account, queue, metric, window start); a re-emitted window
  (Spark's update mode) replaces the earlier one. Per queue and metric only the latest
  `MAX_WINDOWS` windows are kept; a record older than all of them, once full, is dropped.
* A DLQ window is kept the same way per (account, DLQ, source queue, window start).
* Gauges (the gateway's ~10 s depth samples) are kept per queue, the latest `MAX_GAUGES`.
* `prune(before_ms)` forgets what is older than the page shows (an hour), so a deleted
  queue's cards go away.

`summary(now_ms)` turns the model into what the page draws. Counts become rates per second:
a complete window's sum over its length (60 s), the current window's sum over the time it has
run so far (at least one second), so a rate does not dip while its minute is still filling.
Depth and age are CloudWatch's statistics for them: depth is the window's average, the age of
the oldest message its maximum. The depth series continues past the latest window with the
gauge samples taken after it starts, so it reaches "now" before Spark has closed a minute (and
shows something before any Spark job runs); the current depth is the latest of either.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from dashboard.records import DlqWindow, Gauges, MetricWindow

MAX_WINDOWS = 60
MAX_GAUGES = 60
TOP_ATTRIBUTES = 10

SENT = "NumberOfMessagesSent"
SENT_SIZE = "SentMessageSize"
RECEIVED = "NumberOfMessagesReceived"
DELETED = "NumberOfMessagesDeleted"
EMPTY_RECEIVES = "NumberOfEmptyReceives"
MOVED_TO_DLQ = "NumberOfMessagesMovedToDLQ"
EXPIRED = "NumberOfMessagesExpired"
PURGED = "NumberOfMessagesPurged"
VISIBLE = "ApproximateNumberOfMessagesVisible"
NOT_VISIBLE = "ApproximateNumberOfMessagesNotVisible"
DELAYED = "ApproximateNumberOfMessagesDelayed"
OLDEST_AGE = "ApproximateAgeOfOldestMessage"

# Count metrics, drawn as rates per second (the summary's `<name>_per_s`) and window totals.
COUNTS = {
    SENT: "sent",
    RECEIVED: "received",
    DELETED: "deleted",
    EMPTY_RECEIVES: "empty_receives",
    MOVED_TO_DLQ: "moved_to_dlq",
    EXPIRED: "expired",
    PURGED: "purged",
}
# Gauge metrics: (summary name, the statistic CloudWatch uses for them).
GAUGES = {
    VISIBLE: ("visible", "average"),
    NOT_VISIBLE: ("not_visible", "average"),
    DELAYED: ("delayed", "average"),
    OLDEST_AGE: ("oldest_age_s", "maximum"),
}

QueueKey = tuple[str, str]  # (account, queue)
DlqKey = tuple[str, str, str]  # (account, dlq, source queue)


def _keep_latest(windows: dict[int, Any], start_ms: int, item: Any, limit: int) -> None:
    """Store `item` under `start_ms`, keeping only the `limit` latest starts."""
    if start_ms not in windows and len(windows) >= limit and start_ms < min(windows):
        return
    windows[start_ms] = item
    while len(windows) > limit:
        del windows[min(windows)]


def rate_per_s(total: float, window_start_ms: int, window_end_ms: int, now_ms: int) -> float:
    """Events per second in a window: over its whole length once complete, else so far."""
    end_ms = window_end_ms if now_ms >= window_end_ms else now_ms
    elapsed_ms = max(end_ms - window_start_ms, 1000)
    return total * 1000.0 / elapsed_ms


@dataclass
class _Queue:
    metrics: dict[str, dict[int, MetricWindow]] = field(default_factory=dict)
    gauges: dict[int, Gauges] = field(default_factory=dict)


@dataclass
class DashboardModel:
    queues: dict[QueueKey, _Queue] = field(default_factory=dict)
    dlqs: dict[DlqKey, dict[int, DlqWindow]] = field(default_factory=dict)

    # -- folding records in ---------------------------------------------------------------

    def apply_metric(self, record: MetricWindow) -> None:
        queue = self.queues.setdefault((record.account, record.queue), _Queue())
        windows = queue.metrics.setdefault(record.metric, {})
        _keep_latest(windows, record.window_start_ms, record, MAX_WINDOWS)

    def apply_dlq(self, record: DlqWindow) -> None:
        windows = self.dlqs.setdefault((record.account, record.dlq, record.source_queue), {})
        _keep_latest(windows, record.window_start_ms, record, MAX_WINDOWS)

    def apply_gauges(self, record: Gauges) -> None:
        queue = self.queues.setdefault((record.account, record.queue), _Queue())
        _keep_latest(queue.gauges, record.ts_ms, record, MAX_GAUGES)

    def prune(self, before_ms: int) -> None:
        """Forget windows that ended, and gauge samples taken, before `before_ms`, and the
        queues and DLQ sources left with nothing: a deleted queue leaves the page an hour on."""
        for key, queue in list(self.queues.items()):
            for metric, windows in list(queue.metrics.items()):
                for start in [s for s, w in windows.items() if w.window_end_ms < before_ms]:
                    del windows[start]
                if not windows:
                    del queue.metrics[metric]
            for ts in [ts for ts in queue.gauges if ts < before_ms]:
                del queue.gauges[ts]
            if not queue.metrics and not queue.gauges:
                del self.queues[key]
        for dlq_key, dlq_windows in list(self.dlqs.items()):
            for start in [s for s, w in dlq_windows.items() if w.window_end_ms < before_ms]:
                del dlq_windows[start]
            if not dlq_windows:
                del self.dlqs[dlq_key]

    # -- what the page draws --------------------------------------------------------------

    def summary(self, now_ms: int, limit: int | None = None, search: str = "") -> dict[str, Any]:
        """Every queue and DLQ by name; or, with `limit`, the `limit` busiest queues (and
        DLQs) whose name contains `search` (any case), so a page over 10,000 queues stays
        small: only the cards shown are summarised."""
        # A DLQ's own card counts what arrived in it (its arrivals are not sends).
        arrivals: Counter[QueueKey] = Counter()
        for (account, dlq, _source), windows in self.dlqs.items():
            arrivals[(account, dlq)] += sum(w.arrivals for w in windows.values())
        needle = search.casefold()
        queue_keys = [key for key in self.queues if needle in key[1].casefold()]
        dlq_keys = [
            key for key in self.dlqs if needle in key[1].casefold() or needle in key[2].casefold()
        ]
        if limit is None:
            queue_keys.sort()
            dlq_keys.sort()
        else:
            busy = {k: _activity(self.queues[k], now_ms) for k in queue_keys}
            queue_keys.sort(key=lambda k: (-busy[k], k))
            dlq_keys.sort(key=lambda k: (-sum(w.arrivals for w in self.dlqs[k].values()), k))
            del queue_keys[limit:], dlq_keys[limit:]
        queues = []
        for account, name in queue_keys:
            summary = _queue_summary(account, name, self.queues[(account, name)], now_ms)
            summary["is_dlq"] = (account, name) in arrivals
            summary["totals"]["dlq_arrivals"] = arrivals[(account, name)]
            queues.append(summary)
        dlqs = [_dlq_summary(key, self.dlqs[key], now_ms) for key in dlq_keys]
        return {
            "now_ms": now_ms,
            "queue_count": len(self.queues),
            "dlq_count": len(self.dlqs),
            "queues": queues,
            "dlqs": dlqs,
        }


# How far back "busiest" looks: the messages sent, received and deleted in the windows that
# started in the last five minutes (looked up by start, so ranking 10,000 queues stays cheap).
BUSY_MINUTES = 5
BUSY_METRICS = (SENT, RECEIVED, DELETED)
MINUTE_MS = 60_000


def _activity(queue: _Queue, now_ms: int) -> float:
    latest = now_ms - now_ms % MINUTE_MS
    starts = [latest - i * MINUTE_MS for i in range(BUSY_MINUTES)]
    total = 0.0
    for metric in BUSY_METRICS:
        windows = queue.metrics.get(metric)
        if windows:
            for start in starts:
                record = windows.get(start)
                if record is not None:
                    total += record.stats.sum
    return total


def _queue_series(queue: _Queue, now_ms: int) -> list[dict[str, Any]]:
    starts = sorted({start for windows in queue.metrics.values() for start in windows})
    series: list[dict[str, Any]] = []
    for start in starts[-MAX_WINDOWS:]:
        point: dict[str, Any] = {"t": start}
        end = start
        for windows in queue.metrics.values():
            record = windows.get(start)
            if record is not None:
                end = max(end, record.window_end_ms)
        point["end"] = end
        point["complete"] = now_ms >= end
        # Spark emits a count only for a minute with such events: none means zero. (A depth
        # without a sample is unknown instead, and stays None: nothing is drawn.)
        for metric, name in COUNTS.items():
            record = queue.metrics.get(metric, {}).get(start)
            point[name] = 0.0 if record is None else record.stats.sum
            point[f"{name}_per_s"] = (
                0.0
                if record is None
                else rate_per_s(record.stats.sum, start, record.window_end_ms, now_ms)
            )
        for metric, (name, statistic) in GAUGES.items():
            record = queue.metrics.get(metric, {}).get(start)
            point[name] = None if record is None else getattr(record.stats, statistic)
        size = queue.metrics.get(SENT_SIZE, {}).get(start)
        point["sent_size_avg_bytes"] = None if size is None else size.stats.average
        series.append(point)
    return series


def _current_depth(series: list[dict[str, Any]], gauges: list[Gauges]) -> dict[str, Any] | None:
    latest_gauge = gauges[-1] if gauges else None
    latest_window = next((p for p in reversed(series) if p["visible"] is not None), None)
    if latest_gauge is not None and (
        latest_window is None or latest_gauge.ts_ms >= latest_window["t"]
    ):
        return {
            "as_of_ms": latest_gauge.ts_ms,
            "source": "gauges",
            "visible": latest_gauge.visible,
            "not_visible": latest_gauge.not_visible,
            "delayed": latest_gauge.delayed,
            "oldest_age_s": latest_gauge.oldest_age_s,
        }
    if latest_window is None:
        return None
    return {
        "as_of_ms": latest_window["t"],
        "source": "metrics",
        **{name: latest_window[name] for name, _ in GAUGES.values()},
    }


def _depth_series(series: list[dict[str, Any]], gauges: list[Gauges]) -> list[dict[str, Any]]:
    """Depth over time: the windows' statistics, then the gauge samples after the last one."""
    points = [
        {"t": p["t"], "source": "window", **{name: p[name] for name, _ in GAUGES.values()}}
        for p in series
        if p["visible"] is not None
    ]
    last_window_ms = points[-1]["t"] if points else None
    points.extend(
        {
            "t": g.ts_ms,
            "source": "gauge",
            "visible": g.visible,
            "not_visible": g.not_visible,
            "delayed": g.delayed,
            "oldest_age_s": g.oldest_age_s,
        }
        for g in gauges
        if last_window_ms is None or g.ts_ms > last_window_ms
    )
    return points


RATES_NOW = ("sent", "received", "deleted", "empty_receives")


def _rates_now(series: list[dict[str, Any]], now_ms: int) -> dict[str, float | None]:
    """The latest window's rates; None before any window (no Spark job yet)."""
    if not series:
        return {f"{name}_per_s": None for name in RATES_NOW}
    latest = series[-1]
    if now_ms >= 2 * latest["end"] - latest["t"]:
        # Spark emits no window for a minute without events: an older one is not "now".
        return {f"{name}_per_s": 0.0 for name in RATES_NOW}
    return {f"{name}_per_s": latest[f"{name}_per_s"] for name in RATES_NOW}


def _queue_summary(account: str, name: str, queue: _Queue, now_ms: int) -> dict[str, Any]:
    series = _queue_series(queue, now_ms)
    gauges = [queue.gauges[ts] for ts in sorted(queue.gauges)]
    return {
        "account": account,
        "queue": name,
        "current": _current_depth(series, gauges),
        "rates": _rates_now(series, now_ms),
        # Over the windows the page shows (at most the last MAX_WINDOWS minutes).
        "totals": {key: sum(point[key] for point in series) for key in COUNTS.values()},
        "totals_since_ms": series[0]["t"] if series else None,
        "series": series,
        "depth": _depth_series(series, gauges),
    }


def _dlq_summary(key: DlqKey, windows: dict[int, DlqWindow], now_ms: int) -> dict[str, Any]:
    account, dlq, source_queue = key
    ordered = [windows[start] for start in sorted(windows)]
    # Each window carries every value's count, so their sum is exact over the range shown;
    # a window from before Spark carried them only has its top list (then say so).
    attributes: Counter[tuple[str, str]] = Counter()
    exact = True
    for window in ordered:
        counts = window.attribute_counts
        if counts is None:
            exact = False
            counts = window.top_attributes
        for attribute in counts:
            attributes[(attribute.name, attribute.value)] += attribute.count
    arrivals = sum(w.arrivals for w in ordered)
    receive_total = sum(w.receive_count.sum for w in ordered)
    receive_samples = sum(w.receive_count.sample_count for w in ordered)
    return {
        "account": account,
        "dlq": dlq,
        "source_queue": source_queue,
        "total_arrivals": arrivals,
        "receive_count_avg": receive_total / receive_samples if receive_samples else None,
        "receive_count_max": max((w.receive_count.maximum for w in ordered), default=None),
        "age_at_move_max_s": max((w.age_at_move_s.maximum for w in ordered), default=None),
        "series": [
            {
                "t": w.window_start_ms,
                "end": w.window_end_ms,
                "complete": now_ms >= w.window_end_ms,
                "arrivals": w.arrivals,
                "arrivals_per_s": rate_per_s(
                    w.arrivals, w.window_start_ms, w.window_end_ms, now_ms
                ),
                "receive_count_avg": w.receive_count.average,
                "receive_count_max": w.receive_count.maximum,
                "age_at_move_avg_s": w.age_at_move_s.average,
                "age_at_move_max_s": w.age_at_move_s.maximum,
            }
            for w in ordered
        ],
        # Ties rank by name, then value, as in Spark's per-window lists.
        "top_attributes": [
            {"name": name, "value": value, "count": count}
            for (name, value), count in sorted(
                attributes.items(), key=lambda item: (-item[1], item[0])
            )[:TOP_ATTRIBUTES]
        ],
        "top_attributes_exact": exact,
        "distinct_attribute_values": len(attributes),
    }
