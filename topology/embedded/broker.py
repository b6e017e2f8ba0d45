"""A real, single-node Apache Kafka broker for development and tests, without Docker.

kqs stores every queue in Kafka, so anyone who wants to run or test it needs a broker.
Docker is not always available (CI sandboxes, developer laptops with policies), and the
Kafka download site is not a package registry. Maven Central is, and it carries every jar
a broker needs. So this module:

* ``fetch`` (``jars.py``) resolves ``org.apache.kafka:kafka_2.13`` plus an SLF4J -> log4j2
  binding with Maven into a per-user cache (once; later calls return immediately);
* ``start`` formats a KRaft data directory on first use and launches ``kafka.Kafka`` as a
  detached JVM (combined broker + controller, node id 1), then waits until the broker
  answers metadata requests;
* ``stop`` / ``status`` find that JVM again through a pid file in the data directory, so
  they work from a different process (``kqs kafka stop`` after ``kqs kafka start``);
* ``EmbeddedBroker`` ties start/stop to a ``with`` block for ``kqs serve`` and tests. It
  records its process as the broker's owner; a later ``EmbeddedBroker`` that finds the
  broker running after its owner died (``kqs serve`` killed with SIGKILL) adopts it and
  stops it at exit like its own, so no broker outlives every gateway. A broker started by
  ``kqs kafka start`` has no owner process and is never stopped by anyone else.

Everything about a running broker lives in its data directory::

    <data_dir>/server.properties   generated broker config (rewritten on every start)
    <data_dir>/log4j2.xml          generated logging config: INFO to broker.log, not console
    <data_dir>/broker.json         host and ports (so status/stop know the bootstrap address),
                                   and the pid of the process that owns the broker, if any
    <data_dir>/broker.pid          pid of the JVM while it runs
    <data_dir>/broker.log          the broker's own log
    <data_dir>/broker.out          JVM stdout/stderr (crashes before logging starts land here)
    <data_dir>/kraft-logs/         Kafka's log.dirs (topic data and the KRaft metadata log)

The generated files are ``broker_config.py``'s, the pid file and the signals ``process.py``'s.
All functions are blocking; async callers should run them in an executor.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import signal
import socket
import subprocess
import time
import types
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from topology.embedded import file_lock
from topology.embedded.broker_config import (
    _LOG_DIRS,
    _LOG_FILE,
    ClusterNode,
    SecureListeners,
    _atomic_write,
    _java_command,
    _write_log4j_config,
    _write_server_properties,
)
from topology.embedded.errors import BrokerError
from topology.embedded.jars import KAFKA_VERSION, _require_java, fetch
from topology.embedded.process import (
    _CHILDREN,
    _owner_alive,
    _pid_alive,
    _pid_file,
    _running_pid,
    _signal,
    _wait_for_exit,
)

logger = logging.getLogger("kqs.broker")


DEFAULT_PORT = 9092
DEFAULT_CONTROLLER_PORT = 9093
DEFAULT_HOST = "127.0.0.1"
# The broker's heap grows with its partitions (log, index and metric objects for each): with
# 512m the embedded broker ran out of heap at about 8,300 one-partition queue topics (seed
# 004's scale run, 10,000 queues). -Xmx is a ceiling, not a reservation (the heap starts at
# 128m), so a small deployment pays nothing for the headroom.
DEFAULT_HEAP = "2g"
DEFAULT_READY_TIMEOUT = 60.0
DEFAULT_STOP_TIMEOUT = 30.0

_STATE_FILE = "broker.json"
_OUT_FILE = "broker.out"
_LOCK_FILE = ".broker.lock"


@dataclass(frozen=True)
class BrokerInfo:
    """A running broker. ``started`` is False when ``start`` found one already running;
    ``adopted`` is True when that one's owner process had died and the caller took it over
    (then the caller stops it, as if it had started it)."""

    pid: int
    host: str
    port: int
    controller_port: int
    data_dir: Path
    started: bool
    adopted: bool = False

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.data_dir / _LOG_FILE


@dataclass(frozen=True)
class BrokerStatus:
    """What the data directory says about its broker. ``bootstrap`` is None if never started."""

    running: bool
    pid: int | None
    bootstrap: str | None
    data_dir: Path
    # The process that stops the broker when it exits (`kqs serve`), if any, and whether it
    # still runs; None for a broker started by `kqs kafka start`.
    owner_pid: int | None = None
    owner_alive: bool = False

    @property
    def log_file(self) -> Path:
        return self.data_dir / _LOG_FILE


# --------------------------------------------------------------------------- start


def start(
    data_dir: Path,
    port: int = DEFAULT_PORT,
    controller_port: int = DEFAULT_CONTROLLER_PORT,
    host: str = DEFAULT_HOST,
    *,
    flush_every_message: bool = False,
    heap: str = DEFAULT_HEAP,
    cache_dir: Path | None = None,
    ready_timeout: float = DEFAULT_READY_TIMEOUT,
    owner_pid: int | None = None,
    cluster: ClusterNode | None = None,
    secure: SecureListeners | None = None,
) -> BrokerInfo:
    """Start (or find already running) the single-node KRaft broker of ``data_dir``.

    Fetches the jars if needed, formats storage on first use, launches a detached JVM and
    returns once the broker answers metadata requests. ``flush_every_message`` fsyncs every
    append to every topic before it is acknowledged (broker-wide). The gateway does not need
    it: it asks for fsync per topic, on the topics that hold a durable record
    (`topology/admin.py`, `FSYNC_EACH_APPEND`); the rest stays in the page cache.

    ``owner_pid``: the process that will stop the broker (``EmbeddedBroker``), recorded in
    ``broker.json``. If the broker is already running and its recorded owner is a process
    that no longer runs, it is adopted: ``owner_pid`` becomes its owner and the result says
    ``adopted``. A broker without an owner (``kqs kafka start``) is never adopted.

    ``cluster``: this broker is one node of a multi-node cluster instead. It is ready only once
    a quorum of the voters runs, so the nodes of a new cluster must be started concurrently.

    ``secure``: the broker's port is a SASL_SSL listener (plus an SSL one) with an
    authorizer, instead of plaintext (``SecureListeners``).
    """
    data_dir = Path(data_dir).expanduser().resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    # Two concurrent starts of one data dir would both format and launch; the loser of the
    # lock finds the winner's broker running instead.
    with file_lock.exclusive(data_dir / _LOCK_FILE):
        running = _running_pid(data_dir)
        if running is not None:
            info = _already_running(data_dir, running, host, port, controller_port, ready_timeout)
            return _adopt_if_orphaned(info, owner_pid)
        _pid_file(data_dir).unlink(missing_ok=True)  # stale: its process is gone
        for p in (port, controller_port, *((secure.ssl_port,) if secure else ())):
            _ensure_port_free(host, p)
        home = fetch(cache_dir)
        java = _require_java()
        _write_state(data_dir, host, port, controller_port, owner_pid)
        config = _write_server_properties(
            data_dir, host, port, controller_port, flush_every_message, cluster, secure
        )
        _write_log4j_config(data_dir)
        base_cmd = _java_command(java, home, data_dir, heap)
        _format_storage_once(
            base_cmd, data_dir, config, cluster.cluster_id if cluster else new_cluster_id()
        )
        info = _launch_and_wait(
            base_cmd, data_dir, config, host, port, controller_port, ready_timeout, secure
        )
    return info


def _launch_and_wait(
    base_cmd: Sequence[str],
    data_dir: Path,
    config: Path,
    host: str,
    port: int,
    controller_port: int,
    ready_timeout: float,
    secure: SecureListeners | None = None,
) -> BrokerInfo:
    began = time.monotonic()
    proc = _launch(base_cmd, data_dir, config)
    info = BrokerInfo(proc.pid, host, port, controller_port, data_dir, started=True)
    logger.info(
        "broker launched pid=%d bootstrap=%s log=%s", proc.pid, info.bootstrap, info.log_file
    )
    try:
        _wait_until_ready(proc.pid, info, ready_timeout, secure.admin_client() if secure else {})
    except BaseException:
        # A half-started broker would hold the ports and the pid file; don't leave it behind.
        stop(data_dir, timeout=10)
        raise
    logger.info(
        "broker ready pid=%d bootstrap=%s elapsed=%.1fs",
        proc.pid,
        info.bootstrap,
        time.monotonic() - began,
    )
    return info


def _already_running(
    data_dir: Path, pid: int, host: str, port: int, controller_port: int, ready_timeout: float
) -> BrokerInfo:
    state = _read_state(data_dir)
    actual = (
        str(state.get("host", host)),
        int(state.get("port", port)),
        int(state.get("controller_port", controller_port)),
    )
    if actual != (host, port, controller_port):
        logger.warning(
            "broker already running with other settings pid=%d running=%s:%d/%d requested=%s:%d/%d",
            pid,
            *actual,
            host,
            port,
            controller_port,
        )
    info = BrokerInfo(pid, actual[0], actual[1], actual[2], data_dir, started=False)
    logger.info("broker already running pid=%d bootstrap=%s", pid, info.bootstrap)
    # It may have been launched a moment ago by another process and still be starting up;
    # it is not ours to stop if it never gets ready.
    _wait_until_ready(pid, info, ready_timeout)
    return info


def _adopt_if_orphaned(info: BrokerInfo, owner_pid: int | None) -> BrokerInfo:
    """Take over a running broker whose owner process died (see ``start``)."""
    if owner_pid is None:
        return info
    state = _read_state(info.data_dir)
    previous = state.get("owner_pid")
    if not isinstance(previous, int) or previous == owner_pid or _owner_alive(previous):
        return info
    state["owner_pid"] = owner_pid
    _atomic_write(info.data_dir / _STATE_FILE, json.dumps(state, indent=2) + "\n")
    logger.warning(
        "adopting broker pid=%d: the process that started it (pid %d) is gone; it will be "
        "stopped when this process exits",
        info.pid,
        previous,
    )
    return replace(info, adopted=True)


def _ensure_port_free(host: str, port: int) -> None:
    # SO_REUSEADDR mirrors what the JVM does, so a socket lingering in TIME_WAIT doesn't
    # count as "in use" but a live listener does.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise BrokerError(
                f"port {port} on {host} is already in use ({exc.strerror}); stop whatever "
                f"listens there or choose other ports (--port / --controller-port)"
            ) from exc


def _write_state(
    data_dir: Path, host: str, port: int, controller_port: int, owner_pid: int | None
) -> None:
    state: dict[str, Any] = {
        "host": host,
        "port": port,
        "controller_port": controller_port,
        "kafka_version": KAFKA_VERSION,
    }
    if owner_pid is not None:
        state["owner_pid"] = owner_pid
    _atomic_write(data_dir / _STATE_FILE, json.dumps(state, indent=2) + "\n")


def _read_state(data_dir: Path) -> dict[str, Any]:
    try:
        loaded = json.loads((data_dir / _STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _format_storage_once(
    base_cmd: Sequence[str], data_dir: Path, config: Path, cluster_id: str
) -> None:
    if (data_dir / _LOG_DIRS / "meta.properties").is_file():
        return
    cmd = [*base_cmd, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config)]
    logger.info("formatting kraft storage cluster_id=%s dir=%s", cluster_id, data_dir / _LOG_DIRS)
    result = subprocess.run(
        cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, check=False
    )
    if result.returncode != 0:
        output = " ".join((result.stdout + result.stderr).split())[-500:]
        raise BrokerError(f"formatting Kafka storage in {data_dir / _LOG_DIRS} failed: {output}")
    logger.debug("storage tool output: %s", result.stdout.strip())


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, base64url without padding (like Uuid.randomUuid).

    Like Kafka, reject ids starting with '-': the tools' argument parser would read one as
    an option.
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode("ascii")
        if not cluster_id.startswith("-"):
            return cluster_id


def _launch(base_cmd: Sequence[str], data_dir: Path, config: Path) -> subprocess.Popen[bytes]:
    with (data_dir / _OUT_FILE).open("ab") as out:
        # A new session detaches the JVM from our terminal: Ctrl-C on `kqs` must not kill
        # it, and it keeps running after `kqs kafka start` exits.
        proc = subprocess.Popen(
            [*base_cmd, "kafka.Kafka", str(config)],
            cwd=data_dir,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    _CHILDREN[proc.pid] = proc
    _atomic_write(_pid_file(data_dir), f"{proc.pid}\n")
    return proc


def _wait_until_ready(
    pid: int, info: BrokerInfo, timeout: float, client: dict[str, str] | None = None
) -> None:
    deadline = time.monotonic() + timeout
    # TCP first: librdkafka logs every refused connection to stderr, so only bring in the
    # admin client once something listens.
    while not _port_accepts(info.host, info.port):
        _check_alive(pid, info)
        if time.monotonic() > deadline:
            _timed_out(info, timeout)
        time.sleep(0.2)

    # The listener opens before the broker has caught up with the metadata log and been
    # unfenced; only then does it list itself in metadata responses.
    admin = AdminClient(
        {"bootstrap.servers": info.bootstrap, **(client or {}), "socket.timeout.ms": 5000}
    )
    while True:
        _check_alive(pid, info)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            _timed_out(info, timeout)
        try:
            metadata = admin.list_topics(timeout=min(2.0, remaining))
        except KafkaException as exc:
            logger.debug("broker not ready yet: %s", exc)
            continue
        if metadata.brokers:
            return
        time.sleep(0.2)


def _port_accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def _check_alive(pid: int, info: BrokerInfo) -> None:
    if _pid_alive(pid):
        return
    child = _CHILDREN.pop(pid, None)  # only our own child's exit code is knowable
    exited = "exited" if child is None else f"exited with code {child.returncode}"
    _pid_file(info.data_dir).unlink(missing_ok=True)
    detail = _last_line_matching(info.log_file, r"\b(ERROR|FATAL)\b") or _last_line_matching(
        info.data_dir / _OUT_FILE, r"\S"
    )
    suffix = f": {detail.strip()}" if detail else ""
    raise BrokerError(
        f"kafka broker {exited} during startup; see {info.log_file} "
        f"and {info.data_dir / _OUT_FILE}{suffix}"
    )


def _timed_out(info: BrokerInfo, timeout: float) -> None:
    raise BrokerError(
        f"kafka broker on {info.bootstrap} was not ready after {timeout:.0f}s; see "
        f"{info.log_file} and {info.data_dir / _OUT_FILE}"
    )


# --------------------------------------------------------------------------- stop/status


def stop(data_dir: Path, timeout: float = DEFAULT_STOP_TIMEOUT) -> bool:
    """Stop the broker of ``data_dir``; True if one was running. No error if none was.

    SIGTERM lets Kafka shut down cleanly (flush, close the metadata log) so the next start
    needs no log recovery; SIGKILL is the fallback for a broker that hangs.
    """
    data_dir = Path(data_dir).expanduser().resolve()
    pid = _running_pid(data_dir)
    if pid is None:
        _pid_file(data_dir).unlink(missing_ok=True)
        return False
    logger.info("stopping broker pid=%d", pid)
    began = time.monotonic()
    _signal(pid, signal.SIGTERM)
    if not _wait_for_exit(pid, timeout):
        logger.warning("broker ignored SIGTERM for %.0fs, killing pid=%d", timeout, pid)
        _signal(pid, signal.SIGKILL)
        if not _wait_for_exit(pid, 10.0):
            raise BrokerError(f"kafka broker pid {pid} survived SIGKILL; check it with `ps`")
    _CHILDREN.pop(pid, None)
    _pid_file(data_dir).unlink(missing_ok=True)
    logger.info("broker stopped pid=%d elapsed=%.1fs", pid, time.monotonic() - began)
    return True


def kill(data_dir: Path) -> bool:
    """SIGKILL the broker of ``data_dir``, as a crash would; True if one was running.

    For crash tests: no clean shutdown, so the next start recovers the logs.
    """
    data_dir = Path(data_dir).expanduser().resolve()
    pid = _running_pid(data_dir)
    if pid is None:
        return False
    logger.info("killing broker pid=%d", pid)
    _signal(pid, signal.SIGKILL)
    if not _wait_for_exit(pid, 10.0):
        raise BrokerError(f"kafka broker pid {pid} survived SIGKILL; check it with `ps`")
    _CHILDREN.pop(pid, None)
    _pid_file(data_dir).unlink(missing_ok=True)
    return True


def status(data_dir: Path) -> BrokerStatus:
    """Whether the broker of ``data_dir`` runs, and where it listens (from broker.json)."""
    data_dir = Path(data_dir).expanduser().resolve()
    pid = _running_pid(data_dir)
    state = _read_state(data_dir)
    bootstrap = f"{state['host']}:{state['port']}" if "host" in state and "port" in state else None
    owner = state.get("owner_pid")
    owner_pid = owner if isinstance(owner, int) else None
    return BrokerStatus(
        running=pid is not None,
        pid=pid,
        bootstrap=bootstrap,
        data_dir=data_dir,
        owner_pid=owner_pid,
        owner_alive=owner_pid is not None and _owner_alive(owner_pid),
    )


def _last_line_matching(path: Path, pattern: str) -> str | None:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    regex = re.compile(pattern)
    return next((line for line in reversed(lines) if regex.search(line)), None)


# --------------------------------------------------------------------------- embedded


class EmbeddedBroker:
    """A broker tied to a ``with`` block, e.g. for ``kqs serve`` or a test session.

    On exit it stops the broker if it launched it, or adopted it from an owner that died
    (``start``): a broker that was already running with its owner alive, or from ``kqs kafka
    start``, belongs to whoever started it.
    """

    def __init__(
        self,
        data_dir: Path,
        port: int = DEFAULT_PORT,
        controller_port: int = DEFAULT_CONTROLLER_PORT,
        host: str = DEFAULT_HOST,
        *,
        flush_every_message: bool = False,
        heap: str = DEFAULT_HEAP,
        cache_dir: Path | None = None,
        ready_timeout: float = DEFAULT_READY_TIMEOUT,
        stop_timeout: float = DEFAULT_STOP_TIMEOUT,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.port = port
        self.controller_port = controller_port
        self.host = host
        self.flush_every_message = flush_every_message
        self.heap = heap
        self.cache_dir = cache_dir
        self.ready_timeout = ready_timeout
        self.stop_timeout = stop_timeout
        self.info: BrokerInfo | None = None

    @property
    def bootstrap(self) -> str:
        if self.info is None:
            raise BrokerError("EmbeddedBroker.start() has not been called")
        return self.info.bootstrap

    def start(self) -> BrokerInfo:
        self.info = start(
            self.data_dir,
            self.port,
            self.controller_port,
            self.host,
            flush_every_message=self.flush_every_message,
            heap=self.heap,
            cache_dir=self.cache_dir,
            ready_timeout=self.ready_timeout,
            owner_pid=os.getpid(),
        )
        return self.info

    def stop(self) -> None:
        if self.info is not None and (self.info.started or self.info.adopted):
            stop(self.data_dir, timeout=self.stop_timeout)
        self.info = None

    def __enter__(self) -> BrokerInfo:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> None:
        self.stop()
