"""A Celery app whose broker is KQS, through kombu's SQS transport (tests/clients/test_clients_python.py).

The worker runs this module in its own process (`celery -A tests.support.celery_app worker`); the test
sends tasks with `make_app`'s app. Each task appends what it ran as one JSON line to
``$KQS_CELERY_RESULTS``, which is how the test sees the worker's work.
"""

from __future__ import annotations

import json
import os
from typing import Any

from celery import Celery


# README: begin celery
def make_app(endpoint_host_port: str, queue_prefix: str) -> Celery:
    """`endpoint_host_port` is e.g. "127.0.0.1:9324"."""
    app = Celery("kqs_tasks")
    app.conf.update(
        broker_url=f"sqs://test:test@{endpoint_host_port}",  # access key and secret in the URL
        broker_transport_options={
            "region": "us-east-1",
            "is_secure": False,  # http://, the scheme of a local KQS
            "queue_name_prefix": queue_prefix,
            "wait_time_seconds": 1,  # long-poll receives
            "visibility_timeout": 60,
        },
        broker_connection_retry_on_startup=True,
        task_default_queue="tasks",
        result_backend=None,  # SQS carries tasks, not results
        worker_enable_remote_control=False,  # no broadcast queues: SQS has no fanout
    )
    return app


# README: end celery


app = make_app(
    os.environ.get("KQS_CELERY_ENDPOINT", "127.0.0.1:9324"),
    os.environ.get("KQS_CELERY_PREFIX", "kqs-"),
)


def _record(entry: dict[str, Any]) -> None:
    with open(os.environ["KQS_CELERY_RESULTS"], "a", encoding="utf-8") as out:
        out.write(json.dumps(entry) + "\n")


@app.task(name="kqs.add")  # type: ignore[untyped-decorator]
def add(x: int, y: int, *, note: str = "") -> int:
    _record({"task": "add", "args": [x, y], "note": note, "result": x + y})
    return x + y


@app.task(name="kqs.flaky", bind=True, max_retries=3)  # type: ignore[untyped-decorator]
def flaky(self: Any, key: str) -> str:
    """Fails its first run and asks to be retried a second later (a delayed SQS message)."""
    if self.request.retries == 0:
        _record({"task": "flaky", "key": key, "retries": 0, "outcome": "retry"})
        raise self.retry(countdown=1)
    _record({"task": "flaky", "key": key, "retries": self.request.retries, "outcome": "done"})
    return key
