"""The queue registry: every queue this gateway serves, backed by the Kafka catalog.

A queue is named by its region, account and name (`QueueRecord.queue_id`): the same name in
two regions is two queues. Every lookup takes the region the request is for (its SigV4
scope's, or the default region's), or reads it from an ARN.

Creating a queue creates its topic first and its catalog record second, so a catalog record
always names a topic that exists. Deleting writes the catalog record (marked deleted, kept so
a re-create within 60 s is refused) before the topic goes.

Every gateway follows the catalog (`apply`), so a queue created, changed or deleted through
another gateway is seen here too, and handled as a local change is: a new queue's topic is
ingested (`on_created`), a deleted queue's lease state dropped and its long polls woken
(`on_deleted`). Records are ordered by their catalog offset, not by their timestamps: a record
at or below the offset of the one held for its key is this gateway's own write coming back
(applied already when `put` returned) or one superseded since, and changes nothing. So local
and remote changes take the same path, in the order every gateway sees them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import uuid
import zlib
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from urllib.parse import urlsplit

from gateway import limits
from gateway.errors import (
    InvalidParameterValue,
    QueueDeletedRecently,
    QueueDoesNotExist,
    QueueNameExists,
)
from gateway.queue_attributes import (
    DEFAULTS,
    FIFO_DEFAULTS,
    FIFO_SUFFIX,
    is_fifo_name,
    validate_redrive_allow_policy,
)
from lease_store.keys import PartitionKey
from topology.admin import TopicAdmin
from topology.catalog import Catalog, QueueRecord
from topology.names import catalog_key
from topology.record_format import MAX_RECORD_BYTES

log = logging.getLogger("kqs.queues")

_QUEUE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,80}$")
_ARN = re.compile(r"^arn:aws[\w-]*:sqs:([\w-]*):(\d{12}):([A-Za-z0-9_.-]{1,85})$")

QueueListener = Callable[[QueueRecord], None]
QueueId = tuple[str, str, str]  # (region, account id, queue name)


def partition_keys(record: QueueRecord) -> tuple[PartitionKey, ...]:
    return _partition_keys(record.incarnation, record.partitions)


@lru_cache(maxsize=65_536)
def _partition_keys(incarnation_hex: str, partitions: int) -> tuple[PartitionKey, ...]:
    # Asked for several times per request: built once per queue incarnation.
    incarnation = bytes.fromhex(incarnation_hex)
    return tuple(PartitionKey(incarnation, p) for p in range(partitions))


def attribute_int(record: QueueRecord, name: str) -> int:
    """An integer attribute of the queue (`DelaySeconds`, ...), its default when not set."""
    return int(record.attributes.get(name, DEFAULTS[name]))


def topic_retention_ms(record: QueueRecord) -> str:
    retention_s = attribute_int(record, "MessageRetentionPeriod")
    return str(retention_s * 1000 + limits.RETENTION_MARGIN_MS)


def queue_arn(record: QueueRecord) -> str:
    return record.arn


def is_fifo(record: QueueRecord) -> bool:
    """A FIFO queue: its name ends in `.fifo` (CreateQueue refuses the name otherwise).

    Asked several times per message: the name's test is here, not one call further."""
    return record.name.endswith(FIFO_SUFFIX)


def group_partition(group_id: str, partitions: int) -> int:
    """The partition of a FIFO queue's topic that a message group lives on.

    Chosen here, not by the producer's partitioner, so that it never depends on client
    configuration: CRC-32 of the group id (what librdkafka's default partitioner hashes too).
    """
    return zlib.crc32(group_id.encode()) % partitions


def effective_attributes(record: QueueRecord) -> dict[str, str]:
    """The queue's attributes with the defaults of its type filled in."""
    defaults = {**DEFAULTS, **FIFO_DEFAULTS} if is_fifo(record) else DEFAULTS
    return {**defaults, **record.attributes}


@lru_cache(maxsize=4096)
def url_path_parts(queue_url: str) -> tuple[str, ...]:
    """The non-empty segments of a queue URL's path (of any host), or of a bare path or name.

    Cached: requests name the same few queue URLs again and again.
    """
    return tuple(p for p in urlsplit(queue_url).path.split("/") if p)


def parse_arn(arn: str) -> tuple[str, str, str] | None:
    """(region, account id, queue name) of a queue ARN, or None."""
    match = _ARN.match(arn)
    return (match.group(1), match.group(2), match.group(3)) if match else None


class QueueRegistry:
    def __init__(
        self,
        catalog: Catalog,
        admin: TopicAdmin,
        default_partitions: int,
        on_created: QueueListener,
        on_deleted: QueueListener,
        default_region: str = "us-east-1",
    ) -> None:
        self._catalog = catalog
        self._admin = admin
        self._default_partitions = default_partitions
        self._on_created = on_created
        self._on_deleted = on_deleted
        self.default_region = default_region
        self._by_id: dict[QueueId, QueueRecord] = {}  # (region, account, name)
        self._by_key: dict[str, QueueRecord] = {}  # catalog key
        self._by_topic: dict[str, QueueRecord] = {}
        # Catalog offset of the record held for each catalog key (see the module header).
        self._offsets: dict[str, int] = {}
        self._rewriting: set[str] = set()  # keys whose deletion is being written again
        self._background: set[asyncio.Task[None]] = set()

    def load(
        self, records: Iterable[QueueRecord], offsets: Mapping[str, int] | None = None
    ) -> None:
        """The catalog's records, and the offset each was read at (by catalog key).

        Two records may name one queue (a region-less record of a deleted queue and the
        regional one of its successor, after the default region changed): the live one wins,
        else the one deleted last."""
        chosen: dict[QueueId, QueueRecord] = {}
        for record in records:
            self._by_key[record.key] = record
            self._offsets[record.key] = (offsets or {}).get(record.key, -1)
            other = chosen.get(record.queue_id)
            if other is None or _supersedes(record, other):
                chosen[record.queue_id] = record
        for record in chosen.values():
            self._remember(record)
            if not record.deleted:
                self._on_created(record)

    def apply(self, record: QueueRecord, offset: int) -> bool:
        """Make the catalog record read or written at `offset` current, if it is newer than
        the one held for its key; returns whether it was.

        A queue that appears (or comes back as a new incarnation) is handed to `on_created`,
        one that goes (deleted, or replaced by a new incarnation) to `on_deleted`, exactly as
        when this gateway made the change itself.
        """
        previous = self._by_id.get(record.queue_id)
        held_offset = self._offsets.get(record.key, -1)
        same_incarnation = previous is not None and previous.incarnation == record.incarnation
        if same_incarnation and previous is not None and previous.deleted and not record.deleted:
            # A change written by a gateway that had not seen the deletion yet: a deletion is
            # final. But the log's latest record of the key is now this live one, which a
            # restart would read: write the deletion again.
            self._offsets[record.key] = max(offset, held_offset)
            self._rewrite(previous)
            return False
        if same_incarnation and record.deleted and previous is not None and not previous.deleted:
            if offset <= held_offset:
                # The same race seen by the gateway that wrote the change: deleted it is, and
                # the log must say so last.
                self._rewrite(record)
        elif offset <= held_offset:
            return False
        self._offsets[record.key] = max(offset, held_offset)
        self._by_key[record.key] = record
        if (
            previous is not None
            and previous.key != record.key
            and not _supersedes(record, previous)
        ):
            return False  # the queue's current record is the one under its other key
        live_before = previous is not None and not previous.deleted
        same_queue = previous is not None and previous.incarnation == record.incarnation
        self._remember(record)
        if previous is not None and live_before and (record.deleted or not same_queue):
            self._on_deleted(previous)
        if not record.deleted and not (live_before and same_queue):
            self._on_created(record)
        return True

    def _rewrite(self, deleted: QueueRecord) -> None:
        """Write a queue's deletion to the catalog again, in the background (see `apply`)."""
        if deleted.key in self._rewriting:
            return
        self._rewriting.add(deleted.key)

        async def rewrite() -> None:
            try:
                self.apply(deleted, await self._catalog.put(deleted))
                log.warning(
                    "queue deletion rewritten after a concurrent change",
                    extra={"queue": deleted.key, "incarnation": deleted.incarnation},
                )
            except Exception:
                log.exception("queue deletion not rewritten", extra={"queue": deleted.key})
            finally:
                self._rewriting.discard(deleted.key)

        self._background.add(task := asyncio.create_task(rewrite()))
        task.add_done_callback(self._background.discard)

    def follow(self, records: list[tuple[int, QueueRecord]]) -> None:
        """Catalog records read back by the follower (`Catalog.follower`), in log order."""
        for offset, record in records:
            if self.apply(record, offset):
                log.info(
                    "catalog record applied",
                    extra={
                        "queue": record.key,
                        "incarnation": record.incarnation,
                        "deleted": record.deleted,
                        "offset": offset,
                    },
                )

    # -- lookups ---------------------------------------------------------------------------

    def active(self, region: str, account_id: str, name: str) -> QueueRecord | None:
        record = self._by_id.get((region, account_id, name))
        return record if record is not None and not record.deleted else None

    def by_topic(self, topic: str) -> QueueRecord | None:
        record = self._by_topic.get(topic)
        return record if record is not None and not record.deleted else None

    def current(self, record: QueueRecord) -> QueueRecord | None:
        """The live version of a queue, or None if it was deleted since `record` was read."""
        latest = self._by_id.get(record.queue_id)
        if latest is None or latest.deleted or latest.incarnation != record.incarnation:
            return None
        return latest

    def resolve(self, queue_url: str, caller_account: str, region: str) -> QueueRecord:
        """The queue a QueueUrl names in `region`: a URL of any host, a path, or a bare name.

        Queue URLs do not carry the region; the request's signature does.
        """
        parts = url_path_parts(queue_url)
        if len(parts) == 1:
            account_id, name = caller_account, parts[0]
        elif len(parts) >= 2:
            account_id, name = parts[-2], parts[-1]
        else:
            raise QueueDoesNotExist()
        record = self.active(region, account_id, name)
        if record is None:
            raise QueueDoesNotExist()
        return record

    def by_arn(self, arn: str) -> QueueRecord | None:
        parsed = parse_arn(arn)
        return self.active(*parsed) if parsed else None

    def listed(self, region: str, account_id: str, prefix: str = "") -> list[QueueRecord]:
        return sorted(
            (
                r
                for r in self._by_id.values()
                if not r.deleted
                and r.region == region
                and r.account_id == account_id
                and r.name.startswith(prefix)
            ),
            key=lambda r: r.name,
        )

    def all_active(self) -> list[QueueRecord]:
        return [r for r in self._by_id.values() if not r.deleted]

    def validate_redrive(self, attributes: dict[str, str], source_arn: str | None = None) -> None:
        """A RedrivePolicy must name an existing queue and a maxReceiveCount of 1-1000.

        A RedriveAllowPolicy must name a redrivePermission (and 1-10 source queues for byQueue).
        With `source_arn` (the queue the RedrivePolicy is for), the dead-letter queue must be
        in the source's region, and its RedriveAllowPolicy must admit that queue.
        """
        validate_redrive_allow_policy(attributes.get("RedriveAllowPolicy", ""))
        raw = attributes.get("RedrivePolicy")
        if not raw:
            return
        policy = json.loads(raw)
        target = policy.get("deadLetterTargetArn")
        count = policy.get("maxReceiveCount")
        source = parse_arn(source_arn) if source_arn is not None else None
        target_parsed = parse_arn(target) if isinstance(target, str) else None
        if source is not None and target_parsed is not None and target_parsed[0] != source[0]:
            # AWS: the DLQ "must be created using the same AWS account and Region as the
            # source queue" (SDK developer guides); the text is Eucalyptus's SQS clone's.
            raise InvalidParameterValue(
                f"Value {raw} for parameter RedrivePolicy is invalid. Reason: Dead-letter "
                "target must be in same region as the source."
            )
        if not isinstance(target, str) or self.by_arn(target) is None:
            raise InvalidParameterValue(
                "Value for parameter RedrivePolicy is invalid. Reason: Dead-letter target does "
                "not exist."
            )
        try:
            count_value = int(count)  # SDKs send it as a number or a string
        except (TypeError, ValueError):
            count_value = 0
        if not limits.MIN_MAX_RECEIVE_COUNT <= count_value <= limits.MAX_MAX_RECEIVE_COUNT:
            raise InvalidParameterValue(
                "Value for parameter RedrivePolicy is invalid. Reason: Invalid value for "
                "maxReceiveCount: must be between 1 and 1000."
            )
        dlq = self.by_arn(target)
        if source is not None and dlq is not None and is_fifo(dlq) != is_fifo_name(source[2]):
            # AWS's text, double full stop included (as AWS users report it from CreateQueue).
            raise InvalidParameterValue(
                f"Value {raw} for parameter RedrivePolicy is invalid. Reason: Dead-letter "
                "queue must be same type of queue as the source.."
            )
        if source is not None and dlq is not None and dlq.account_id != source[1]:
            raise InvalidParameterValue(
                f"Value {raw} for parameter RedrivePolicy is invalid. Reason: Dead-letter "
                "target owner should be same as the source."
            )
        if source_arn is not None and dlq is not None and not redrive_allows(dlq, source_arn):
            raise InvalidParameterValue(
                f"Value {raw} for parameter RedrivePolicy is invalid. Reason: Source queue is "
                "not allowed by the dead-letter queue's RedriveAllowPolicy."
            )

    # -- changes ---------------------------------------------------------------------------

    async def create(
        self,
        region: str,
        account_id: str,
        name: str,
        attributes: dict[str, str],
        tags: dict[str, str],
        now_ms: int,
    ) -> tuple[QueueRecord, bool]:
        """Create a queue, or return the existing one if its attributes match.

        Returns the record and whether it was created by this call.
        """
        fifo = attributes.get("FifoQueue") == "true"  # validated and lower-cased already
        if fifo and not (
            is_fifo_name(name) and len(name) <= 80 and _QUEUE_NAME.match(name[: -len(".fifo")])
        ):
            # AWS answers InvalidParameterValue (LocalStack's AWS-validated tests); the text is
            # the one AWS's CreateQueue gives for a FIFO queue name.
            raise InvalidParameterValue(
                "The name of a FIFO queue can only include alphanumeric characters, hyphens, or "
                "underscores, must end with .fifo suffix and be 1 to 80 in length"
            )
        if not fifo and not _QUEUE_NAME.match(name):
            # A `.fifo` name without FifoQueue=true is a standard name with a dot in it.
            raise InvalidParameterValue(
                "Can only include alphanumeric characters, hyphens, or underscores. "
                "1 to 80 in length"
            )
        existing = self._by_id.get((region, account_id, name))
        if existing is not None and not existing.deleted:
            effective = effective_attributes(existing)
            for name_, value in attributes.items():
                if effective.get(name_, "") != value:
                    raise QueueNameExists(
                        "A queue already exists with the same name and a different value for "
                        f"attribute {name_}"
                    )
            return existing, False
        if existing is not None and existing.deleted_ms is not None:
            if now_ms - existing.deleted_ms < limits.QUEUE_RECREATE_COOLDOWN_S * 1000:
                raise QueueDeletedRecently(
                    "You must wait 60 seconds after deleting a queue before you can create "
                    "another with the same name."
                )
        record = QueueRecord(
            account_id=account_id,
            name=name,
            incarnation=uuid.uuid4().hex,
            partitions=self._partitions_for(fifo, attributes),
            attributes={
                **DEFAULTS,
                **(FIFO_DEFAULTS if fifo else {}),
                **_without_empty(attributes),
            },
            tags=tags,
            created_s=now_ms // 1000,
            modified_s=now_ms // 1000,
            region=region,
            region_in_names=self._region_in_names(region, account_id, name),
        )
        await self._admin.create_topic(
            record.topic,
            record.partitions,
            self._admin.queue_durable(
                {
                    "cleanup.policy": "delete",
                    "retention.ms": topic_retention_ms(record),
                    "max.message.bytes": str(MAX_RECORD_BYTES),
                }
            ),
        )
        self.apply(record, await self._catalog.put(record))
        log.info("queue created", extra={"queue": record.key, "topic": record.topic})
        return record, True

    async def update(self, record: QueueRecord) -> QueueRecord:
        """Persist changed attributes or tags of a live queue."""
        self.apply(record, await self._catalog.put(record))
        return record

    async def apply_topic_retention(self, record: QueueRecord) -> None:
        """Set the queue topic's retention.ms from the record's MessageRetentionPeriod."""
        await self._admin.set_topic_config(
            record.topic, {"retention.ms": topic_retention_ms(record)}
        )

    async def topic_end_offsets(self, record: QueueRecord) -> list[int]:
        """The end offset (high watermark) of each partition of the queue topic."""
        return await self._admin.end_offsets(record.topic, record.partitions)

    async def trim_topic(self, record: QueueRecord, partition: int, before_offset: int) -> None:
        """Delete the records of one queue topic partition below `before_offset`."""
        await self._admin.delete_records_before(record.topic, partition, before_offset)

    async def delete(self, record: QueueRecord, now_ms: int) -> None:
        deleted = record.changed(deleted_ms=now_ms)
        self.apply(deleted, await self._catalog.put(deleted))
        await self._admin.delete_topic(record.topic)
        log.info("queue deleted", extra={"queue": record.key, "topic": record.topic})

    def _partitions_for(self, fifo: bool, attributes: dict[str, str]) -> int:
        """A new queue's partitions: the default, more for a high-throughput FIFO queue."""
        if fifo and attributes.get("FifoThroughputLimit") == "perMessageGroupId":
            return max(self._default_partitions, limits.HIGH_THROUGHPUT_FIFO_PARTITIONS)
        return self._default_partitions

    def _region_in_names(self, region: str, account_id: str, name: str) -> bool:
        """Region-less names for the default region, unless that catalog key belongs to a
        queue of another region (one named before the default region setting changed)."""
        if region != self.default_region:
            return True
        holder = self._by_key.get(catalog_key("", account_id, name))
        return holder is not None and holder.region != region

    def _remember(self, record: QueueRecord) -> None:
        previous = self._by_id.get(record.queue_id)
        if previous is not None and previous.topic != record.topic:
            self._by_topic.pop(previous.topic, None)
        self._by_id[record.queue_id] = record
        self._by_key[record.key] = record
        self._by_topic[record.topic] = record


def _supersedes(record: QueueRecord, other: QueueRecord) -> bool:
    """Of two catalog records of one queue, whether `record` is the current one."""
    if record.deleted_ms is None or other.deleted_ms is None:
        return record.deleted_ms is None and other.deleted_ms is not None
    return record.deleted_ms > other.deleted_ms


def _without_empty(attributes: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in attributes.items() if v != ""}


def redrive_allows(dlq: QueueRecord, source_arn: str) -> bool:
    """Whether the DLQ's RedriveAllowPolicy lets the queue `source_arn` dead-letter into it.

    No policy or `allowAll`: any queue; `denyAll`: none; `byQueue`: the listed ARNs, compared
    by region, account and queue name.
    """
    raw = dlq.attributes.get("RedriveAllowPolicy")
    if not raw:
        return True
    policy = json.loads(raw)
    permission = policy.get("redrivePermission")
    if permission == "denyAll":
        return False
    if permission != "byQueue":
        return True
    source = parse_arn(source_arn)
    allowed = (
        parse_arn(arn) for arn in policy.get("sourceQueueArns") or [] if isinstance(arn, str)
    )
    return source is not None and any(a is not None and a == source for a in allowed)


def redrive_target(record: QueueRecord) -> tuple[str, int] | None:
    """(deadLetterTargetArn, maxReceiveCount) of a queue with a RedrivePolicy."""
    raw = record.attributes.get("RedrivePolicy")
    if not raw:
        return None
    return _parsed_redrive(raw)


@lru_cache(maxsize=4096)
def _parsed_redrive(raw: str) -> tuple[str, int]:
    policy = json.loads(raw)
    return str(policy["deadLetterTargetArn"]), int(policy["maxReceiveCount"])
