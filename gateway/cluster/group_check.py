"""A single gateway warns when group-mode gateways already serve the same cluster.

A gateway with `KQS_PARTITION_OWNERSHIP=all` serves every partition of every queue; started
beside gateways in group mode (`KQS_PARTITION_OWNERSHIP=group`, or `kqs serve --workers`) it
would deliver their messages a second time and report gauges of its own for their queues.
Group-mode gateways are the live members of the ingest consumer group, so one
DescribeConsumerGroups request at start-up finds them. It warns rather than refuses: the
hand-over from `--workers` back to one gateway starts it right after the workers stopped,
and a SIGKILLed worker stays a member until its session times out.
"""

from __future__ import annotations

import logging

from confluent_kafka import KafkaException

from topology.admin import TopicAdmin
from topology.names import INGEST_GROUP

log = logging.getLogger("kqs.gateway")


async def warn_if_group_gateways(admin: TopicAdmin) -> list[str]:
    """Log a warning naming the group-mode gateways found; returns them (empty: none)."""
    try:
        members = await admin.group_members(INGEST_GROUP)
    except KafkaException as error:
        log.warning(
            "could not check for group-mode gateways on this cluster",
            extra={"group": INGEST_GROUP, "error": str(error)},
        )
        return []
    if members:
        log.warning(
            "group-mode gateways already serve this cluster's queues: this single gateway "
            "serves every partition too, so their messages would be delivered twice. Start "
            "it with KQS_PARTITION_OWNERSHIP=group to join them, or stop them first",
            extra={"group": INGEST_GROUP, "members": members},
        )
    return members
