"""`kqs serve --workers N`: N gateway processes on one port, sharing the queue partitions.

One Python process uses one core. With N workers the embedded broker is started once (by
`kqs serve`, before this module runs) and N `kqs serve` processes listen on the same port
(`SO_REUSEPORT`: the kernel spreads incoming connections over them). They run in group mode
(`gateway/cluster/ownership.py`): the ingest group gives each queue partition to one worker, and a
request that lands on another worker is forwarded to it over the internal channel, which
each worker serves on a private port of its own (published in `__kqs_owners`).

This process only supervises: it hands a single gateway's lease store over first
(`gateway/cluster/hand_over.py`), starts the workers with one receipt secret, restarts a worker that
dies (its partitions move to the others meanwhile, as with any gateway), and on SIGTERM or
SIGINT stops them all, each draining its requests. A worker dies with its supervisor.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field

from gateway.cluster.group_check import SHARED_CLUSTER_EXIT
from gateway.cluster.hand_over import hand_over_to_workers, worker_data_dir
from gateway.common.config import Settings

log = logging.getLogger("kqs.workers")

# A worker that dies this often within the window is not restarted again: something is
# wrong that restarting will not fix, and its log lines say what.
RESTARTS_ALLOWED = 5
RESTART_WINDOW_S = 60.0
RESTART_DELAY_S = 1.0
# Each worker drains its requests (at most the producer's delivery timeout) before exiting.
STOP_TIMEOUT_S = 45.0
SUPERVISOR_PID_ENV = "KQS_SUPERVISOR_PID"
WORKER_INDEX_ENV = "KQS_WORKER_INDEX"


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@dataclass
class _Worker:
    index: int
    command: list[str]
    env: dict[str, str]
    process: subprocess.Popen[bytes] | None = None
    deaths: deque[float] = field(default_factory=deque)

    def start(self) -> None:
        self.process = subprocess.Popen(self.command, env=self.env)
        log.info("worker started", extra={"worker": self.index, "pid": self.process.pid})

    def exit_code(self) -> int | None:
        return None if self.process is None else self.process.poll()


def run_workers(settings: Settings, workers: int, secret: bytes, worker_args: list[str]) -> int:
    """Supervise `workers` gateway processes until SIGTERM/SIGINT; the exit status."""
    try:
        asyncio.run(hand_over_to_workers(settings))
    except Exception as error:  # noqa: BLE001 - Kafka, RocksDB (locked), the hand-over itself
        log.error(
            "the single gateway's lease store could not be handed over to the workers; it is "
            "kept as it was. Is a `kqs serve` still running on this data directory, and is "
            "Kafka reachable? Then start again.",
            extra={"lease_dir": str(settings.lease_dir), "error": str(error)},
        )
        return 1
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    pool = [_worker(settings, i, secret, worker_args) for i in range(workers)]
    log.info(
        "starting workers",
        extra={"workers": workers, "endpoint": f"http://{settings.host}:{settings.port}"},
    )
    for worker in pool:
        worker.start()
    status = 0
    while not stop.wait(0.2):
        for worker in pool:
            code = worker.exit_code()
            if code is None:
                continue
            if not _may_restart(worker, code):
                status = 1
                stop.set()
                break
            if stop.wait(RESTART_DELAY_S):
                break  # asked to stop meanwhile
            worker.start()
    _stop_all(pool)
    return status


def _worker(settings: Settings, index: int, secret: bytes, worker_args: list[str]) -> _Worker:
    command = [
        sys.executable,
        "-m",
        "gateway.cli.main",
        "serve",
        "--pool-worker",
        "--host",
        settings.host,
        "--port",
        str(settings.port),
        "--data-dir",
        str(worker_data_dir(settings.data_dir, index)),
        "--kafka-bootstrap",
        settings.kafka_bootstrap,
        *worker_args,
    ]
    env = {
        **os.environ,
        "KQS_PARTITION_OWNERSHIP": "group",
        # One secret for all: a receipt handle is checked by whichever worker gets it.
        "KQS_RECEIPT_SECRET": secret.decode(),
        SUPERVISOR_PID_ENV: str(os.getpid()),
        WORKER_INDEX_ENV: str(index),  # in each of its log lines
        # The embedded broker's log directory, when the workers sync its segments themselves.
        **(
            {"KQS_SEGMENT_SYNC_DIR": str(settings.segment_sync_dir)}
            if settings.segment_sync_dir
            else {}
        ),
        # One master key for all: each opens what the others sealed.
        **({"KQS_MASTER_KEY_FILE": settings.master_key_file} if settings.master_key_file else {}),
        **({"KQS_KMS_KEY_ID": settings.kms_key_id} if settings.kms_key_id else {}),
    }
    return _Worker(index, command, env)


def _may_restart(worker: _Worker, code: int) -> bool:
    if code == SHARED_CLUSTER_EXIT:
        log.error(
            "worker refused to start beside another gateway: stopping every worker; its log "
            "lines above name the gateway",
            extra={"worker": worker.index},
        )
        return False
    now = time.monotonic()
    worker.deaths.append(now)
    while worker.deaths and worker.deaths[0] < now - RESTART_WINDOW_S:
        worker.deaths.popleft()
    if len(worker.deaths) > RESTARTS_ALLOWED:
        log.error(
            "worker keeps exiting: stopping every worker; its log lines above say why",
            extra={"worker": worker.index, "exit_code": code, "deaths": len(worker.deaths)},
        )
        return False
    log.warning(
        "worker exited: restarting it (its partitions are served by the others meanwhile)",
        extra={"worker": worker.index, "exit_code": code},
    )
    return True


def _stop_all(pool: list[_Worker]) -> None:
    log.info("stopping workers")
    running = [w for w in pool if w.process is not None and w.process.poll() is None]
    for worker in running:
        assert worker.process is not None
        worker.process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for worker in running:
        assert worker.process is not None
        try:
            worker.process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log.warning("worker did not stop in time: killed", extra={"worker": worker.index})
            worker.process.kill()
            worker.process.wait()


def worker_index() -> int:
    return int(os.environ.get(WORKER_INDEX_ENV, "0"))


def die_with_supervisor() -> None:
    """In a worker: be sent SIGTERM when the supervisor dies, even by SIGKILL (Linux)."""
    supervisor = os.environ.get(SUPERVISOR_PID_ENV)
    if not supervisor or not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    if os.getppid() != int(supervisor):  # it died before the line above
        os.kill(os.getpid(), signal.SIGTERM)
