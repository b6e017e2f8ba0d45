"""How fast the machine runs right now: a fixed CPU-bound Python loop, timed on given cores.

This VM's speed moves by up to ~1.8x within a minute with nothing else running (a
5,000,000-step loop pinned to one core took 356-625 ms: bench/results/archive/profile-journal.md,
2026-11-29 (93a14be)), and a server's rate moves with it. The side-by-side probes the server
cores before each run starts and after it ends, so a report shows the machine speed each
figure was taken at.
The probe runs alone on the cores (no server is up then), in a process of its own, and takes
well under a second.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
from collections.abc import Sequence

from bench.sidebyside.cores import pin

# 50-100 ms per timing on this machine: long enough to span several scheduler ticks, short
# enough to add nothing that matters to a run's time.
_STEPS = 1_000_000
_TIMINGS = 3
_LOOP = (
    "import time\n"
    "for _ in range({timings}):\n"
    "    t = time.perf_counter()\n"
    "    x = 0\n"
    "    for i in range({steps}):\n"
    "        x += i\n"
    "    print(time.perf_counter() - t)\n"
)


def probe_ms(cores: Sequence[int] | None) -> float:
    """Milliseconds the fixed loop takes on `cores` (median of three timings; lower is
    faster). Without cores, wherever the scheduler puts it."""
    command = [sys.executable, "-c", _LOOP.format(timings=_TIMINGS, steps=_STEPS)]
    out = subprocess.run(
        command,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        preexec_fn=(lambda: pin(cores)) if cores else None,
    )
    return round(statistics.median(float(line) for line in out.stdout.split()) * 1000, 1)
