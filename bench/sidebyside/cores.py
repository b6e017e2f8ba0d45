"""Pinning a child process to the cores a run gives it.

A module of its own, with nothing but the standard library, so that the speed probe (which the
test suite runs) does not pull in the server launcher's measuring tools (psutil, from the
`bench` extra).
"""

from __future__ import annotations

import os
from collections.abc import Sequence


def pin(cores: Sequence[int] | None) -> None:
    """Pin the calling process to `cores` (a child's `preexec_fn`); None or empty: leave it."""
    if cores:
        os.sched_setaffinity(0, set(cores))
