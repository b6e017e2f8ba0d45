"""Clocks the tests move by hand."""

from __future__ import annotations


class Monotonic:
    """A clock the test moves (the loop's timers still run in real time)."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now
