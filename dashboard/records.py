"""The three record shapes the dashboard reads, decoded from their JSON values.

* `__kqs_metrics` (Spark, 1-minute windows, update mode): one `MetricWindow` per queue,
  metric and window; a window is re-emitted while it changes and the latest one wins.
* `__kqs_dlq_analytics` (Spark): one `DlqWindow` per dead-letter queue, source queue and window,
  with the count of every message-attribute value of its moves.
* `__kqs_events` (the gateway): only the `"type": "gauges"` records, one `Gauges` per queue
  about every 10 s, the current depth without waiting for a window to be aggregated.

Every decoder returns None for a record it does not understand (another `v`, another type,
a missing field), so a newer producer cannot stop the dashboard.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True)
class Stats:
    """CloudWatch's statistics of one window: sum, average, minimum, maximum, sample count."""

    sum: float
    average: float
    minimum: float
    maximum: float
    sample_count: int


@dataclass(frozen=True, slots=True)
class MetricWindow:
    account: str
    queue: str
    metric: str
    window_start_ms: int
    window_end_ms: int
    stats: Stats


@dataclass(frozen=True, slots=True)
class AttributeCount:
    name: str
    value: str
    count: int


@dataclass(frozen=True, slots=True)
class DlqWindow:
    account: str
    dlq: str
    source_queue: str
    window_start_ms: int
    window_end_ms: int
    arrivals: int
    receive_count: Stats
    age_at_move_s: Stats
    top_attributes: tuple[AttributeCount, ...]
    # Every attribute value's count; None in records written before Spark carried them,
    # where only the window's top list is known.
    attribute_counts: tuple[AttributeCount, ...] | None = None


@dataclass(frozen=True, slots=True)
class Gauges:
    account: str
    queue: str
    ts_ms: int
    visible: int
    not_visible: int
    delayed: int
    oldest_age_s: float


def _load(value: bytes | str | None) -> dict[str, Any] | None:
    if value is None:
        return None
    try:
        loaded = json.loads(value)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(loaded, dict) or loaded.get("v") != SCHEMA_VERSION:
        return None
    return loaded


def _number(raw: dict[str, Any], name: str) -> float | None:
    value = raw.get(name)
    return None if value is None else float(value)


def _stats(raw: Any) -> Stats:
    """The statistics of a window. Spark's `to_json` leaves out null fields (e.g. the average
    of no samples), so only `sum` is required; the others default from it."""
    if raw is None:
        return Stats(0.0, 0.0, 0.0, 0.0, 0)
    if not isinstance(raw, dict):
        raise TypeError("statistics must be an object")
    total = float(raw["sum"])
    count = int(raw.get("sample_count") or 0)
    average = _number(raw, "average")
    if average is None:
        average = total / count if count else 0.0
    minimum = _number(raw, "minimum")
    maximum = _number(raw, "maximum")
    return Stats(
        sum=total,
        average=average,
        minimum=average if minimum is None else minimum,
        maximum=average if maximum is None else maximum,
        sample_count=count,
    )


def decode_metric(value: bytes | str | None) -> MetricWindow | None:
    raw = _load(value)
    if raw is None:
        return None
    try:
        return MetricWindow(
            account=str(raw["account"]),
            queue=str(raw["queue"]),
            metric=str(raw["metric"]),
            window_start_ms=int(raw["window_start"]),
            window_end_ms=int(raw["window_end"]),
            stats=_stats(raw),
        )
    except (KeyError, TypeError, ValueError):
        return None


def decode_dlq(value: bytes | str | None) -> DlqWindow | None:
    raw = _load(value)
    if raw is None:
        return None
    try:
        top = raw.get("top_attributes") or []
        counts = raw.get("attribute_counts")
        return DlqWindow(
            account=str(raw["account"]),
            dlq=str(raw["dlq"]),
            source_queue=str(raw["source_queue"]),
            window_start_ms=int(raw["window_start"]),
            window_end_ms=int(raw["window_end"]),
            arrivals=int(raw["arrivals"]),
            receive_count=_stats(raw.get("receive_count")),
            age_at_move_s=_stats(raw.get("age_at_move_s")),
            top_attributes=_attribute_counts(top),
            attribute_counts=None if counts is None else _attribute_counts(counts),
        )
    except (KeyError, TypeError, ValueError):
        return None


def _attribute_counts(raw: Any) -> tuple[AttributeCount, ...]:
    if not isinstance(raw, list):
        raise TypeError("attribute counts must be a list")
    return tuple(AttributeCount(str(a["name"]), str(a["value"]), int(a["count"])) for a in raw)


def decode_gauges(value: bytes | str | None) -> Gauges | None:
    # Most of `__kqs_events` is per-request events: skip them before parsing any JSON.
    if value is None or b"gauges" not in (value.encode() if isinstance(value, str) else value):
        return None
    raw = _load(value)
    if raw is None or raw.get("type") != "gauges":
        return None
    try:
        return Gauges(
            account=str(raw["account"]),
            queue=str(raw["queue"]),
            ts_ms=int(raw["ts"]),
            visible=int(raw["visible"]),
            not_visible=int(raw["not_visible"]),
            delayed=int(raw["delayed"]),
            oldest_age_s=float(raw["oldest_age_s"]),
        )
    except (KeyError, TypeError, ValueError):
        return None
