"""Every Kafka topic and group name KQS uses, in one place."""

from __future__ import annotations

CATALOG_TOPIC = "__kqs_queues"
LEASES_TOPIC = "__kqs_leases"
EVENTS_TOPIC = "__kqs_events"
# Written by the Spark jobs (spark_streaming/settings.py, which ships without this package,
# spells them again), read by the dashboard.
METRICS_TOPIC = "__kqs_metrics"
DLQ_ANALYTICS_TOPIC = "__kqs_dlq_analytics"
INGEST_GROUP = "kqs-gateway"
# The dashboard never commits offsets; librdkafka wants a group id all the same.
DASHBOARD_GROUP = "kqs-dashboard"


def queue_topic(account_id: str, queue_name: str, incarnation_hex: str) -> str:
    """One topic per queue incarnation, so a re-created queue never sees old records.

    Queue names are `[A-Za-z0-9_-]{1,80}`, all legal in topic names, and the result stays far
    below Kafka's 249-character limit.
    """
    return f"kqs.{account_id}.{queue_name}.{incarnation_hex}"


def catalog_key(account_id: str, queue_name: str) -> str:
    return f"{account_id}/{queue_name}"
