"""Settings of the analytics jobs: flags override environment variables, which override defaults.

This module is plain Python (no pyspark import) so ``kqs analytics --help`` stays fast, and it
imports nothing from the gateway: on a cluster, ``spark-submit`` ships ``spark_streaming``
with ``topology/client_properties.py`` (the Kafka client properties; plain Python too).
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from topology import client_properties

EVENTS_TOPIC = "__kqs_events"
METRICS_TOPIC = "__kqs_metrics"
DLQ_TOPIC = "__kqs_dlq_analytics"

WINDOW = "1 minute"
# How many top attribute values a DLQ window reports.
TOP_ATTRIBUTES = 5


@dataclass(frozen=True)
class AnalyticsSettings:
    bootstrap: str = field(
        default_factory=lambda: os.environ.get("KQS_KAFKA_BOOTSTRAP", "127.0.0.1:9092")
    )
    # A local directory, or a URI Spark can write to (hdfs://..., s3a://...) on a cluster.
    data_dir: str = field(default_factory=lambda: os.environ.get("KQS_DATA_DIR", "data"))
    master: str = field(default_factory=lambda: os.environ.get("KQS_SPARK_MASTER", "local[2]"))
    trigger_seconds: float = 10.0
    # The Parquet queries only write windows the watermark closed (at most one a minute per
    # queue): a batch a minute is enough, and costs a sixth of one every 10 s.
    file_trigger_seconds: float = 60.0
    # Events later than this behind the newest event time seen are dropped; windows close (and
    # reach the Parquet files) this long after their end.
    watermark_seconds: int = 60
    # "earliest" on a first run analyses the whole retained history of `__kqs_events`;
    # afterwards the checkpoint decides where each query resumes.
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int = 200_000
    shuffle_partitions: int = 2
    driver_memory: str = "1g"
    events_topic: str = EVENTS_TOPIC
    metrics_topic: str = METRICS_TOPIC
    dlq_topic: str = DLQ_TOPIC

    replication_factor: int = field(
        default_factory=lambda: int(os.environ.get("KQS_REPLICATION_FACTOR", "1"))
    )
    # The Kafka client properties (TLS, SASL) as the user wrote them: `--kafka-config FILE`
    # / KQS_KAFKA_CONFIG and KQS_KAFKA_* (topology/client_properties.py).
    kafka_properties: client_properties.ClientProperties = field(
        default_factory=client_properties.ClientProperties
    )

    def spark_kafka_options(self) -> dict[str, str]:
        """The properties for Spark's Kafka source and sink, with their ``kafka.`` prefix."""
        return {f"kafka.{k}": v for k, v in self.kafka_properties.java().items()}

    def admin_config(self) -> dict[str, str]:
        """The properties for a librdkafka client of this cluster (the driver's admin client)."""
        return {"bootstrap.servers": self.bootstrap, **self.kafka_properties.librdkafka()}

    @property
    def analytics_dir(self) -> str:
        if "://" in self.data_dir:
            return self.data_dir.rstrip("/") + "/analytics"
        return str(Path(self.data_dir).expanduser().resolve() / "analytics")

    @property
    def metrics_path(self) -> str:
        return f"{self.analytics_dir}/metrics"

    @property
    def dlq_path(self) -> str:
        return f"{self.analytics_dir}/dlq"

    def checkpoint(self, query: str) -> str:
        return f"{self.analytics_dir}/checkpoints/{query}"


def add_run_arguments(parser: argparse.ArgumentParser, *, master_default: str | None) -> None:
    defaults = AnalyticsSettings()
    parser.add_argument(
        "--master",
        default=master_default,
        help="Spark master (default: %(default)s)",
    )
    parser.add_argument(
        "--bootstrap",
        default=os.environ.get("KQS_KAFKA_BOOTSTRAP", ""),
        help="Kafka bootstrap servers (default: $KQS_KAFKA_BOOTSTRAP, else the embedded broker "
        "of <data-dir>/kafka that `kqs serve` started, else 127.0.0.1:9092)",
    )
    parser.add_argument(
        "--kafka-config",
        default="",
        metavar="FILE",
        help="Kafka client properties (TLS, SASL) for the Kafka source and sink "
        "(default: $KQS_KAFKA_CONFIG; KQS_KAFKA_* settings override its security keys)",
    )
    parser.add_argument(
        "--data-dir",
        default=defaults.data_dir,
        help="outputs go to <data dir>/analytics ($KQS_DATA_DIR, default %(default)s)",
    )
    parser.add_argument(
        "--trigger-seconds",
        type=float,
        default=defaults.trigger_seconds,
        help="micro-batch interval (default %(default)s)",
    )
    parser.add_argument(
        "--file-trigger-seconds",
        type=float,
        default=defaults.file_trigger_seconds,
        help="micro-batch interval of the Parquet outputs (closed windows; default %(default)s)",
    )
    parser.add_argument(
        "--watermark-seconds",
        type=int,
        default=defaults.watermark_seconds,
        help="how late an event may be; closed windows reach Parquet this long after their end",
    )
    parser.add_argument(
        "--starting-offsets",
        choices=("earliest", "latest"),
        default=defaults.starting_offsets,
        help="where a first run starts reading the events topic (default %(default)s)",
    )


def settings_from(args: argparse.Namespace) -> AnalyticsSettings:
    """Raises `client_properties.ClientPropertiesError` for unusable Kafka client properties."""
    properties = client_properties.load(args.kafka_config)
    return replace(
        AnalyticsSettings(),
        bootstrap=args.bootstrap or properties.bootstrap or AnalyticsSettings().bootstrap,
        kafka_properties=properties,
        data_dir=str(args.data_dir),
        trigger_seconds=args.trigger_seconds,
        file_trigger_seconds=args.file_trigger_seconds,
        watermark_seconds=args.watermark_seconds,
        starting_offsets=args.starting_offsets,
    )
