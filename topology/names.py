"""Every Kafka topic and group name KQS uses, in one place.

A queue is named by (region, account id, queue name). A queue of the gateway's default region
has names without the region, as every queue had before regions existed: catalog key
`<account>/<name>`, topic `kqs.<account>.<name>.<incarnation>`. A queue of any other region
carries it in both: `<region>/<account>/<name>` and `kqs.<region>.<account>.<name>.<incarnation>`.
Which form a queue uses is decided once, at CreateQueue, and kept in its catalog record
(`QueueRecord.region_in_names`), so its names never change, even if the default region
setting does. The forms cannot be confused: a region, an account id, a queue name and an
incarnation never contain `.` or `/`, so the number of parts says which form a name has
(`parse_queue_topic`).
"""

from __future__ import annotations

import re

CATALOG_TOPIC = "__kqs_queues"
LEASES_TOPIC = "__kqs_leases"
# Which gateway last served each queue partition, and where it answers (ownership mode).
OWNERS_TOPIC = "__kqs_owners"
EVENTS_TOPIC = "__kqs_events"
# The message move tasks (DLQ redrives), so that a task outlives the gateway running it.
MOVE_TASKS_TOPIC = "__kqs_move_tasks"
# The CloudFormation stacks (gateway/cloudformation/), one compacted record per stack.
STACKS_TOPIC = "__kqs_stacks"
# The message replay tasks (gateway/sqs/replay/), kept the same way.
REPLAY_TASKS_TOPIC = "__kqs_replay_tasks"
# Written by the Spark jobs (spark_streaming/settings.py, which ships without this package,
# spells them again), read by the dashboard.
METRICS_TOPIC = "__kqs_metrics"
DLQ_ANALYTICS_TOPIC = "__kqs_dlq_analytics"
INGEST_GROUP = "kqs-gateway"
# The dashboard never commits offsets; librdkafka wants a group id all the same.
DASHBOARD_GROUP = "kqs-dashboard"

# What a region may look like (`us-east-1`, `eu-central-2`, `us-gov-west-1`, a test's
# `local`): lower-case letters, digits and hyphens, so it is legal in a topic name and never
# holds the separators `.` and `/`.
REGION_PATTERN = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?$")


def queue_topic(region: str, account_id: str, queue_name: str, incarnation_hex: str) -> str:
    """One topic per queue incarnation, so a re-created queue never sees old records.

    `region` is "" for the region-less form (see the module's docstring). Queue names
    are `[A-Za-z0-9_-]{1,80}`, all legal in topic names; with a region of at most 32
    characters the result stays far below Kafka's 249-character limit.
    """
    if not region:
        return f"kqs.{account_id}.{queue_name}.{incarnation_hex}"
    return f"kqs.{region}.{account_id}.{queue_name}.{incarnation_hex}"


def is_queue_topic(topic: str) -> bool:
    """Whether `topic` is a queue's (KQS's own topics start with `__kqs_`)."""
    return topic.startswith("kqs.")


def parse_queue_topic(topic: str) -> tuple[str, str, str, str] | None:
    """(region or "" for the region-less form, account id, queue name, incarnation), or None."""
    parts = topic.split(".")
    if parts[0] != "kqs" or len(parts) not in (4, 5) or not all(parts[1:]):
        return None
    if len(parts) == 4:
        return "", parts[1], parts[2], parts[3]
    return parts[1], parts[2], parts[3], parts[4]


def catalog_key(region: str, account_id: str, queue_name: str) -> str:
    """The queue's key in `__kqs_queues` and `__kqs_events`; `region` "": the region-less form."""
    if not region:
        return f"{account_id}/{queue_name}"
    return f"{region}/{account_id}/{queue_name}"
