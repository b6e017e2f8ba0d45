"""`kqs analytics` as a user runs it: one log line per batch as it finishes, a prompt stop.

The issue this answers: the status loop read every query's `recentProgress` each second,
which in PySpark 4.0 rebuilds up to 100 stored progress entries per query through py4j;
after some minutes the loop took 35-43 s a cycle, batch lines came 20-35 s late and Ctrl-C
took 35 s. Now a StreamingQueryListener logs each batch when Spark reports it, and nothing
reads the history.

A 15-minute run (what the issue measured) cannot fit in CI. What made the old loop slow was
the size of that history, which Spark caps at `spark.sql.streaming.numRecentProgressUpdates`
(100 entries per query by default). So the bounded equivalent sets that cap to 10 (through
`PYSPARK_SUBMIT_ARGS`, as a user would pass `--conf`), keeps the default triggers' ratio (10 s
Kafka, 60 s Parquet) at a 50 times faster pace (0.2 s and 1.2 s) with a steady stream of
events until each Kafka query has run more than 10 batches (a full history) and each Parquet
query more than 2, then sends SIGTERM. (Measured once with the default cap and every query at
0.2 s until all four passed 100 batches: 458 batch lines in 450 s, the latest 0.33 s after its
batch, exit 6.1 s after SIGTERM; with the default cap and the 100/16 batches of the default
ratio this test took ~240 s of CI.) It checks that every batch line reached the reader within a
few seconds of the batch's end, that the process exits 0 within 10 s of the signal, and that
nothing was left in the directory it was started from.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from spark_streaming.settings import EVENTS_TOPIC
from tests.support.harness import ACCOUNT_ID, GatewayProcess

# The progress history Spark keeps per query (`numRecentProgressUpdates`; its default is 100).
HISTORY = 10
# Batches each query must have run: more than a full progress history for the Kafka queries,
# and the Parquet ones about as many as the default triggers' ratio (10 s to 60 s) gives.
QUERIES = {"metrics-kafka": HISTORY, "dlq-kafka": HISTORY, "metrics-parquet": 2, "dlq-parquet": 2}
LINE_LAG_S = 5.0
STOP_S = 10.0
RUN_DEADLINE_S = 900.0


def _report(line: str) -> None:
    print(line)  # noqa: T201 - the measured figures are reported, not only asserted


def _events_until(bootstrap: str, stop: threading.Event, queue: str) -> None:
    """A `sent` event of `queue` every 50 ms, so every trigger finds new events."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    n = 0
    while not stop.is_set():
        n += 1
        event = {
            "v": 1, "type": "sent", "ts": int(time.time() * 1000), "account": ACCOUNT_ID,
            "queue": queue, "count": 1, "message_id": f"m{n}", "size": 10,
        }  # fmt: skip
        producer.produce(EVENTS_TOPIC, key=f"{ACCOUNT_ID}/{queue}", value=json.dumps(event))
        producer.poll(0)
        stop.wait(0.05)
    producer.flush(10)


def test_batch_lines_come_as_batches_finish_and_stop_is_prompt_after_a_full_history(
    gateway: GatewayProcess, kafka_bootstrap: str, tmp_path: Path
) -> None:
    # Given events arriving continuously (the gateway created `__kqs_events`)
    stop_events = threading.Event()
    producer = threading.Thread(
        target=_events_until,
        args=(kafka_bootstrap, stop_events, f"progress-{uuid.uuid4().hex[:8]}"),
    )
    producer.start()
    # and `kqs analytics` with 0.2 s / 1.2 s triggers, started in an empty directory
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    process = subprocess.Popen(
        [
            sys.executable, "-m", "gateway.cli.main", "analytics",
            "--bootstrap", kafka_bootstrap, "--data-dir", str(tmp_path / "data"),
            "--trigger-seconds", "0.2", "--file-trigger-seconds", "1.2",
            "--starting-offsets", "latest", "--dashboard-port", "0", "--log-format", "json",
        ],
        cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={
            **os.environ,
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_SUBMIT_ARGS": (
                f"--conf spark.sql.streaming.numRecentProgressUpdates={HISTORY} pyspark-shell"
            ),
        },
    )  # fmt: skip
    lines: list[tuple[float, dict[str, Any]]] = []
    other: list[str] = []

    def read() -> None:
        assert process.stderr is not None
        for raw in process.stderr:
            arrived = time.time()
            try:
                lines.append((arrived, json.loads(raw)))
            except ValueError:
                other.append(raw.rstrip())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        # When the queries have run more batches than a full history holds
        deadline = time.monotonic() + RUN_DEADLINE_S
        while True:
            batches = Counter(e["query"] for _, e in lines if e.get("msg") == "batch")
            if all(batches[query] > n for query, n in QUERIES.items()):
                break
            assert process.poll() is None, other[-20:]
            assert time.monotonic() < deadline, f"only {dict(batches)} batches"
            time.sleep(1)
        ran_s = time.time() - lines[0][0]
        # and it gets SIGTERM
        signalled = time.monotonic()
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=60)
        stopped_s = time.monotonic() - signalled
    finally:
        stop_events.set()
        producer.join(timeout=30)
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
    reader.join(timeout=10)
    assert process.stderr is not None
    process.stderr.close()

    # Then each batch's line reached the reader within a few seconds of the batch's end
    batch_lines = [(arrived, e) for arrived, e in lines if e.get("msg") == "batch"]
    lags = sorted(
        arrived - datetime.fromisoformat(e["finished"]).timestamp() for arrived, e in batch_lines
    )
    _report(
        f"{len(batch_lines)} batch lines in {ran_s:.0f} s ({dict(batches)}); line lag after "
        f"the batch: median {lags[len(lags) // 2]:.2f} s, max {lags[-1]:.2f} s; "
        f"exit {stopped_s:.1f} s after SIGTERM"
    )
    assert lags[-1] < LINE_LAG_S
    # ... every line has its figures (the Parquet sink's rows out too, never -1)
    for _, e in batch_lines:
        assert {"query", "batch", "rows_in", "rows_out", "duration_ms", "finished"} <= set(e)
        assert e["rows_out"] >= 0
    # and the process exited 0, within 10 s of the signal
    assert code == 0, other[-20:]
    assert stopped_s < STOP_S
    # and Spark left nothing in the directory it was started from
    assert list(cwd.iterdir()) == []
    # and the only warnings are Spark's own start-up notes, none caused by our settings
    assert not [line for line in other if "adaptive.enabled" in line or "job group" in line]
