"""Which queue gauges the gateway publishes: changed ones every interval, idle ones a minute."""

from __future__ import annotations

from gateway.observability.gauges import GaugeThrottle
from lease_store.types import Counts


class _Clock:
    def __init__(self) -> None:
        self.now_s = 1000.0

    def __call__(self) -> float:
        return self.now_s


def test_unchanged_gauges_are_published_once_a_minute_changed_ones_at_once() -> None:
    # Given a throttle that saw an empty queue's gauges
    clock = _Clock()
    throttle = GaugeThrottle(unchanged_every_s=60, clock_s=clock)
    idle = (Counts(), 0)
    assert throttle.due("q", idle)
    # When the same numbers come again within the minute, they are not due
    clock.now_s += 10
    assert not throttle.due("q", idle)
    clock.now_s += 49
    assert not throttle.due("q", idle)
    # ... a minute after the last event they are, so every minute window has a sample
    clock.now_s += 1
    assert throttle.due("q", idle)
    # ... and changed numbers are due at once
    clock.now_s += 10
    assert throttle.due("q", (Counts(visible=1), 0))
    clock.now_s += 10
    assert throttle.due("q", (Counts(visible=1), 10))  # the oldest message's age grew


def test_a_queue_seen_again_after_it_was_forgotten_is_due() -> None:
    clock = _Clock()
    throttle = GaugeThrottle(unchanged_every_s=60, clock_s=clock)
    assert throttle.due("q", (Counts(), 0))
    throttle.forget_except(set())
    assert throttle.due("q", (Counts(), 0))
