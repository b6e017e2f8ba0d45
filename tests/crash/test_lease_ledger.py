"""The lease ledger counts a message delivered again inside an earlier delivery's lease, and
tells apart those that a gateway's SIGKILL in between explains (a receive is not made
durable). No gateway: deliveries are recorded as a consumer would."""

from __future__ import annotations

import time

from tests.support.lease_ledger import LeaseLedger


def test_a_second_delivery_inside_the_lease_counts_unless_a_gateway_was_killed_in_between() -> None:
    # Given a message delivered with a 10 s lease, and again a moment later
    ledger = LeaseLedger()
    ledger.received("m1", "handle-1", asked_at=time.monotonic(), visibility_s=10)
    killed_at = time.monotonic()
    ledger.received("m1", "handle-2", asked_at=time.monotonic(), visibility_s=10)
    # And another delivered once
    ledger.received("m2", "handle-3", asked_at=time.monotonic(), visibility_s=10)

    # Then only the first counts as delivered twice inside its lease
    twice = ledger.twice_inside_a_lease()
    assert list(twice) == ["m1"]
    # And a kill between its deliveries explains it, one after them does not
    assert list(ledger.after_a_crash(twice, [killed_at])) == ["m1"]
    assert ledger.after_a_crash(twice, [time.monotonic() + 1]) == {}


def test_a_delivery_after_the_lease_ended_is_not_inside_it() -> None:
    # Given a lease that ended (a visibility timeout of 1 s, less the ledger's 1 s margin)
    ledger = LeaseLedger()
    ledger.received("m1", "handle-1", asked_at=time.monotonic(), visibility_s=1)
    ledger.received("m1", "handle-2", asked_at=time.monotonic(), visibility_s=1)

    # Then the second delivery is not one inside the first's lease
    assert ledger.twice_inside_a_lease() == {}
