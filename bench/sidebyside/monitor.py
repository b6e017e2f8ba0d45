"""Resource use of a server's process tree during one workload, and of the load generator.

CPU seconds are user+system time summed over every process of the tree (for KQS: the gateway
and the broker JVM), taken as the difference between the start and the end of the workload;
peak RSS is the highest sum of the tree's resident sets among samples every 0.2 s.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import Any

import psutil

from bench.sidebyside.servers import Server


class TreeMonitor:
    def __init__(self, server: Server, interval_s: float = 0.2) -> None:
        self.server = server
        self.interval_s = interval_s
        self._first: dict[int, float] = {}
        self._last: dict[int, float] = {}
        self._peak_rss = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tree-monitor", daemon=True)
        self._client_cpu0 = 0.0
        self._wall0 = 0.0

    def _sample(self) -> None:
        rss = 0
        for proc in self.server.tree():
            with contextlib.suppress(psutil.Error):
                with proc.oneshot():
                    times = proc.cpu_times()
                    cpu = times.user + times.system
                    rss += proc.memory_info().rss
                self._first.setdefault(proc.pid, cpu)
                self._last[proc.pid] = cpu
        self._peak_rss = max(self._peak_rss, rss)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def __enter__(self) -> TreeMonitor:
        self._sample()
        times = os.times()
        self._client_cpu0 = times.user + times.system
        self._wall0 = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._sample()
        times = os.times()
        self.client_cpu_s = times.user + times.system - self._client_cpu0
        self.wall_s = time.monotonic() - self._wall0

    def result(self) -> dict[str, Any]:
        cpu = sum(self._last[pid] - self._first.get(pid, 0.0) for pid in self._last)
        return {
            "server_cpu_s": round(cpu, 2),
            "server_peak_rss_mb": round(self._peak_rss / 2**20, 1),
            "server_processes": len(self._last),
            "client_cpu_s": round(self.client_cpu_s, 2),
            "wall_s": round(self.wall_s, 2),
            # Share of one core the load generator used: near 1.0 means it was the limit.
            "client_core_share": round(self.client_cpu_s / self.wall_s, 2) if self.wall_s else None,
        }
