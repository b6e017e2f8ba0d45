"""A gateway never silently shares a cluster's partitions with another gateway.

A gateway with `KQS_PARTITION_OWNERSHIP=all` (the default) serves every partition of every
queue. A second gateway on the same cluster, in either mode, would deliver the same
messages a second time (measured before this check: 780 of 960 messages delivered twice
inside their lease, issue 55); a group-mode gateway beside a mode-`all` one likewise. So at
start-up, before it serves anything, a gateway becomes a member of the presence group
(`topology/presence.py`) and looks at the others:

* mode `all` meets any other live gateway (a presence member with another id, or a member
  of the ingest group: a group-mode gateway);
* mode `group` meets a live mode-`all` gateway.

On such a meeting it waits up to `STALE_MEMBER_WAIT_S` (a gateway SIGKILLed a moment ago
stays a member until its 6 s session ends: the hand-over from `--workers` back to one
gateway, or the other way, starts the next right after the last stopped), then refuses to
start (`SharedCluster`) with a message that names the other gateways and the setting that
makes them share safely (`KQS_PARTITION_OWNERSHIP=group` on every one). Refusing rather than
switching modes by itself: the gateway already running would have to switch too, and moving
a live single gateway's lease state into the group is a hand-over of its own
(`gateway/cluster/hand_over.py` does it for `kqs serve --workers`).

`KQS_SHARED_CLUSTER=warn` keeps the old behaviour (a warning naming them) for a deployment
that runs independent single gateways on one cluster on purpose, each used for queues of
its own; the test suite's gateways on its shared broker are such.

A gateway with the same id (this data directory's, restarted after a crash) is this one.
"""

from __future__ import annotations

import asyncio
import logging
import time

from confluent_kafka import KafkaException

from topology.admin import TopicAdmin
from topology.names import INGEST_GROUP
from topology.presence import PRESENCE_GROUP, SESSION_TIMEOUT_MS, Member, parse_member

log = logging.getLogger("kqs.gateway")

# A dead gateway's membership outlives it by its session; a little more, to be sure.
STALE_MEMBER_WAIT_S = SESSION_TIMEOUT_MS / 1000 + 2.0
# How long a starting gateway waits to become a member before it looks: a join takes a
# fraction of a second, but waits for a dead member's session to end (a gateway restarted
# after a crash meets its own), and for the cluster's `group.initial.rebalance.delay.ms`
# (3 s by default; the embedded broker's 0). Two gateways starting within this of each other
# see each other; later ones see the earlier ones anyway.
JOIN_WAIT_S = 2.0
_RECHECK_S = 0.5
# `kqs serve`'s exit status when it refuses; a `--workers` supervisor does not restart a
# worker that exits with it.
SHARED_CLUSTER_EXIT = 3


class SharedCluster(RuntimeError):
    """Another gateway serves this cluster in a mode that cannot share its partitions."""


async def others_in_the_way(admin: TopicAdmin, mode: str, gateway: str) -> list[str]:
    """The live gateways this one (`mode`, id `gateway`) must not serve beside, described."""
    found: list[str] = []
    for raw in await admin.group_members(PRESENCE_GROUP):
        member = parse_member(raw)
        if member is None or member.gateway == gateway:
            continue
        if _clash(mode, member):
            found.append(str(member))
    if mode == "all":
        # Group-mode gateways are the ingest group's members (those from before the presence
        # group are found there too).
        found += [f"{raw} (group)" for raw in await admin.group_members(INGEST_GROUP)]
    return sorted(set(found))


def _clash(mode: str, other: Member) -> bool:
    return mode == "all" or other.mode == "all"


async def check_alone(admin: TopicAdmin, mode: str, gateway: str, policy: str) -> list[str]:
    """Raise `SharedCluster` (or, with `policy` "warn", log a warning) when other gateways
    serve this cluster in a way this one cannot share it with; returns them (empty: none)."""
    try:
        others = await others_in_the_way(admin, mode, gateway)
        if others and policy != "warn":
            log.info(
                "other gateways on this cluster: waiting for any dead one's session to end",
                extra={"members": others, "wait_s": STALE_MEMBER_WAIT_S},
            )
        deadline = time.monotonic() + STALE_MEMBER_WAIT_S
        while others and policy != "warn" and time.monotonic() < deadline:
            await asyncio.sleep(_RECHECK_S)  # perhaps a dead one whose session still runs
            others = await others_in_the_way(admin, mode, gateway)
    except KafkaException as error:
        log.warning(
            "could not check for other gateways on this cluster",
            extra={"group": PRESENCE_GROUP, "error": str(error)},
        )
        return []
    if not others:
        return others
    if mode == "all":
        what = (
            "this gateway (KQS_PARTITION_OWNERSHIP=all, the default) would serve every "
            "partition beside them and deliver their messages a second time"
        )
    else:
        what = (
            "a gateway with KQS_PARTITION_OWNERSHIP=all (the default) serves every partition "
            "there, so this one would deliver its messages a second time"
        )
    message = (
        f"other KQS gateways serve this Kafka cluster: {', '.join(others)}; {what}. "
        "To run several gateways, set KQS_PARTITION_OWNERSHIP=group (and one "
        "KQS_RECEIPT_SECRET) on every one of them, or stop the others first"
    )
    if policy == "warn":
        log.warning(message, extra={"members": others})
        return others
    raise SharedCluster(message)
