"""When a gateway counts as having stood still, and how long it then waits for the group.

Shared by the event loop's watch (`gateway/cluster/pause_watch.py`) and the lease changelog's
follower producer (`FollowerProducer._holding`), which judge the same stop from their own
threads.
"""

from __future__ import annotations

# A process standing still this long may have missed the group's session (6 s,
# `topology.ingest.SESSION_TIMEOUT_MS`); half of it, so that a stall just short of the
# session, after which the group may still evict the gateway, counts too. A process busy this
# long without a stop costs its changes one `SETTLE_S` wait, no more.
STALL_S = 3.0
# How long changes wait after a stall for the loss of the partitions to reach the gateway:
# librdkafka's session check runs as soon as its threads run again (milliseconds in
# `tests/e2e/several_gateways/test_e2e_ownership.py`'s SIGSTOP test), the hand-over to the loop takes a turn.
SETTLE_S = 1.0
