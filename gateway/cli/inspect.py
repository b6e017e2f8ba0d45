"""`kqs inspect`: what Kafka and the lease store hold for each queue, side by side.

For one queue (`--queue NAME`) or every queue of an account, it shows the queue URL, topic,
incarnation, partitions and attributes (from the `__kqs_queues` catalog), and per partition:

* Kafka's log start and end offsets (low / high watermark) of the queue topic;
* the committed offset of the ingest consumer group (`kqs-gateway`), which the gateway sets
  to the backlog start, so Kafka tools show the backlog as lag;
* from the lease store: the applied offset (the last record ingested), the backlog start (the
  lowest offset not yet deleted), the purge watermark, and the exact numbers of visible,
  in-flight and delayed messages now.

A readable table by default, `--json` for machines. It works with the gateway running or not.

How it reads the lease store, and why not over HTTP: it opens `<data-dir>/leases` as a
RocksDB **read-only** instance (`ReadOnlyRocksKeyValueStore`), which takes no lock, so it
opens beside the running gateway and sees the state as of the open (whole write batches, the
WAL included). The alternative, an admin endpoint on the running gateway, was not chosen:

* inspect matters most when something is wrong, and then the gateway may be down, wedged or
  restarting — reading the files works in all those cases, an endpoint in none;
* the gateway's port is the SQS endpoint, and SigV4 is not enforced yet: an admin route there
  would hand queue internals to anyone who can reach it;
* nothing in the read path can disturb the gateway: no request competes with SQS traffic,
  and the view never writes (its `write` raises; the counters' sweep changes only what the
  view holds in memory, `LeaseStore.partition_state`).

Read-only beats a RocksDB secondary instance here: a secondary needs a scratch directory and
its open was measured to take up to a minute under sustained writes; the read-only open takes
milliseconds, and the rare failure when the gateway deletes an obsolete file mid-open is
retried. Kafka figures come from the cluster (catalog via `Catalog.load`, offsets via the
admin API); they are read a moment apart from the lease store, so on a busy queue the two
sides may differ by the records of that moment.

The counts are those the lease store keeps (what GetQueueAttributes reports), except that
messages past their retention period are still counted until the gateway's next expiry pass
drops them: inspect reports, it never changes anything.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException

from gateway.common.config import Settings, kafka_client_properties, use_kafka_client_properties
from gateway.sqs.encryption import report_encryption
from gateway.sqs.queues import queue_arn
from lease_store.rocks import ReadOnlyRocksKeyValueStore
from lease_store.store import LeaseStore
from topology.admin import TopicAdmin
from topology.catalog import Catalog, QueueRecord, partition_keys
from topology.client_properties import ClientPropertiesError
from topology.embedded import broker
from topology.encryption.keys import MASTER_KEY_FILE
from topology.names import INGEST_GROUP
from topology.producer import AsyncProducer


class InspectError(Exception):
    """Inspect cannot answer; the message says why and what to do."""


@dataclass(frozen=True)
class PartitionReport:
    partition: int
    log_start_offset: int
    log_end_offset: int
    committed_offset: int | None  # the ingest group's; None when never committed
    # From the lease store; None when there is no lease store to read.
    applied_offset: int | None
    backlog_start: int | None
    purged_before_offset: int | None
    visible: int | None
    in_flight: int | None
    delayed: int | None


@dataclass(frozen=True)
class QueueReport:
    name: str
    region: str
    url: str
    arn: str
    topic: str
    incarnation: str
    partition_count: int
    counts: dict[str, int | None]
    attributes: dict[str, str]  # as a gateway with the keys `Report.keys` names reports them
    tags: dict[str, str]
    partitions: list[PartitionReport] = field(default_factory=list)
    # The catalog's value of each attribute reported otherwise (encryption a gateway
    # without keys does not claim), e.g. {"SqsManagedSseEnabled": "true"}.
    stored_attributes: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Report:
    account_id: str
    kafka_bootstrap: str
    lease_store: str | None  # the directory read, or None when there was none
    at_ms: int
    queues: list[QueueReport]
    keys: str = ""  # the gateway's keys for encryption at rest the attributes are reported for


def add_inspect_subcommand(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    defaults = Settings()
    parser = subparsers.add_parser(
        "inspect",
        help="show queues' Kafka offsets, lease store state and message counts",
        description="Show, per queue partition, Kafka's log offsets, the ingest group's "
        "committed offset and the lease store's state and counts. Safe while the gateway runs.",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=defaults.data_dir,
        help="the gateway's data directory (lease store, embedded broker)",
    )
    parser.add_argument(
        "--kafka-bootstrap",
        default=defaults.kafka_bootstrap,
        help="Kafka cluster (default: KQS_KAFKA_BOOTSTRAP, else the embedded broker of "
        "<data-dir>/kafka)",
    )
    parser.add_argument("--queue", metavar="NAME", help="only this queue")
    parser.add_argument(
        "--region", help="only this region's queues (default: every region's)", default=None
    )
    parser.add_argument("--account-id", default=defaults.account_id, help="(%(default)s)")
    parser.add_argument(
        "--master-key-file",
        default=defaults.master_key_file,
        help="the gateway's master key file (KQS_MASTER_KEY_FILE; with the embedded broker, "
        "<data-dir>/master.key): attributes are shown as a gateway with these keys reports them",
    )
    parser.add_argument(
        "--kms-key-id", default=defaults.kms_key_id, help="the gateway's KMS key (KQS_KMS_KEY_ID)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--timeout",
        type=float,
        default=15.0,
        help="seconds to wait for Kafka (%(default)s)",
    )
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    settings = replace(Settings(), data_dir=args.data_dir)
    try:
        settings, properties = kafka_client_properties(
            replace(settings, kafka_bootstrap=args.kafka_bootstrap)
        )
        bootstrap = _bootstrap(settings.kafka_bootstrap, settings.kafka_dir)
        use_kafka_client_properties(replace(settings, kafka_bootstrap=bootstrap), properties)
        report = asyncio.run(
            inspect(
                bootstrap,
                settings.lease_dir,
                args.account_id,
                args.queue,
                base_url=settings.base_url or f"http://{settings.host}:{settings.port}",
                default_region=settings.region,
                region=args.region,
                timeout_s=args.timeout,
                keys=_gateway_keys(
                    args.master_key_file, args.kms_key_id, args.kafka_bootstrap, settings
                ),
            )
        )
    except (InspectError, ClientPropertiesError) as error:
        sys.stderr.write(f"kqs inspect: {error}\n")
        return 1
    sys.stdout.write(
        json.dumps(asdict(report), indent=2) + "\n" if args.json else render_table(report)
    )
    return 0


@dataclass(frozen=True)
class GatewayKeys:
    """Which keys the gateway has, as `kqs serve` would find them (no key is read)."""

    master_key_file: str
    kms_key_id: str

    def describe(self) -> str:
        found = [f"master key file {self.master_key_file}"] if self.master_key_file else []
        found += [f"KMS key {self.kms_key_id}"] if self.kms_key_id else []
        return ", ".join(found) or "none (queues report no encryption)"


def _gateway_keys(
    master_key_file: str, kms_key_id: str, configured_bootstrap: str, settings: Settings
) -> GatewayKeys:
    own = settings.data_dir / MASTER_KEY_FILE
    if not master_key_file and not kms_key_id and not configured_bootstrap and own.is_file():
        master_key_file = str(own)  # the embedded broker's gateway makes and uses this one
    return GatewayKeys(master_key_file, kms_key_id)


def _bootstrap(configured: str, kafka_dir: Path) -> str:
    if configured:
        return configured
    status = broker.status(kafka_dir)
    if status.running and status.bootstrap:
        return status.bootstrap
    raise InspectError(
        f"no Kafka to read: the embedded broker of {kafka_dir} is not running; pass "
        "--kafka-bootstrap (or set KQS_KAFKA_BOOTSTRAP), or start `kqs serve`"
    )


async def inspect(
    bootstrap: str,
    lease_dir: Path,
    account_id: str,
    queue_name: str | None,
    *,
    base_url: str,
    default_region: str,
    region: str | None = None,
    timeout_s: float,
    keys: GatewayKeys | None = None,
) -> Report:
    """`region` None: every region's queues (by region, then name). `keys`: the gateway's,
    for the attributes it reports (None: none)."""
    keys = keys or GatewayKeys("", "")
    admin = TopicAdmin(bootstrap)
    records = await _load_catalog(bootstrap, admin, default_region, timeout_s)
    selected = sorted(
        (
            r
            for r in records.values()
            if not r.deleted
            and r.account_id == account_id
            and (queue_name is None or r.name == queue_name)
            and (region is None or r.region == region)
        ),
        key=lambda r: (r.region, r.name),
    )
    if queue_name is not None and not selected:
        where = f"account {account_id}" + (f" in {region}" if region else "")
        raise InspectError(f"queue {queue_name!r} does not exist in {where}")
    try:
        offsets = await asyncio.wait_for(
            asyncio.gather(*(_kafka_offsets(admin, r) for r in selected)), timeout_s
        )
    except (KafkaException, TimeoutError) as exc:
        raise InspectError(f"Kafka at {bootstrap} did not answer: {exc}") from exc
    leases = _open_leases(lease_dir)
    lease_path = str(lease_dir) if leases is not None else None
    now_ms = int(time.time() * 1000)
    try:
        queues = [
            _queue_report(r, bounds, committed, leases, now_ms, base_url, keys)
            for r, (bounds, committed) in zip(selected, offsets, strict=True)
        ]
    finally:
        if leases is not None:
            leases.close()
    return Report(account_id, bootstrap, lease_path, now_ms, queues, keys.describe())


async def _load_catalog(
    bootstrap: str, admin: TopicAdmin, default_region: str, timeout_s: float
) -> dict[str, QueueRecord]:
    # Catalog wants a producer for its writes; inspect never writes, so it is closed unused.
    producer = AsyncProducer(bootstrap)
    try:
        catalog = Catalog(bootstrap, admin, producer)
        return await asyncio.get_running_loop().run_in_executor(
            None, catalog.load, default_region, timeout_s
        )
    except (KafkaException, TimeoutError, RuntimeError) as exc:
        raise InspectError(
            f"cannot read the queue catalog from Kafka at {bootstrap}: {exc}"
        ) from exc
    finally:
        producer.close()


async def _kafka_offsets(
    admin: TopicAdmin, record: QueueRecord
) -> tuple[list[tuple[int, int]], list[int | None]]:
    bounds = await admin.log_bounds(record.topic, record.partitions)
    committed = await admin.committed_offsets(INGEST_GROUP, record.topic, record.partitions)
    return bounds, committed


def _open_leases(lease_dir: Path) -> LeaseStore | None:
    if not (lease_dir / "CURRENT").is_file():
        return None  # no gateway has run with this data directory (or its store was lost)
    try:
        return LeaseStore(ReadOnlyRocksKeyValueStore(lease_dir))
    except Exception as exc:  # rocksdict reports every failure as a bare Exception
        raise InspectError(f"cannot open the lease store {lease_dir} read-only: {exc}") from exc


def _queue_report(
    record: QueueRecord,
    bounds: list[tuple[int, int]],
    committed: list[int | None],
    leases: LeaseStore | None,
    now_ms: int,
    base_url: str,
    keys: GatewayKeys,
) -> QueueReport:
    partitions = []
    for pk in partition_keys(record):
        low, high = bounds[pk.partition]
        lease_fields: dict[str, int | None] = dict.fromkeys(
            (
                "applied_offset",
                "backlog_start",
                "purged_before_offset",
                "visible",
                "in_flight",
                "delayed",
            )
        )
        if leases is not None:
            st = leases.partition_state(pk, now_ms)
            lease_fields = {
                "applied_offset": st.applied_offset,
                "backlog_start": leases.backlog_start(pk),
                "purged_before_offset": st.purged_before_offset,
                "visible": st.visible,
                "in_flight": st.in_flight,
                "delayed": st.delayed,
            }
        partitions.append(
            PartitionReport(
                partition=pk.partition,
                log_start_offset=low,
                log_end_offset=high,
                committed_offset=committed[pk.partition],
                **lease_fields,
            )
        )
    counts = {
        name: None if leases is None else sum(getattr(p, name) or 0 for p in partitions)
        for name in ("visible", "in_flight", "delayed")
    }
    arn = queue_arn(record)
    attributes = {
        **record.attributes,
        "QueueArn": arn,
        "CreatedTimestamp": str(record.created_s),
        "LastModifiedTimestamp": str(record.modified_s),
    }
    stored = dict(attributes)
    report_encryption(
        attributes,
        keyed=bool(keys.master_key_file or keys.kms_key_id),
        kms=bool(keys.kms_key_id),
    )
    differing = {
        name: stored.get(name, "(not set)")
        for name in sorted(set(stored) | set(attributes))
        if stored.get(name) != attributes.get(name)
    }
    return QueueReport(
        name=record.name,
        region=record.region,
        url=f"{base_url.rstrip('/')}/{record.account_id}/{record.name}",
        arn=arn,
        topic=record.topic,
        incarnation=record.incarnation,
        partition_count=record.partitions,
        counts=counts,
        attributes=dict(sorted(attributes.items())),
        tags=dict(record.tags),
        partitions=partitions,
        stored_attributes=differing,
    )


# -- table ---------------------------------------------------------------------------------

_COLUMNS = (
    ("partition", "partition"),
    ("log start", "log_start_offset"),
    ("log end", "log_end_offset"),
    ("committed", "committed_offset"),
    ("applied", "applied_offset"),
    ("backlog start", "backlog_start"),
    ("purged below", "purged_before_offset"),
    ("visible", "visible"),
    ("in flight", "in_flight"),
    ("delayed", "delayed"),
)


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def render_table(report: Report) -> str:
    lines = [
        f"account {report.account_id}   kafka {report.kafka_bootstrap}   "
        f"lease store {report.lease_store or '(none)'}",
        f"encryption keys {report.keys}",
        f"{len(report.queues)} queue(s)",
    ]
    for queue in report.queues:
        counts = queue.counts
        lines += [
            "",
            f"{queue.name}   {queue.url}   {queue.region}",
            f"  topic        {queue.topic}",
            f"  incarnation  {queue.incarnation}   partitions {queue.partition_count}",
            f"  messages     {_cell(counts['visible'])} visible, "
            f"{_cell(counts['in_flight'])} in flight, {_cell(counts['delayed'])} delayed",
            "",
        ]
        rows = [[title for title, _ in _COLUMNS]]
        rows += [[_cell(getattr(p, name)) for _, name in _COLUMNS] for p in queue.partitions]
        widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS))]
        for row in rows:
            lines.append("  " + "  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))
        lines += ["", "  attributes"]
        width = max(len(name) for name in queue.attributes)
        lines += [
            f"    {name.ljust(width)}  {value}"
            + (
                f"   (stored: {queue.stored_attributes[name]})"
                if name in queue.stored_attributes
                else ""
            )
            for name, value in queue.attributes.items()
        ]
        gone = [name for name in queue.stored_attributes if name not in queue.attributes]
        lines += [
            f"    {name.ljust(width)}  (not reported; stored: {queue.stored_attributes[name]})"
            for name in gone
        ]
        if queue.tags:
            lines += ["  tags"]
            lines += [f"    {key} = {value}" for key, value in sorted(queue.tags.items())]
    return "\n".join(lines) + "\n"
