"""Gateway settings: flags override environment variables, which override defaults."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from topology import client_properties
from topology.admin import USE_CLUSTER_DEFAULT
from topology.client_properties import ClientProperties
from topology.ingest import DEFAULT_FETCH_WAIT_MS
from topology.producer import DEFAULT_BULK_LINGER_MS, DEFAULT_FILL_LINGER_MS, DEFAULT_LINGER_MS


def _env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


@dataclass(frozen=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 9324
    data_dir: Path = field(default_factory=lambda: Path(os.environ.get("KQS_DATA_DIR", "data")))
    # Empty: start the embedded single-node broker. Set: use that cluster, start nothing.
    kafka_bootstrap: str = field(default_factory=lambda: os.environ.get("KQS_KAFKA_BOOTSTRAP", ""))
    # A Kafka client properties file (`client.properties`: TLS, SASL) every Kafka client of the
    # gateway is given, with the `KQS_KAFKA_*` security settings over it
    # (topology/client_properties.py); empty: plaintext, unauthenticated.
    kafka_config: str = field(default_factory=lambda: os.environ.get("KQS_KAFKA_CONFIG", ""))
    kafka_port: int = field(default_factory=lambda: _env_int("KQS_KAFKA_PORT", 9092))
    kafka_controller_port: int = field(
        default_factory=lambda: _env_int("KQS_KAFKA_CONTROLLER_PORT", 9093)
    )
    # JVM -Xmx of the embedded broker: its heap grows with the number of partitions.
    broker_heap: str = field(default_factory=lambda: os.environ.get("KQS_BROKER_HEAP", ""))
    # Replicas of each topic KQS creates; -1: the cluster's `default.replication.factor`
    # (1 on the embedded broker, 3 on the test cluster and in compose/).
    replication_factor: int = field(
        default_factory=lambda: _env_int("KQS_REPLICATION_FACTOR", USE_CLUSTER_DEFAULT)
    )
    partitions: int = field(default_factory=lambda: _env_int("KQS_PARTITIONS", 1))
    # How long a standard queue's message is held in memory before its lease-store keys are
    # written (`lease_store/young.py`); 0 writes them at ingest.
    lease_young_ms: int = field(default_factory=lambda: _env_int("KQS_LEASE_YOUNG_MS", 1000))
    # fsync each append to the topics holding a durable record (queue topics, the catalog)
    # before it is acknowledged. On a replicated cluster, replicas may be protection enough.
    topic_fsync: bool = field(
        default_factory=lambda: os.environ.get("KQS_TOPIC_FSYNC", "1") not in ("0", "false")
    )
    # The embedded broker's log directory, when this gateway syncs the queue topics' segments
    # there itself instead of the broker (topology/segment_sync.py): set by `kqs serve` when
    # it starts the broker (and handed to its workers); None: the broker syncs them.
    segment_sync_dir: Path | None = field(
        default_factory=lambda: Path(d) if (d := os.environ.get("KQS_SEGMENT_SYNC_DIR")) else None
    )
    account_id: str = field(
        default_factory=lambda: os.environ.get("KQS_ACCOUNT_ID", "000000000000")
    )
    region: str = field(default_factory=lambda: os.environ.get("KQS_REGION", "us-east-1"))
    # HTTPS: the certificate chain and private key (PEM files) of the port above; empty: HTTP.
    tls_cert: str = field(default_factory=lambda: os.environ.get("KQS_TLS_CERT", ""))
    tls_key: str = field(default_factory=lambda: os.environ.get("KQS_TLS_KEY", ""))
    # With HTTPS and several gateways: the CA certificates (PEM) that signed the other
    # gateways' certificates, when neither the system's CAs nor this gateway's own
    # certificate file vouch for them (gateway/http/tls.py `peer_client_context`).
    tls_peer_ca: str = field(default_factory=lambda: os.environ.get("KQS_TLS_PEER_CA", ""))
    # With HTTPS on, a second port answering plain HTTP too (local use); 0: none.
    http_port: int = field(default_factory=lambda: _env_int("KQS_HTTP_PORT", 0))
    # Behind a proxy, the URL clients must use; by default the host each request came to.
    base_url: str = field(default_factory=lambda: os.environ.get("KQS_BASE_URL", ""))
    receipt_secret: str = field(default_factory=lambda: os.environ.get("KQS_RECEIPT_SECRET", ""))
    # Who owns the queue partitions: "all" (this gateway, every one: a single gateway) or
    # "group" (several gateways share them through the ingest group; see gateway/cluster/ownership.py).
    partition_ownership: str = field(
        default_factory=lambda: os.environ.get("KQS_PARTITION_OWNERSHIP", "all")
    )
    # What a gateway does on meeting other gateways it cannot share the cluster with
    # (gateway/cluster/group_check.py): "refuse" to start, or "warn" and serve beside them
    # (independent single gateways on one cluster, each with queues of its own).
    shared_cluster: str = field(
        default_factory=lambda: os.environ.get("KQS_SHARED_CLUSTER", "refuse")
    )
    # Group mode: the URL other gateways reach this one at (default http://<host>:<port>).
    advertised_url: str = field(default_factory=lambda: os.environ.get("KQS_ADVERTISED_URL", ""))
    # How late a record another producer wrote may become receivable (topology/ingest.py).
    ingest_fetch_wait_ms: int = field(
        default_factory=lambda: _env_int("KQS_INGEST_FETCH_WAIT_MS", DEFAULT_FETCH_WAIT_MS)
    )
    # librdkafka producers the queue topics are spread over (topology/producer.py AsyncProducer).
    producer_shards: int = field(default_factory=lambda: _env_int("KQS_PRODUCER_SHARDS", 16))
    # How long the queue-topic producer waits to fill a produce request (librdkafka linger.ms).
    produce_linger_ms: int = field(
        default_factory=lambda: _env_int("KQS_PRODUCE_LINGER_MS", DEFAULT_LINGER_MS)
    )
    # The linger of the producer standard-queue sends join while the gateway is busy (0: no
    # bulk producer; topology/producer.py DEFAULT_BULK_LINGER_MS says why).
    produce_bulk_linger_ms: int = field(
        default_factory=lambda: _env_int("KQS_PRODUCE_BULK_LINGER_MS", DEFAULT_BULK_LINGER_MS)
    )
    # The linger of the producer a busy gateway's sends to a queue nobody receives from join
    # (0: the bulk producer's; topology/producer.py DEFAULT_FILL_LINGER_MS says why).
    produce_fill_linger_ms: int = field(
        default_factory=lambda: _env_int("KQS_PRODUCE_FILL_LINGER_MS", DEFAULT_FILL_LINGER_MS)
    )
    # What accepts HTTP connections: "lean" (gateway/http/lean_http.py: httptools feeding the
    # application's handlers, ~80 µs less CPU per request) or "aiohttp" (aiohttp's own server).
    http_front: str = field(default_factory=lambda: os.environ.get("KQS_HTTP_FRONT", "lean"))
    # Consumers the queue topics are read by, one gateway (topology/ingest.py IngestShards).
    # 1 until more is shown to pay: with 8, 10,000 queues × 20 messages sent no faster and
    # cost 1 GB more RSS and half the queue-creation rate (bench/results/archive/profile-journal.md,
    # 2026-11-25 (0b1e1e5)).
    ingest_shards: int = field(default_factory=lambda: _env_int("KQS_INGEST_SHARDS", 1))
    offset_commit_interval_s: float = field(
        default_factory=lambda: float(os.environ.get("KQS_OFFSET_COMMIT_INTERVAL_S", "5"))
    )
    # TOML file of accounts, users, groups and policies; empty: the embedded default.
    iam_config: str = field(default_factory=lambda: os.environ.get("KQS_IAM_CONFIG", ""))
    # Local-server habit: any unknown access key acts as the default account, unverified.
    accept_any_access_key: bool = field(
        default_factory=lambda: os.environ.get("KQS_ACCEPT_ANY_ACCESS_KEY", "") in ("1", "true")
    )
    log_format: str = field(default_factory=lambda: os.environ.get("KQS_LOG_FORMAT", "auto"))
    # Analytics events (`__kqs_events`): queue gauges every this many seconds, the cluster
    # they go to (empty: the gateway's), and how many may wait for Kafka before drops begin.
    gauge_interval_s: float = field(
        default_factory=lambda: float(os.environ.get("KQS_GAUGE_INTERVAL_S", "10"))
    )
    events_bootstrap: str = field(
        default_factory=lambda: os.environ.get("KQS_EVENTS_BOOTSTRAP", "")
    )
    events_buffer_messages: int = field(
        default_factory=lambda: _env_int("KQS_EVENTS_BUFFER_MESSAGES", 100_000)
    )
    # Encryption at rest (gateway/sqs/encryption.py): the master key file. Empty: `kqs serve`
    # with its embedded broker makes <data_dir>/master.key; against a cluster, no encryption.
    master_key_file: str = field(default_factory=lambda: os.environ.get("KQS_MASTER_KEY_FILE", ""))
    # An AWS KMS key (id, ARN or alias): KmsMasterKeyIds are KMS keys, and SQS-managed
    # encryption uses this one when there is no master key file (topology/encryption/kms.py).
    kms_key_id: str = field(default_factory=lambda: os.environ.get("KQS_KMS_KEY_ID", ""))
    # With the embedded broker: make no master key, so messages are stored in clear text and
    # queues report SqsManagedSseEnabled false (as against a cluster without a key).
    no_master_key: bool = field(
        default_factory=lambda: os.environ.get("KQS_NO_MASTER_KEY", "") not in ("", "0")
    )
    # How often a running message replay task writes its checkpoint (gateway/sqs/replay/).
    replay_checkpoint_s: float = field(
        default_factory=lambda: float(os.environ.get("KQS_REPLAY_CHECKPOINT_S", "1"))
    )
    # Several gateways: how long a running replay task's record may stay unwritten before the
    # home of its source queue takes it to have lost its runner and runs it on.
    replay_orphaned_after_s: float = field(
        default_factory=lambda: float(os.environ.get("KQS_REPLAY_ORPHANED_AFTER_S", "15"))
    )
    # Send batches a replay task keeps on their way at once into a standard queue
    # (gateway/sqs/replay/pipeline.py; bench/replay_rate.py --in-flight compares them).
    replay_in_flight: int = field(default_factory=lambda: _env_int("KQS_REPLAY_IN_FLIGHT", 4))

    @property
    def tls(self) -> bool:
        return bool(self.tls_cert)

    @property
    def scheme(self) -> str:
        """How the gateway's own port is reached: "https" with a certificate, else "http"."""
        return "https" if self.tls else "http"

    @property
    def lease_dir(self) -> Path:
        return self.data_dir / "leases"

    @property
    def kafka_dir(self) -> Path:
        return self.data_dir / "kafka"


def kafka_client_properties(settings: Settings) -> tuple[Settings, ClientProperties]:
    """The Kafka client properties of `settings` (`kafka_config` and `KQS_KAFKA_*`), and the
    settings with the cluster the properties file names when none was given
    (`bootstrap.servers`). Raises `ClientPropertiesError` (naming keys, never secrets)."""
    properties = client_properties.load(settings.kafka_config)
    if not settings.kafka_bootstrap and properties.bootstrap:
        settings = replace(settings, kafka_bootstrap=properties.bootstrap)
    return settings, properties


def use_kafka_client_properties(settings: Settings, properties: ClientProperties) -> None:
    """Give every Kafka client of the gateway's clusters (the queues', the events') `properties`."""
    client_properties.use(settings.kafka_bootstrap, properties)
    if settings.events_bootstrap:
        client_properties.use(settings.events_bootstrap, properties)
