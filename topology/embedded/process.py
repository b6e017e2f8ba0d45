"""The broker's JVM as a process: its pid file, whether it still runs, signals to it.

A broker is found again from any process through the pid file in its data directory; the
ones this process launched are also kept as `Popen` objects (`_CHILDREN`), so they are
reaped. The broker itself is ``broker.py``'s.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

from topology.embedded.broker_config import _CONFIG_FILE

_PID_FILE = "broker.pid"

# Popen objects of brokers launched by this process. Keeping them lets stop() reap the
# child (no zombie) and stops Popen.__del__ from warning that the child is still running.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def _owner_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _is_zombie(pid)


def _pid_file(data_dir: Path) -> Path:
    return data_dir / _PID_FILE


def _running_pid(data_dir: Path) -> int | None:
    """The pid from the pid file if that process is alive and is this data dir's broker."""
    try:
        pid = int(_pid_file(data_dir).read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None
    if not _pid_alive(pid):
        return None
    # After a reboot the pid may belong to an unrelated process; the broker's command line
    # names its config file, which is unique to the data dir.
    cmdline = _cmdline(pid)
    if cmdline is not None and str(data_dir / _CONFIG_FILE) not in cmdline:
        return None
    return pid


def _pid_alive(pid: int) -> bool:
    child = _CHILDREN.get(pid)
    if child is not None:
        return child.poll() is None  # also reaps it, so it can't linger as a zombie
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, but belongs to someone else
    return not _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except OSError:
        return False
    # The state letter follows the parenthesised command name, which may contain spaces.
    return stat.rpartition(")")[2].split()[:1] == ["Z"]


def _cmdline(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None  # no /proc (macOS) or gone: fall back to trusting the pid
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _wait_for_exit(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _pid_alive(pid):
            return True
        time.sleep(0.1)
    return not _pid_alive(pid)
