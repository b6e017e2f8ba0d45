"""Results handed between gateways: the lease facts a browse asks of a partition's owner."""

from __future__ import annotations

import json

from gateway.common.results import LeaseFacts
from lease_store.records import LeaseFact


def test_lease_facts_travel_as_json_and_come_back_the_same() -> None:
    facts = LeaseFacts(
        41,
        {
            40: LeaseFact(1_000, 61_000, 2, 5_000, 31_000),
            41: None,  # deleted
            42: None,  # not applied yet (above 41)
        },
    )
    assert LeaseFacts.decode(json.loads(json.dumps(facts.encode()))) == facts
