"""Assembles the gateway: Kafka clients, catalog, lease store, ingest, and the HTTP app.

This is the only module that knows every part; everything else receives what it needs.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

from aiohttp import web
from confluent_kafka import KafkaException

from gateway.actions.runtime import Runtime
from gateway.cloudformation.recovery import settle_abandoned
from gateway.cloudformation.store import StackStore
from gateway.cluster.forwarding import Forwarder
from gateway.cluster.group_check import JOIN_WAIT_S, check_alone
from gateway.cluster.ownership import GroupOwnership
from gateway.cluster.sole_gateway import (
    claim_epochs,
    forget_stale_store,
    name_new_queue,
    name_sole_owner,
    served_elsewhere,
    unnamed,
)
from gateway.common import limits
from gateway.common.config import Settings
from gateway.http.other_services import STACKS
from gateway.http.peer_api import internal_handler
from gateway.http.pipeline import (
    DIRECTORY,
    JOINING,
    RUNTIME,
    SETTLE_DELIVERED,
    SIGNALS,
    SNAPSHOT,
    runtime_of,
    serve_sqs,
)
from gateway.http.tls import peer_client_context
from gateway.iam.config import Directory, load_directory
from gateway.kafka_clients import KafkaClients
from gateway.observability.backlog import commit_backlog_offsets
from gateway.observability.events import KafkaEventSink
from gateway.observability.gauges import publish_gauges
from gateway.observability.metrics import QueueGauge, Snapshot
from gateway.sqs.encryption import build_encryption
from gateway.sqs.expiry import expire_messages
from gateway.sqs.fifo import FifoService
from gateway.sqs.messages.service import MessageService
from gateway.sqs.move_tasks import MoveTasks
from gateway.sqs.queues import QueueRegistry
from gateway.sqs.replay.browse import Browser
from gateway.sqs.replay.tasks import ReplayTasks
from gateway.sqs.waiters import QueueSignals
from lease_store import notes
from lease_store.clock import Clock, SystemClock
from lease_store.handles import ReceiptHandleCodec
from lease_store.store import LeaseStore
from topology.admin import TopicAdmin
from topology.catalog import QueueRecord, partition_keys
from topology.changelog import LeaseChangelog
from topology.events import EventPublisher, ensure_events_topic
from topology.follower_producer import FollowerProducer
from topology.ingest import Ingest
from topology.names import CATALOG_TOPIC, REGION_PATTERN, REPLAY_TASKS_TOPIC
from topology.owners import Owner, OwnersDirectory
from topology.presence import GatewayPresence
from topology.producer import AsyncProducer
from topology.stack_log import StackLog
from topology.topic_tail import TopicTail

log = logging.getLogger("kqs.gateway")

# How often the messages held young past their time are written (`lease_store/young.py`).
YOUNG_FLUSH_INTERVAL_S = 0.2


def receipt_secret(settings: Settings) -> bytes:
    """The HMAC key of receipt handles: configured, or generated once per data directory."""
    if settings.receipt_secret:
        return settings.receipt_secret.encode()
    path = settings.data_dir / "receipt-secret"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_hex(32))
        path.chmod(0o600)
    return path.read_text().strip().encode()


@dataclass
class _Parts:
    producer: AsyncProducer
    ingest: Ingest
    leases: LeaseStore
    signals: QueueSignals
    backlog: asyncio.Task[None]
    expiry: asyncio.Task[None]
    move_tasks: MoveTasks
    events: EventPublisher
    gauges: asyncio.Task[None]
    background: list[asyncio.Task[None]]
    sink: KafkaEventSink
    changelog: LeaseChangelog
    follower: FollowerProducer
    catalog_tail: TopicTail
    forwarder: Forwarder
    group: GroupOwnership | None = None
    owners_tail: TopicTail | None = None
    move_tasks_tail: TopicTail | None = None
    replay_tasks: ReplayTasks | None = None
    replay_tasks_tail: TopicTail | None = None
    stacks_tail: TopicTail | None = None  # __kqs_stacks (gateway/cloudformation/store.py)
    presence: GatewayPresence | None = None  # the kqs-gateways group (topology/presence.py)

    def snapshot(self, messages: MessageService, registry: QueueRegistry) -> Snapshot:
        """What `/metrics` reads besides the request metrics, now."""
        queues = []
        for record in registry.all_active():
            counts = messages.counts(record)
            queues.append(
                QueueGauge(
                    record.account_id,
                    record.name,
                    counts.visible,
                    counts.in_flight,
                    counts.delayed,
                    messages.oldest_message_age_s(record),
                    record.region,
                )
            )
        return Snapshot(
            queues=queues,
            events_published=self.events.published,
            events_dropped=self.events.dropped,
            events_buffered=self.events.buffered + self.sink.held_back,
            events_errors=self.sink.errors,
            producers={
                "messages": self.producer.statistics.latest,
                "events": self.events.statistics.latest,
            },
            changelog_records=self.changelog.published,
            changelog_failures=self.changelog.failures,
            changelog_pending=self.changelog.pending,
            lease_syncs=messages.group_sync.syncs,
            segment_syncs=self.producer.segment_sync.syncs if self.producer.segment_sync else 0,
            lease_sync_waiters=messages.group_sync.waiters,
            long_polls_parked=self.signals.parked,
            partitions_served=(
                self.group.served
                if self.group is not None
                else sum(r.partitions for r in registry.all_active())
            ),
        )


PARTS = web.AppKey("parts", _Parts)


async def _ensure_events_topic(kafka: KafkaClients) -> list[asyncio.Task[None]]:
    """Create `__kqs_events`; on another cluster, in the background, never failing start-up."""
    settings = kafka.settings
    if not settings.events_bootstrap or settings.events_bootstrap == kafka.bootstrap:
        await ensure_events_topic(kafka.admin(kafka.bootstrap), settings.partitions)
        return []
    admin = kafka.admin(settings.events_bootstrap)

    async def ensure() -> None:
        try:
            await ensure_events_topic(admin, settings.partitions)
        except KafkaException as exc:
            log.warning("events topic not created", extra={"error": str(exc)})

    return [asyncio.create_task(ensure())]


async def _start(
    app: web.Application, settings: Settings, clock: Clock, kafka: KafkaClients
) -> _Parts:
    if not REGION_PATTERN.match(settings.region):
        raise ValueError(f"KQS_REGION {settings.region!r} is not a region name, e.g. us-east-1")
    loop = asyncio.get_running_loop()
    bootstrap = kafka.bootstrap
    producer = kafka.producer()
    admin = kafka.admin(bootstrap, settings.topic_fsync)
    catalog = kafka.catalog(admin, producer)
    await catalog.ensure_topic()
    presence = await _join_presence(settings, kafka, admin)
    catalog_state = await loop.run_in_executor(None, catalog.snapshot, settings.region)
    records = catalog_state.records
    await admin.ensure_durable(
        [CATALOG_TOPIC], [r.topic for r in records.values() if r.deleted_ms is None]
    )
    # Several gateways: a change is answered only once the changelog has it (see _sync).
    follower = kafka.follower("kqs-changelog", confirmed=settings.partition_ownership == "group")
    changelog = LeaseChangelog(producer, follower, admin)
    await changelog.ensure_topic()
    directory: OwnersDirectory | None = None
    sole_id = ""  # one gateway that names itself in the owners directory (sole_gateway.py)
    if settings.partition_ownership == "group" or settings.shared_cluster != "warn":
        directory = kafka.owners_directory(admin, producer)
        await directory.ensure_topic()
        await loop.run_in_executor(None, directory.load)
    active = [r for r in records.values() if r.deleted_ms is None]
    if directory is not None and settings.partition_ownership == "all":
        sole_id = _gateway_id(settings)
        if elsewhere := served_elsewhere(directory, active, sole_id):
            forget_stale_store(settings.lease_dir, elsewhere)
    leases = await kafka.open_leases(records.values(), clock, changelog.on_commit)
    if directory is not None and sole_id:
        await name_sole_owner(directory, unnamed(directory, active, sole_id), sole_id)
        claim_epochs(directory, active, sole_id, changelog.write_as)
    naming_tasks: set[asyncio.Task[None]] = set()
    background = await _ensure_events_topic(kafka)
    events = kafka.events()
    sink = KafkaEventSink(events, clock)
    signals = QueueSignals()
    ingest_ref: list[Ingest] = []
    group_ref: list[GroupOwnership] = []  # set in group mode (KQS_PARTITION_OWNERSHIP=group)

    def on_created(record: QueueRecord) -> None:
        if group_ref:
            group_ref[0].queues_changed()  # the group decides who ingests it
            return
        if (
            directory is not None
            and sole_id
            and (partitions := unnamed(directory, [record], sole_id))
        ):
            # Named within milliseconds of its creation: only a kill in between leaves a new
            # queue unnamed, with next to nothing in it.
            naming = loop.create_task(
                name_new_queue(directory, record, partitions, sole_id, changelog.write_as)
            )
            naming_tasks.add(naming)
            naming.add_done_callback(naming_tasks.discard)
        applied = {pk.partition: leases.applied_offset(pk) for pk in partition_keys(record)}
        for partition, offset in applied.items():
            # Known to ingest from the start, so a caught-up partition is paused at once.
            messages.applied_hint[(record.topic, partition)] = offset
        ingest_ref[0].assign(record.topic, {p: offset + 1 for p, offset in applied.items()})

    def on_deleted(record: QueueRecord) -> None:
        if group_ref:
            group_ref[0].queues_changed()
        else:
            ingest_ref[0].unassign(record.topic, record.partitions)
        for pk in partition_keys(record):
            for kind in notes.KINDS:  # the changelog would keep them otherwise
                for name in leases.forget_notes(pk, kind):
                    changelog.note(pk, kind, name, None)
            changelog.forget_partition(pk, leases.drop_partition(pk))
        signals.notify(record.key)
        messages.queue_deleted(record)
        if move_tasks_ref and messages.ownership.serves(record.topic, 0):
            move_tasks_ref[0].queue_deleted(record.topic)  # the queue's home ends its tasks

    def on_served(record: QueueRecord) -> None:
        signals.notify(record.key)  # long polls parked here may find messages now
        if move_tasks_ref and group_ref and group_ref[0].serves(record.topic, 0):
            move_tasks_ref[0].became_home(record)

    move_tasks_ref: list[MoveTasks] = []
    registry = QueueRegistry(
        catalog, admin, settings.partitions, on_created, on_deleted, settings.region
    )
    secret = receipt_secret(settings)
    group: GroupOwnership | None = None
    if settings.partition_ownership == "group" and directory is not None:
        group = GroupOwnership(
            Owner(_gateway_id(settings), _advertised_url(settings)),
            directory,
            registry,
            leases,
            follower,
            bootstrap,
            clock,
            on_served=on_served,
            write_as=changelog.write_as,
        )
        group_ref.append(group)
    forwarder = Forwarder(
        secret,
        peer_client_context(settings.tls_cert, settings.tls_peer_ca) if settings.tls else None,
    )
    encryption = build_encryption(settings.master_key_file, clock, settings.kms_key_id)
    if not encryption.available:
        log.warning(
            "no master key (KQS_MASTER_KEY_FILE, KQS_KMS_KEY_ID): messages are stored in clear "
            "text and queues report SqsManagedSseEnabled false"
        )
    elif settings.kms_key_id:
        log.info("KMS keys for encryption at rest", extra={"kms_key_id": settings.kms_key_id})
    messages = MessageService(
        clock,
        producer,
        leases,
        registry,
        signals,
        ReceiptHandleCodec(secret),
        settings.region,
        changelog=changelog,
        events=sink,
        ownership=group,
        forwarder=forwarder,
        encryption=encryption,
    )
    # Beside the message service, which it sends and receives through.
    fifo = FifoService(messages, leases, clock)
    ingest: Ingest
    if group is not None:
        # One consumer: it is this gateway's one member of the ingest group.
        consumer = kafka.ingest(loop, messages.on_ingested, messages.applied_hint, group)
        group.start(consumer, loop)
        ingest = consumer
    else:
        ingest = kafka.ingest_shards(loop, messages.on_ingested, messages.applied_hint)
    ingest_ref.append(ingest)
    messages.wake_ingest = ingest.wake
    ingest.start()
    registry.load(records.values(), catalog_state.offsets)
    # From where the snapshot ended: other gateways' changes, and this one's coming back.
    catalog_tail = catalog.follower(catalog_state.end_offset, settings.region, registry.follow)
    catalog_tail.start(loop)
    owners_tail = None
    if directory is not None and group is not None:
        owners_tail = directory.follow(group.directory_changed)
        owners_tail.start(loop)
    task_log = kafka.move_task_log(admin, producer)
    await task_log.ensure_topic()
    await loop.run_in_executor(None, task_log.load)
    move_tasks = MoveTasks(clock, registry, messages, leases, task_log)
    move_tasks_ref.append(move_tasks)
    move_tasks_tail = None
    if group is None:
        for record in registry.all_active():
            move_tasks.became_home(record)  # every queue's home: runs on what it left
        # Queues deleted while their tasks' records could not be tombstoned (a crash).
        for topic in move_tasks.sources_deleted({r.topic for r in registry.all_active()}):
            move_tasks.queue_deleted(topic)
    else:
        # Other gateways' tasks: this one may become their source queues' home.
        move_tasks_tail = task_log.follow()
        move_tasks_tail.start(loop)
    stacks_tail = await _load_stacks(
        app, kafka.stack_log(admin, producer), loop, clock, settings.partition_ownership == "all"
    )
    replay_log = kafka.move_task_log(admin, producer, REPLAY_TASKS_TOPIC)
    await replay_log.ensure_topic()
    await loop.run_in_executor(None, replay_log.load)
    replay_tasks = ReplayTasks(
        clock,
        registry,
        messages,
        fifo,
        replay_log,
        kafka.log_reader,
        sink,
        settings.replay_checkpoint_s,
        settings.replay_orphaned_after_s,
        settings.replay_in_flight,
    )
    replay_tasks_tail = None
    if group is None:
        replay_tasks.resume_all()
    else:
        replay_tasks_tail = replay_log.follow()
        replay_tasks_tail.start(loop)
        replay_tasks.watch_orphans()
    app[RUNTIME] = Runtime(
        settings,
        clock,
        registry,
        messages,
        fifo,
        move_tasks,
        sink,
        replay_tasks,
        Browser(clock, messages, kafka.log_reader, admin),
    )
    app[SETTLE_DELIVERED] = producer.settle_handed
    app[SIGNALS] = signals
    log.info("gateway ready", extra={"kafka": bootstrap, "queues": len(registry.all_active())})
    backlog = asyncio.create_task(
        commit_backlog_offsets(
            registry,
            leases,
            ingest,
            settings.offset_commit_interval_s,
            messages.ownership.serves,
        )
    )
    expiry = asyncio.create_task(expire_messages(registry, messages, fifo))
    gauges = asyncio.create_task(
        publish_gauges(registry, messages, sink, settings.gauge_interval_s)
    )
    background.append(asyncio.create_task(_flush_events_every_second(sink)))
    background.append(asyncio.create_task(_write_young_messages(leases, clock)))
    parts = _Parts(
        producer,
        ingest,
        leases,
        signals,
        backlog,
        expiry,
        move_tasks,
        events,
        gauges,
        background,
        sink,
        changelog,
        follower,
        catalog_tail,
        forwarder,
        group,
        owners_tail,
        move_tasks_tail,
        replay_tasks,
        replay_tasks_tail,
    )
    parts.stacks_tail = stacks_tail
    parts.presence = presence
    app[PARTS] = parts
    app[SNAPSHOT] = lambda: parts.snapshot(messages, registry)
    app[JOINING] = lambda: group is not None and not group.ready
    return parts


def build_app(
    settings: Settings,
    clock: Clock | None = None,
    directory: Directory | None = None,
    kafka: KafkaClients | None = None,
) -> web.Application:
    app = web.Application(client_max_size=limits.MAX_REQUEST_BYTES)
    clock = clock or SystemClock()
    app[DIRECTORY] = directory or load_directory(
        settings.iam_config, settings.account_id, settings.accept_any_access_key
    )

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        parts = await _start(app, settings, clock, kafka or KafkaClients(settings))
        yield
        parts.backlog.cancel()
        parts.expiry.cancel()
        parts.gauges.cancel()
        for task in parts.background:
            task.cancel()
        # Let the cancelled loops finish: a coroutine left suspended keeps its frame, and
        # with it the Kafka clients, alive past the broker's shutdown.
        await asyncio.gather(
            parts.backlog, parts.expiry, parts.gauges, *parts.background, return_exceptions=True
        )
        await parts.move_tasks.close()  # before the producer and lease store close
        if parts.replay_tasks is not None:
            await parts.replay_tasks.close()
        parts.sink.flush()  # the empty receives counted since the last second
        parts.catalog_tail.stop()
        if parts.group is not None:
            # Before the consumer leaves the group: the next owners find every change in Kafka.
            await parts.group.release_all()
        parts.ingest.stop()
        if parts.owners_tail is not None:
            parts.owners_tail.stop()
        if parts.move_tasks_tail is not None:
            parts.move_tasks_tail.stop()
        if parts.stacks_tail is not None:
            parts.stacks_tail.stop()
        if parts.replay_tasks_tail is not None:
            parts.replay_tasks_tail.stop()
        await parts.forwarder.close()
        if parts.presence is not None:
            parts.presence.close()  # the others see this gateway gone at once
        parts.producer.close()
        parts.follower.close()
        parts.events.close()
        parts.leases.close()
        log.info("gateway stopped")

    app.cleanup_ctx.append(lifecycle)
    serve_sqs(app, internal_handler(receipt_secret(settings), runtime_of))
    return app


async def _join_presence(
    settings: Settings, kafka: KafkaClients, admin: TopicAdmin
) -> GatewayPresence:
    """Become a member of the presence group, then make sure no gateway already serving this
    cluster is one this one cannot share it with (`gateway/cluster/group_check.py`): raises
    `SharedCluster` (after leaving the group) when one is, unless KQS_SHARED_CLUSTER=warn."""
    mode = settings.partition_ownership
    if mode not in ("all", "group"):
        raise ValueError(f"KQS_PARTITION_OWNERSHIP {mode!r} is not 'all' or 'group'")
    gateway = _gateway_id(settings)
    presence = kafka.presence(mode, gateway)
    presence.start()
    try:
        # Joined first, then looked: two gateways starting at once see each other.
        await asyncio.get_running_loop().run_in_executor(None, presence.joined, JOIN_WAIT_S)
        await check_alone(admin, mode, gateway, settings.shared_cluster)
    except BaseException:
        presence.close()
        raise
    return presence


async def _load_stacks(
    app: web.Application,
    stack_log: StackLog,
    loop: asyncio.AbstractEventLoop,
    clock: Clock,
    single_gateway: bool,
) -> TopicTail:
    """The CloudFormation stacks: read whole, then followed (every gateway's changes); the
    operations a stopped gateway left half-way are settled (gateway/cloudformation/recovery.py)."""
    await stack_log.ensure_topic()
    store = StackStore(stack_log)
    end = await loop.run_in_executor(None, stack_log.load, store.apply)
    await settle_abandoned(store, clock.now_ms(), all_in_progress=single_gateway)
    tail = stack_log.follow(end, store.apply)
    tail.start(loop)
    app[STACKS] = store
    return tail


def _gateway_id(settings: Settings) -> str:
    """This gateway's identity in the owners directory: generated once per data directory,
    so a restarted gateway knows the partitions it served last."""
    path = settings.data_dir / "gateway-id"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(uuid.uuid4().hex)
    return path.read_text().strip()


def _advertised_url(settings: Settings) -> str:
    if settings.advertised_url:
        return settings.advertised_url.rstrip("/")
    if settings.host in ("0.0.0.0", "::", ""):
        log.warning(
            "listening on every address: set KQS_ADVERTISED_URL so that other gateways reach "
            "this one; using 127.0.0.1",
            extra={"port": settings.port},
        )
        return f"{settings.scheme}://127.0.0.1:{settings.port}"
    return f"{settings.scheme}://{settings.host}:{settings.port}"


async def _flush_events_every_second(sink: KafkaEventSink) -> None:
    while True:
        await asyncio.sleep(1.0)
        sink.flush()  # never raises


async def _write_young_messages(leases: LeaseStore, clock: Clock) -> None:
    """Writes the messages held young past their time (`lease_store/young.py`)."""
    while True:
        await asyncio.sleep(YOUNG_FLUSH_INTERVAL_S)
        try:
            leases.flush_young(clock.now_ms())
        except Exception:
            log.exception("writing young messages failed; trying again")
