"""The batch log line's fields from one StreamingQueryProgress (pure: no Spark)."""

from __future__ import annotations

from typing import Any

from spark_streaming.progress import batch_fields, batch_finished_at


def progress(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": "metrics-kafka",
        "batchId": 7,
        "timestamp": "2026-11-23T10:00:00.000Z",
        "numInputRows": 12,
        "durationMs": {"triggerExecution": 1500},
        "eventTime": {"watermark": "2026-11-23T09:59:00.000Z"},
        "stateOperators": [{"numRowsRemoved": 3, "numRowsTotal": 40, "memoryUsedBytes": 9000}],
        "sink": {"numOutputRows": 4},
    }
    return {**base, **overrides}


def test_a_batch_line_names_query_batch_rows_duration_end_and_watermark() -> None:
    assert batch_fields(progress()) == {
        "query": "metrics-kafka",
        "batch": 7,
        "rows_in": 12,
        "rows_out": 4,
        "duration_ms": 1500,
        "finished": "2026-11-23T10:00:01.500+00:00",
        "watermark": "2026-11-23T09:59:00.000Z",
        "state_rows": 40,
        "state_bytes": 9000,
    }
    assert batch_finished_at(progress()) == 1795428001.5


def test_the_file_sinks_unknown_count_is_the_windows_its_aggregation_closed() -> None:
    # Spark's file sink reports -1; in append mode the rows written are the state rows the
    # watermark removed
    fields = batch_fields(progress(name="metrics-parquet", sink={"numOutputRows": -1}))
    assert fields["rows_out"] == 3


def test_a_count_nobody_knows_is_left_out_rather_than_shown_as_minus_one() -> None:
    fields = batch_fields(progress(sink={"numOutputRows": -1}, stateOperators=[]))
    assert "rows_out" not in fields
