"""The Kafka ACLs KQS needs on a cluster with an authorizer, and nothing more.

Two principals: the gateways' (every `kqs serve` of a deployment) and the analytics'
(`kqs analytics`: Spark's Kafka source and sink, the driver's admin client, the dashboard).
Each grant is derived from what the code does:

gateway
  topics `kqs.` (prefixed, the queue topics, `names.queue_topic`): CREATE (CreateQueue),
  DELETE (DeleteQueue deletes the topic; PurgeQueue is DeleteRecords), ALTER_CONFIGS
  (SetQueueAttributes' retention, `TopicAdmin.set_topic_config`), WRITE (SendMessage: an
  idempotent producer, `topology/producer.py`; since Kafka 3.0 WRITE on a topic is all an
  idempotent producer needs, no IDEMPOTENT_WRITE on the cluster), READ (the ingest
  consumer), DESCRIBE (metadata, ListOffsets).
  topics `__kqs_` (prefixed: the catalog, lease changelog, owners, move tasks, events):
  CREATE, ALTER_CONFIGS (`TopicAdmin.ensure_durable` sets fsync on the durable ones),
  WRITE, READ, DESCRIBE.
  groups `kqs-` (prefixed): READ (the ingest group `kqs-gateway`: joins, offset commits;
  the readers `kqs-topic-reader`, `kqs-topic-tail`, `kqs-lease-rebuild`, `kqs-hand-over`
  that librdkafka wants a group id for), DESCRIBE (the backlog's committed offsets).
  No transactional ids: KQS's producers are idempotent, not transactional.

analytics
  topic `__kqs_events`: READ, DESCRIBE. Topics `__kqs_metrics`, `__kqs_dlq_analytics`:
  CREATE (the driver creates them once), WRITE (Spark's sink, idempotent by default),
  READ (the dashboard), DESCRIBE. Groups `spark-kafka-source-` (prefixed; Spark's Kafka
  source names its consumers so) and `kqs-dashboard`: READ.
"""

from __future__ import annotations

from dataclasses import dataclass

from topology.names import (
    DASHBOARD_GROUP,
    DLQ_ANALYTICS_TOPIC,
    EVENTS_TOPIC,
    METRICS_TOPIC,
)

QUEUE_TOPIC_PREFIX = "kqs."
INTERNAL_TOPIC_PREFIX = "__kqs_"
GROUP_PREFIX = "kqs-"
SPARK_GROUP_PREFIX = "spark-kafka-source-"


@dataclass(frozen=True)
class Grant:
    """Allow `operations` on the resources of `resource_type` named `name` (or starting with
    it, when `prefixed`), from any host."""

    resource_type: str  # "topic" | "group"
    name: str
    prefixed: bool
    operations: tuple[str, ...]  # Kafka's names: READ, WRITE, CREATE, ...

    def command(self, principal: str) -> str:
        """The grant as a `kafka-acls.sh` command line (`--command-config` for a secured cluster)."""
        pattern = " --resource-pattern-type prefixed" if self.prefixed else ""
        operations = " ".join(f"--operation {_tool_name(op)}" for op in self.operations)
        return (
            f"kafka-acls.sh --bootstrap-server $BOOTSTRAP --command-config admin.properties "
            f"--add --allow-principal {principal} {operations} "
            f"--{self.resource_type} {self.name}{pattern}"
        )


def _tool_name(operation: str) -> str:
    """kafka-acls.sh spells operations in CamelCase (AlterConfigs, not ALTER_CONFIGS)."""
    return "".join(part.capitalize() for part in operation.split("_"))


GATEWAY = (
    Grant(
        "topic",
        QUEUE_TOPIC_PREFIX,
        True,
        ("CREATE", "DELETE", "ALTER_CONFIGS", "WRITE", "READ", "DESCRIBE"),
    ),
    Grant(
        "topic",
        INTERNAL_TOPIC_PREFIX,
        True,
        ("CREATE", "ALTER_CONFIGS", "WRITE", "READ", "DESCRIBE"),
    ),
    Grant("group", GROUP_PREFIX, True, ("READ", "DESCRIBE")),
)

ANALYTICS = (
    Grant("topic", EVENTS_TOPIC, False, ("READ", "DESCRIBE")),
    Grant("topic", METRICS_TOPIC, False, ("CREATE", "WRITE", "READ", "DESCRIBE")),
    Grant("topic", DLQ_ANALYTICS_TOPIC, False, ("CREATE", "WRITE", "READ", "DESCRIBE")),
    Grant("group", SPARK_GROUP_PREFIX, True, ("READ",)),
    Grant("group", DASHBOARD_GROUP, False, ("READ",)),
)
