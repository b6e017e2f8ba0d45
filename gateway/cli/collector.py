"""The cyclic garbage collector, tuned for a gateway that serves for days.

With CPython's defaults (a young collection every 700 container allocations, a full one
whenever the objects that survived two young collections reach a quarter of the old
generation), a busy gateway promotes every object of every request still waiting for Kafka:
an acknowledgement takes tens of milliseconds, a young collection runs every millisecond or
so. Those objects then die in the old generation and soon call a full collection, which walks
everything the gateway keeps: each queue's catalog entry and partition state, and each stored
message's offset in its partition's visibility (`lease_store/visibility.py`). At seed 004's
scale (10,000 queues, millions of messages) that was ~20 full collections every 30 s, each
0.2 s and growing with the messages stored (3 s with 10 million stored and 5 million held),
15-20 % of the gateway's time with the GIL held (bench/results/archive/profile-journal.md,
2026-11-27 (7d628ec)).

A young generation of `YOUNG_THRESHOLD` allocations is collected every few tens of
milliseconds instead, so a request's objects are garbage by the time it is looked at twice
and are never promoted; full collections are then left to what really accumulates. The
objects of the imports and the configuration are frozen out of every collection first: they
live as long as the process.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 50_000  # container allocations between young collections (default 700)
MIDDLE_THRESHOLD = 20  # young collections between collections of the middle generation (10)


def tune_for_serving() -> None:
    """Freeze what exists now (call before building the gateway) and raise the thresholds."""
    gc.collect()
    gc.freeze()
    _, _, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, MIDDLE_THRESHOLD, old)
