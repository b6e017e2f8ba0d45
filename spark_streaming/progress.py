"""Batch progress pushed by Spark as each batch finishes, not polled from the query history.

``BatchListener`` implements Spark's ``PythonStreamingQueryListener`` interface over py4j.
Spark's listener bus calls it once per finished micro-batch (``onQueryProgress``) and once
per stopped query (``onQueryTerminated``); each call costs one py4j round trip for the
progress JSON. (PySpark's own ``StreamingQueryListener`` wrapper converts every field of
the progress through py4j, and ``StreamingQuery.recentProgress`` rebuilds up to
``spark.sql.streaming.numRecentProgressUpdates`` (100) stored entries per call that way: a
status loop polling it every second used most of a core and fell tens of seconds behind.)

``batch_fields`` turns one progress (the JSON of ``StreamingQueryProgress``) into the fields
of the log line; it is a pure function, tested without Spark.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

log = logging.getLogger("kqs.analytics")


def batch_fields(progress: dict[str, Any]) -> dict[str, Any]:
    """The log line's fields of one finished batch: query, batch, rows in and out, duration,
    when it finished (UTC, to the millisecond), watermark, and the state kept.

    ``rows_out`` is the sink's count; Spark's file sink reports none (-1), and there the
    rows written are the windows the append-mode aggregation closed, which its state
    operator counts as removed rows. Without either the field is left out.
    """
    durations: dict[str, Any] = progress.get("durationMs") or {}
    sink: dict[str, Any] = progress.get("sink") or {}
    fields: dict[str, Any] = {
        "query": progress.get("name"),
        "batch": progress.get("batchId"),
        "rows_in": progress.get("numInputRows", 0),
    }
    rows_out = sink.get("numOutputRows")
    if rows_out is None or rows_out < 0:
        operators = progress.get("stateOperators") or []
        removed = [op.get("numRowsRemoved") for op in operators]
        rows_out = sum(removed) if removed and None not in removed else None
    if rows_out is not None:
        fields["rows_out"] = rows_out
    fields["duration_ms"] = durations.get("triggerExecution")
    finished = batch_finished_at(progress)
    if finished is not None:
        fields["finished"] = datetime.fromtimestamp(finished, UTC).isoformat(
            timespec="milliseconds"
        )
    watermark = (progress.get("eventTime") or {}).get("watermark")
    if watermark is not None:
        fields["watermark"] = watermark
    # The aggregation's state after the batch: the open windows it holds (closed ones are
    # dropped once the watermark passes them) and the memory the state store reports.
    operators = progress.get("stateOperators") or []
    rows = [op.get("numRowsTotal") for op in operators]
    if rows and None not in rows:
        fields["state_rows"] = sum(rows)
        fields["state_bytes"] = sum(op.get("memoryUsedBytes") or 0 for op in operators)
    return fields


def batch_finished_at(progress: dict[str, Any]) -> float | None:
    """When the batch ended (epoch seconds): its trigger's start plus the trigger's duration."""
    started = progress.get("timestamp")
    duration_ms = (progress.get("durationMs") or {}).get("triggerExecution")
    if not isinstance(started, str) or duration_ms is None:
        return None
    began = datetime.fromisoformat(started.replace("Z", "+00:00")).timestamp()
    return began + float(duration_ms) / 1000.0


@dataclass
class Terminated:
    """A query that stopped: its name and, if it failed, the error message."""

    name: str
    error: str | None


@dataclass
class BatchListener:
    """Logs one line per finished batch as Spark reports it; notes queries that stop.

    ``on_batch`` (tests) is called with each progress dict after it is logged.
    ``changed`` is set whenever a query terminates, so a caller can wait on it instead of
    polling the queries.
    """

    on_batch: Callable[[dict[str, Any]], None] | None = None
    changed: threading.Event = field(default_factory=threading.Event)
    terminated: list[Terminated] = field(default_factory=list)
    _names: dict[str, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # -- the Java interface (called by py4j's callback server, one thread per call) --------

    def onQueryStarted(self, event: Any) -> None:
        with self._lock:
            self._names[str(event.id().toString())] = str(event.name())

    def onQueryProgress(self, event: Any) -> None:
        self.progress(json.loads(event.progress().json()))

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        query_id = str(event.id().toString())
        exception = event.exception()
        error = str(exception.get()) if exception.isDefined() else None
        with self._lock:
            name = self._names.get(query_id, query_id)
            self.terminated.append(Terminated(name, error))
        self.changed.set()

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]

    # -- plain Python ------------------------------------------------------------------

    def progress(self, progress: dict[str, Any]) -> None:
        log.info("batch", extra=batch_fields(progress))
        if self.on_batch is not None:
            self.on_batch(progress)

    def failed(self) -> list[Terminated]:
        with self._lock:
            return [t for t in self.terminated if t.error is not None]


def add_listener(spark: Any, listener: BatchListener) -> Any:
    """Register ``listener`` with the session's streaming queries; returns the Java wrapper
    (give it to ``remove_listener``)."""
    from pyspark import SparkContext
    from pyspark.java_gateway import ensure_callback_server_started

    gateway = SparkContext._gateway
    jvm = SparkContext._jvm
    assert gateway is not None and jvm is not None, "no active SparkContext"
    ensure_callback_server_started(gateway)  # type: ignore[no-untyped-call]
    wrapper = jvm.org.apache.spark.sql.streaming.PythonStreamingQueryListenerWrapper(listener)
    spark.streams._jsqm.addListener(wrapper)
    return wrapper


def remove_listener(spark: Any, wrapper: Any) -> None:
    spark.streams._jsqm.removeListener(wrapper)
