"""A Spark standalone cluster on 127.0.0.1 from the PySpark distribution, and the analytics
submitted to it as docs/CONFIGURATION.md ("Analytics on a Spark cluster") says.

PyPI's PySpark ships `bin/spark-class` and `bin/spark-submit` but not `sbin/start-master.sh`,
so the master and workers are started the way those scripts start them:
`spark-class org.apache.spark.deploy.master.Master` and `...deploy.worker.Worker`. No Docker.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path

import pyspark

from tests.support.harness import free_port

SPARK_HOME = Path(pyspark.__file__).resolve().parent
REPO = Path(__file__).resolve().parents[2]
# What of `topology/` the analytics import, and so what the docs' zip command ships.
SHIPPED_TOPOLOGY = ("__init__.py", "client_properties.py")
READY_S = float(
    os.environ.get("KQS_SPARK_READY_S", "600")
)  # upper bound on a JVM's start on a loaded machine; not a measured duration
# One line per finished batch, as `spark_streaming/jobs.py` logs it (KeyValueFormatter).
BATCH_LINE = re.compile(
    r"kqs\.analytics batch query=(?P<query>\S+) batch=(?P<batch>\d+)"
    r"(?:[^\n]*? state_rows=(?P<state>\d+))?"
)


def _spark_env() -> dict[str, str]:
    return {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        # Everything on loopback: the driver would otherwise advertise the host's address.
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_DAEMON_MEMORY": "256m",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }


def _wait_for_line(log: Path, pattern: str, count: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        if text.count(pattern) >= count:
            return
        if process.poll() is not None:
            raise RuntimeError(f"{process.args!r} exited; see {log}:\n{text[-3000:]}")
        time.sleep(0.2)
    raise TimeoutError(f"no {pattern!r} x{count} in {log} after {READY_S} s")


class StandaloneCluster:
    """A master and `workers` workers (one core, 1 GiB each), stopped by `stop`."""

    def __init__(self, work_dir: Path, workers: int = 2) -> None:
        self.work_dir = work_dir
        self.port = free_port()
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self.workers = workers
        self._processes: list[subprocess.Popen[bytes]] = []

    def _launch(self, name: str, args: Sequence[str]) -> tuple[subprocess.Popen[bytes], Path]:
        log = self.work_dir / f"{name}.log"
        with log.open("ab") as out:
            process = subprocess.Popen(
                [str(SPARK_HOME / "bin" / "spark-class"), *args],
                stdout=out, stderr=subprocess.STDOUT, env=_spark_env(), start_new_session=True,
            )  # fmt: skip
        self._processes.append(process)
        return process, log

    def start(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        master, master_log = self._launch(
            "master",
            [
                "org.apache.spark.deploy.master.Master",
                "--host", "127.0.0.1", "--port", str(self.port), "--webui-port", "0",
            ],
        )  # fmt: skip
        _wait_for_line(master_log, "I have been elected leader", 1, master)
        for index in range(self.workers):
            work = self.work_dir / f"worker-{index}"
            work.mkdir(exist_ok=True)
            self._launch(
                f"worker-{index}",
                [
                    "org.apache.spark.deploy.worker.Worker",
                    "--host", "127.0.0.1", "--cores", "1", "--memory", "1g",
                    "--work-dir", str(work), "--webui-port", "0", self.master_url,
                ],
            )  # fmt: skip
        _wait_for_line(master_log, "Registering worker", self.workers, master)

    def stop(self) -> None:
        for process in reversed(self._processes):
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
        for process in self._processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)


def application_dir(work_dir: Path) -> Path:
    """A directory holding `spark_streaming/` and `kqs-spark.zip` with the files the docs'
    command zips (`zip -qr kqs-spark.zip spark_streaming topology/__init__.py
    topology/client_properties.py -x '*/__pycache__/*'`)."""
    app = work_dir / "app"
    shutil.copytree(
        REPO / "spark_streaming", app / "spark_streaming",
        ignore=shutil.ignore_patterns("__pycache__"),
    )  # fmt: skip
    (app / "topology").mkdir()
    for name in SHIPPED_TOPOLOGY:
        shutil.copy(REPO / "topology" / name, app / "topology" / name)
    with zipfile.ZipFile(app / "kqs-spark.zip", "w") as archive:
        shipped = [*(app / "spark_streaming").rglob("*.py"), *(app / "topology").glob("*.py")]
        for path in sorted(shipped):
            archive.write(path, path.relative_to(app).as_posix())
    return app


class SubmittedAnalytics:
    """`spark-submit ... spark_streaming/jobs.py` in a process group of its own (the driver
    JVM and the Python application under it), so a test can SIGKILL the whole driver."""

    def __init__(
        self,
        app: Path,
        master: str,
        jars: Sequence[Path],
        job_args: Sequence[str],
        log: Path,
    ) -> None:
        self.app = app
        self.command = [
            str(Path(sys.executable).parent / "spark-submit"),
            "--master", master, "--driver-memory", "1g",
            "--jars", ",".join(str(jar) for jar in jars),
            "--py-files", "kqs-spark.zip",
            "spark_streaming/jobs.py", *job_args,
        ]  # fmt: skip
        self.log = log
        self._process: subprocess.Popen[bytes] | None = None
        self._offset = 0  # where this start's lines begin in the log

    def start(self) -> None:
        self._offset = self.log.stat().st_size if self.log.exists() else 0
        env = {key: value for key, value in _spark_env().items() if key != "PYTHONPATH"}
        with self.log.open("ab") as out:
            self._process = subprocess.Popen(
                self.command, cwd=self.app, stdout=out, stderr=subprocess.STDOUT, env=env,
                start_new_session=True,
            )  # fmt: skip

    def lines(self) -> str:
        with self.log.open("rb") as log:
            log.seek(self._offset)
            return log.read().decode(errors="replace")

    def batches(self) -> dict[str, int]:
        """Batches finished per query since the last start."""
        done: dict[str, int] = {}
        for match in BATCH_LINE.finditer(self.lines()):
            done[match["query"]] = done.get(match["query"], 0) + 1
        return done

    def state_rows(self, query: str) -> int | None:
        """The aggregation state (rows of open windows) after `query`'s latest batch."""
        rows = None
        for match in BATCH_LINE.finditer(self.lines()):
            if match["query"] == query:
                rows = int(match["state"]) if match["state"] else None
        return rows

    def wait_for_batches(self, at_least: int, queries: int = 4) -> None:
        """Until each of the four queries finished `at_least` batches since the start."""
        deadline = time.monotonic() + READY_S
        while time.monotonic() < deadline:
            done = self.batches()
            if len(done) >= queries and min(done.values()) >= at_least:
                return
            assert self._process is not None
            if self._process.poll() is not None:
                raise RuntimeError(f"the driver exited; see {self.log}:\n{self.lines()[-4000:]}")
            time.sleep(0.5)
        raise TimeoutError(f"batches {self.batches()} after {READY_S} s; see {self.log}")

    def wait_for_more_batches(self, more: int) -> None:
        """Until each query finished `more` batches beyond what it has finished now."""
        done = self.batches()
        self.wait_for_batches(min(done.values(), default=0) + more)

    def kill(self) -> None:
        """SIGKILL the driver JVM and its Python application at once, as a crash would."""
        assert self._process is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._process.pid, signal.SIGKILL)
        self._process.wait(timeout=30)

    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None
