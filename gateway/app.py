"""Assembles the gateway: Kafka clients, catalog, lease store, ingest, and the HTTP app.

This is the only module that knows every part; everything else receives what it needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import cast

from aiohttp import ClientPayloadError, web
from confluent_kafka import KafkaException

from gateway import limits
from gateway.auth import authenticate, authorize, condition_keys
from gateway.backlog import commit_backlog_offsets
from gateway.config import Settings
from gateway.context import RequestContext, RequestNotes
from gateway.dispatch import ACTIONS
from gateway.errors import (
    InternalError,
    RequestTooLarge,
    ServiceUnavailable,
    SqsError,
    for_domain_error,
)
from gateway.events import KafkaEventSink
from gateway.expiry import expire_messages
from gateway.forwarding import PATH as INTERNAL_PATH
from gateway.forwarding import Forwarder
from gateway.gauges import publish_gauges
from gateway.group_check import warn_if_group_gateways
from gateway.iam.config import Directory, load_directory
from gateway.internal_api import internal_handler
from gateway.lean_http import Handler, LeanFront, LeanRequest
from gateway.lease_recovery import open_lease_store
from gateway.messages import MessageService
from gateway.metrics import CONTENT_TYPE, QueueGauge, RequestMetrics, Snapshot, render
from gateway.move_tasks import MoveTasks
from gateway.ownership import GroupOwnership
from gateway.params import Params
from gateway.protocol import (
    Protocol,
    detect_protocol,
    new_request_id,
    read_request,
    render_error,
    render_result,
    unknown_action,
)
from gateway.queues import QueueRegistry, partition_keys
from gateway.runtime import Runtime
from gateway.waiters import QueueSignals
from lease_store.clock import Clock, SystemClock
from lease_store.errors import LeaseError
from lease_store.handles import ReceiptHandleCodec
from lease_store.store import LeaseStore
from lease_store.types import CommitListener
from lease_store.value_class import value_class
from topology.admin import TopicAdmin
from topology.catalog import Catalog, QueueRecord
from topology.changelog import LeaseChangelog
from topology.client_log import LIBRDKAFKA
from topology.events import EventPublisher, ensure_events_topic
from topology.follower_producer import FollowerProducer
from topology.ingest import BatchHandler, GroupListener, Ingest, IngestConsumer, IngestShards
from topology.move_task_log import MoveTaskLog
from topology.names import CATALOG_TOPIC, REGION_PATTERN
from topology.owners import Owner, OwnersDirectory
from topology.producer import AsyncProducer, ProduceFailed
from topology.segment_sync import SegmentSync
from topology.topic_tail import TopicTail

log = logging.getLogger("kqs.gateway")

RUNTIME = web.AppKey("runtime", Runtime)
SIGNALS = web.AppKey("signals", QueueSignals)
REQUEST_METRICS = web.AppKey("request_metrics", RequestMetrics)
DIRECTORY = web.AppKey("directory", Directory)
# How often the messages held young past their time are written (`lease_store/young.py`).
YOUNG_FLUSH_INTERVAL_S = 0.2
INTERNAL_HANDLER: web.AppKey[Handler] = web.AppKey("internal_handler")


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


class KafkaClients:
    """Makes every Kafka client of the gateway: the only place `_start` gets them from.

    `kqs serve` uses this class as is. The request-path microbenchmark (`bench/micro`) passes
    a subclass whose clients answer in process, so that everything else is wired exactly as
    here.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.bootstrap = settings.kafka_bootstrap

    def producer(self) -> AsyncProducer:
        # librdkafka's messages through our logger, not raw on stderr (gateway/logs.py)
        return AsyncProducer(
            self.bootstrap,
            {"logger": LIBRDKAFKA},
            statistics=True,
            shards=self.settings.producer_shards,
            linger_ms=self.settings.produce_linger_ms,
            bulk_linger_ms=self.settings.produce_bulk_linger_ms,
            fill_linger_ms=self.settings.produce_fill_linger_ms,
            segment_sync=SegmentSync(self.settings.segment_sync_dir)
            if self.settings.segment_sync_dir is not None
            else None,
            # Not with several gateways yet: there a send to a queue created a moment ago can
            # land while its partitions are still being shared out, and messages were then
            # delivered twice (tests/test_e2e_workers.py failed 2 runs of 3 with it; likely a
            # record applied by both the gateway that produced it and the partition's next
            # owner, not proven; PROFILE.md, session 38). The new shard's ~500 ms wait for
            # its producer id hid that window; the race itself is still to be closed.
            connect_new_shards=self.settings.partition_ownership == "all",
        )

    def admin(self, bootstrap: str, fsync_durable_topics: bool = True) -> TopicAdmin:
        return TopicAdmin(
            bootstrap,
            self.settings.replication_factor,
            fsync_durable_topics,
            gateway_syncs_queues=self.settings.segment_sync_dir is not None,
        )

    def follower(self, name: str, confirmed: bool = False) -> FollowerProducer:
        return FollowerProducer(self.bootstrap, name, confirmed)

    def catalog(self, admin: TopicAdmin, producer: AsyncProducer) -> Catalog:
        return Catalog(self.bootstrap, admin, producer)

    def move_task_log(self, admin: TopicAdmin, producer: AsyncProducer) -> MoveTaskLog:
        return MoveTaskLog(self.bootstrap, admin, producer)

    async def open_leases(
        self, records: Iterable[QueueRecord], clock: Clock, on_commit: CommitListener
    ) -> LeaseStore:
        """The lease store under the data directory, rebuilt from Kafka if it is lost."""
        return await open_lease_store(
            self.settings.lease_dir,
            self.bootstrap,
            records,
            clock,
            on_commit,
            young_ms=self.settings.lease_young_ms,
        )

    def events(self) -> EventPublisher:
        settings = self.settings
        return EventPublisher(
            settings.events_bootstrap or self.bootstrap, settings.events_buffer_messages
        )

    def ingest(
        self,
        loop: asyncio.AbstractEventLoop,
        on_batch: BatchHandler,
        applied: Mapping[tuple[str, int], int],
        group_listener: GroupListener | None = None,
    ) -> IngestConsumer:
        return IngestConsumer(
            self.bootstrap,
            loop,
            on_batch,
            applied,
            self.settings.ingest_fetch_wait_ms,
            group_listener,
        )

    def ingest_shards(
        self,
        loop: asyncio.AbstractEventLoop,
        on_batch: BatchHandler,
        applied: Mapping[tuple[str, int], int],
    ) -> Ingest:
        """One gateway's ingest: the queue topics over `KQS_INGEST_SHARDS` consumers."""

        def make(in_flight: threading.BoundedSemaphore, prefetch_kbytes: int) -> IngestConsumer:
            return IngestConsumer(
                self.bootstrap,
                loop,
                on_batch,
                applied,
                self.settings.ingest_fetch_wait_ms,
                in_flight=in_flight,
                prefetch_kbytes=prefetch_kbytes,
            )

        return IngestShards(make, self.settings.ingest_shards)


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
    catalog_state = await loop.run_in_executor(None, catalog.snapshot, settings.region)
    records = catalog_state.records
    await admin.ensure_durable(
        [CATALOG_TOPIC], [r.topic for r in records.values() if r.deleted_ms is None]
    )
    # Several gateways: a change is answered only once the changelog has it (see _sync).
    follower = kafka.follower("kqs-changelog", confirmed=settings.partition_ownership == "group")
    changelog = LeaseChangelog(producer, follower, admin)
    await changelog.ensure_topic()
    leases = await kafka.open_leases(records.values(), clock, changelog.on_commit)
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
    directory: OwnersDirectory | None = None
    if settings.partition_ownership == "group":
        directory = OwnersDirectory(bootstrap, admin, producer)
        await directory.ensure_topic()
        await loop.run_in_executor(None, directory.load)
        group = GroupOwnership(
            Owner(_gateway_id(settings), _advertised_url(settings)),
            directory,
            registry,
            leases,
            follower,
            bootstrap,
            clock,
            on_served=on_served,
        )
        group_ref.append(group)
    elif settings.partition_ownership == "all":
        await warn_if_group_gateways(admin)
    else:
        raise ValueError(
            f"KQS_PARTITION_OWNERSHIP {settings.partition_ownership!r} is not 'all' or 'group'"
        )
    forwarder = Forwarder(secret)
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
    )
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
    app[RUNTIME] = Runtime(settings, clock, registry, messages, move_tasks, sink)
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
    expiry = asyncio.create_task(expire_messages(registry, messages))
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
    )
    app[PARTS] = parts
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
        await parts.forwarder.close()
        parts.producer.close()
        parts.follower.close()
        parts.events.close()
        parts.leases.close()
        log.info("gateway stopped")

    app.cleanup_ctx.append(lifecycle)
    app[IN_FLIGHT] = InFlight()
    app[REQUEST_METRICS] = RequestMetrics()
    app.on_shutdown.append(_answer_long_polls)
    # Before the catch-all: SQS is served on any path.
    for path, handler in _GET_ROUTES.items():
        app.router.add_get(path, handler)
    internal = internal_handler(receipt_secret(settings), _runtime)
    app[INTERNAL_HANDLER] = internal
    app.router.add_post(f"{INTERNAL_PATH}{{operation}}", internal)
    app.router.add_route("*", "/{tail:.*}", _handle)
    return app


def lean_front(app: web.Application) -> LeanFront:
    """The lean HTTP front (`KQS_HTTP_FRONT=lean`) over this application's handlers, routed
    as `build_app` routes them."""
    routes = {("GET", path): handler for path, handler in _GET_ROUTES.items()}

    def client_gone(request: LeanRequest) -> None:
        # As `_answer` reports a body aiohttp could not read to the end.
        log.info("client disconnected mid-request", extra={"request_id": new_request_id()})
        protocol = detect_protocol(cast(web.Request, request))
        app[REQUEST_METRICS].observe("unknown", protocol.value, _CLIENT_GONE.code, 0.0, False)

    front = LeanFront(
        app,
        routes,
        INTERNAL_PATH,
        app[INTERNAL_HANDLER],
        _handle,
        limits.MAX_REQUEST_BYTES,  # as `client_max_size` of aiohttp's front
        app[IN_FLIGHT],
        client_gone,
    )
    if SETTLE_DELIVERED in app:  # the gateway has started (the front is made after that)
        front.settle_delivered = app[SETTLE_DELIVERED]
        messages = app[RUNTIME].messages
        front.deletes_now = lambda: messages.deletes_find_more
    return front


def _runtime(request: web.Request) -> Runtime:
    return request.app[RUNTIME]


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
        return f"http://127.0.0.1:{settings.port}"
    return f"http://{settings.host}:{settings.port}"


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


async def _answer_long_polls(app: web.Application) -> None:
    # Runs before the server waits for in-flight requests: parked receives answer at once
    # (empty) instead of holding shutdown for up to 20 s.
    if SIGNALS in app:
        app[SIGNALS].close()


class InFlight:
    """The requests being handled, so that a shutdown can wait for them (`drain`)."""

    def __init__(self) -> None:
        self.count = 0
        self.draining = False
        self.idle = asyncio.Event()
        self.idle.set()


IN_FLIGHT = web.AppKey("in_flight", InFlight)
# The producer's `settle_handed`, for the lean front to call before each read (`lean_front`).
SETTLE_DELIVERED: web.AppKey[Callable[[], object]] = web.AppKey("settle_delivered")


async def drain(app: web.Application, timeout_s: float) -> int:
    """First step of a graceful shutdown, once the listening socket is closed.

    Parked long polls answer at once (empty) and the requests being handled finish, on
    connections that stay open meanwhile. Only then may the server close its connections:
    aiohttp's own shutdown drops whatever a connection receives once it is closing, so a
    request whose body was still arriving would hang until the shutdown timeout, unanswered.
    Returns how many requests were still running when `timeout_s` passed.
    """
    tracker = app[IN_FLIGHT]
    tracker.draining = True
    await _answer_long_polls(app)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(tracker.idle.wait(), timeout_s)
    return tracker.count


async def _health(request: web.Request) -> web.Response:
    if request.app[IN_FLIGHT].draining:
        return web.json_response({"status": "shutting down"}, status=503)
    group = request.app[PARTS].group if PARTS in request.app else None
    if group is not None and not group.ready:
        # Group mode: it would answer (forwarding everything) but is not a member yet.
        return web.json_response({"status": "joining the ingest group"}, status=503)
    return web.json_response({"status": "ok"})


async def _metrics(request: web.Request) -> web.Response:
    if "Action" in request.query:
        return await _handle(request)  # a Query-protocol GET that happens to use this path
    runtime = request.app[RUNTIME]
    snapshot = request.app[PARTS].snapshot(runtime.messages, runtime.registry)
    return web.Response(
        body=render(request.app[REQUEST_METRICS], snapshot).encode(),
        headers={"Content-Type": CONTENT_TYPE},
    )


# The paths served apart from the SQS endpoint and the internal channel, on either front.
_GET_ROUTES: dict[str, Handler] = {"/health": _health, "/metrics": _metrics}


async def _handle(request: web.Request) -> web.Response:
    started = time.perf_counter()
    app = request.app
    # Counted here rather than in a middleware (one coroutine less per request): a shutdown
    # waits for these (`drain`).
    tracker = app[IN_FLIGHT]
    tracker.count += 1
    tracker.idle.clear()
    try:
        protocol = detect_protocol(request)
        notes = RequestNotes()
        answer = await _answer(request, app, protocol, notes)
        app[REQUEST_METRICS].observe(
            answer.action,
            protocol.value,
            answer.outcome,
            time.perf_counter() - started,
            notes.long_poll,
        )
        if tracker.draining:
            answer.response.force_close()  # no keep-alive: the next request goes elsewhere
        return answer.response
    finally:
        tracker.count -= 1
        if tracker.count == 0:
            tracker.idle.set()


@value_class
class _Answer:
    response: web.Response
    action: str  # "unknown" unless the request named an action this gateway serves
    outcome: str  # "ok" or the SQS error code


async def _answer(
    request: web.Request, app: web.Application, protocol: Protocol, notes: RequestNotes
) -> _Answer:
    runtime = app[RUNTIME]
    request_id = new_request_id()
    action_name = "unknown"
    error: SqsError
    try:
        body = await _read_body(request)
        now = datetime.fromtimestamp(runtime.clock.now_ms() / 1000, UTC)
        caller = authenticate(request, body, app[DIRECTORY], now)
        wire = read_request(request, protocol, request_id, body)
        action = ACTIONS.get(wire.action)
        if action is None:
            raise unknown_action(wire.action)
        action_name = wire.action
        settings = runtime.settings
        base_url = settings.base_url.rstrip("/") or f"{request.scheme}://{request.host}"
        region = caller.region or settings.region
        principal = caller.principal
        authorize(
            wire.action,
            wire.params,
            principal,
            condition_keys(request, principal, now),
            runtime.registry,
            region,
            base_url,
        )
        ctx = RequestContext(
            runtime=runtime,
            protocol=protocol,
            base_url=base_url,
            account_id=principal.account_id,
            region=region,
            sender_id=principal.access_key or principal.account_id,
            request_id=request_id,
            trace_header=request.headers.get("X-Amzn-Trace-Id"),
            notes=notes,
            principal=principal,
        )
        result = await action(Params(wire.params), ctx)
        return _Answer(render_result(wire, result), action_name, "ok")
    except SqsError as exc:
        error = exc
    except LeaseError as exc:
        error = for_domain_error(exc)
    except (ProduceFailed, KafkaException) as exc:
        log.warning("kafka unavailable", extra={"request_id": request_id, "error": str(exc)})
        error = ServiceUnavailable(
            "The service is unavailable (Kafka did not answer). Retry later."
        )
    except _ClientGone:
        # Nobody will read an answer; not the gateway's fault, so no traceback either.
        log.info("client disconnected mid-request", extra={"request_id": request_id})
        error = _CLIENT_GONE
    except Exception:
        log.exception("request failed", extra={"request_id": request_id})
        error = InternalError("We encountered an internal error. Please try again.")
    response = render_error(protocol, error, request_id, request.headers.get("Accept", ""))
    if isinstance(error, RequestTooLarge):
        response.force_close()  # the rest of the body is not worth reading
    return _Answer(response, action_name, error.code)


class _ClientGone(Exception):
    """The client closed its connection before its request body arrived."""


class _ClientClosedRequest(SqsError):
    code = "ClientClosedRequest"  # an outcome label for /metrics; never reaches a client
    http_status = 400
    sender_fault = True


_CLIENT_GONE = _ClientClosedRequest("The client closed the connection.")


async def _read_body(request: web.Request) -> bytes:
    """The whole request body, or the SQS error for a body that is too large."""
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise RequestTooLarge(
            f"The request body is larger than the {limits.MAX_REQUEST_BYTES} bytes this "
            "server accepts."
        ) from None
    except (ConnectionResetError, ClientPayloadError) as exc:
        raise _ClientGone() from exc
