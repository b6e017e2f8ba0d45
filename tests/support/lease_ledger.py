"""What a consumer saw of its leases: each message's deliveries with the deadline of each one's
lease, so that a message delivered again before its earlier lease ran out counts as *delivered
twice inside its lease* (the promise SQS makes: while a lease holds, no other consumer gets
the message).

The deadline is measured on the consumer's side and conservatively: from the moment the
receive was *sent*, plus its visibility timeout, less a margin for clocks and the gateway's
timer granularity. A delivery counts against a lease only when it was *answered* before that
deadline, so a slow answer can only hide a double delivery, never invent one.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

# Slack taken off every lease's deadline: the gateway's clock and the consumer's are one
# machine's, but the gateway's expiry timer and a changed visibility act within this.
DEADLINE_MARGIN_S = 1.0


@dataclass
class Delivery:
    received_at: float  # time.monotonic() when the answer came
    lease_until: float  # time.monotonic() before which no other delivery may come
    receipt_handle: str
    where: str  # which gateway or consumer got it (for the failure message)


@dataclass
class LeaseLedger:
    """Thread-safe: several consumer threads write to one ledger."""

    deliveries: dict[str, list[Delivery]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def received(
        self,
        key: str,
        receipt_handle: str,
        asked_at: float,
        visibility_s: float,
        where: str = "",
    ) -> None:
        """A delivery of the message `key` (its body or MessageId) by a receive sent at
        `asked_at` (monotonic) with `visibility_s` as its visibility timeout."""
        now = time.monotonic()
        until = asked_at + visibility_s - DEADLINE_MARGIN_S
        with self._lock:
            self.deliveries.setdefault(key, []).append(Delivery(now, until, receipt_handle, where))

    def released(self, key: str, receipt_handle: str) -> None:
        """The lease of this delivery ended early (a visibility change to 0): a delivery after
        it is not one inside the lease."""
        with self._lock:
            for delivery in self.deliveries.get(key, []):
                if delivery.receipt_handle == receipt_handle:
                    delivery.lease_until = min(delivery.lease_until, time.monotonic())

    def extended(self, key: str, receipt_handle: str, asked_at: float, visibility_s: float) -> None:
        """A visibility change accepted for this delivery: its lease now runs `visibility_s`
        from when the change was sent (conservative, as for a receive)."""
        with self._lock:
            for delivery in self.deliveries.get(key, []):
                if delivery.receipt_handle == receipt_handle:
                    delivery.lease_until = asked_at + visibility_s - DEADLINE_MARGIN_S

    def twice_inside_a_lease(self) -> dict[str, list[Delivery]]:
        """The messages delivered again while an earlier delivery's lease still held."""
        with self._lock:
            found = {}
            for key, deliveries in self.deliveries.items():
                ordered = sorted(deliveries, key=lambda d: d.received_at)
                for i, later in enumerate(ordered):
                    if any(earlier.lease_until > later.received_at for earlier in ordered[:i]):
                        found[key] = ordered
                        break
            return found

    def after_a_crash(
        self, twice: dict[str, list[Delivery]], crashes: list[float]
    ) -> dict[str, list[Delivery]]:
        """Those of `twice` that a crash explains: every delivery of theirs that came inside an
        earlier one's lease came after a gateway was SIGKILLed (at one of `crashes`,
        monotonic) since that earlier delivery. A receive is not made durable (README,
        "Durability"): a gateway killed after it answered may not have written the lease, and
        the message is delivered again."""
        explained = {}
        for key, ordered in twice.items():
            pairs = [
                (earlier, later)
                for i, later in enumerate(ordered)
                for earlier in ordered[:i]
                if earlier.lease_until > later.received_at
            ]
            if all(
                any(
                    earlier.received_at - DEADLINE_MARGIN_S <= t <= later.received_at
                    for t in crashes
                )
                for earlier, later in pairs
            ):
                explained[key] = ordered
        return explained

    def keys(self) -> set[str]:
        with self._lock:
            return set(self.deliveries)

    def count(self) -> int:
        with self._lock:
            return sum(len(d) for d in self.deliveries.values())


def describe(twice: dict[str, list[Delivery]], limit: int = 5) -> str:
    """A few of the messages delivered twice inside a lease, for a failure message."""
    lines = []
    for key, deliveries in list(twice.items())[:limit]:
        start = deliveries[0].received_at
        seen = ", ".join(f"+{d.received_at - start:.2f}s via {d.where or '?'}" for d in deliveries)
        lines.append(f"{key}: {seen}")
    return f"{len(twice)} messages delivered twice inside their lease: " + "; ".join(lines)
