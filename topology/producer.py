"""A thin asyncio wrapper over confluent_kafka's Producer.

Durability settings are fixed here, not left to configuration: `acks=all` with idempotence,
so a record the broker acknowledged is on every in-sync replica and retries never duplicate
it. `send()` resolves only from the delivery report, i.e. after that acknowledgement.

Delivery reports arrive on the poll thread. Each one used to wake the event loop on its own
(`call_soon_threadsafe` per record: a GIL hand-over and a self-pipe write each); now the
reports one `poll()` returns are handed over together, in delivery order.

The lease changelog's producer, for records nobody waits for, is `follower_producer.py`; it
shares the durability settings and `ProduceFailed`.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from lease_store.value_class import value_class
from topology.client_properties import connection
from topology.names import is_queue_topic
from topology.producer_stats import CombinedStatistics, StatisticsHolder
from topology.record_format import MAX_RECORD_BYTES
from topology.segment_sync import SegmentSync

log = logging.getLogger("kqs.producer")

DURABLE_SETTINGS: dict[str, Any] = {
    "acks": "all",
    "enable.idempotence": True,
    # Bounded, so a client whose broker is gone gets an error instead of a hang.
    "message.timeout.ms": 15_000,
    "socket.connection.setup.timeout.ms": 5_000,
    # Not durability, but not configurable either: a 1 MiB message must fit in a record.
    "message.max.bytes": MAX_RECORD_BYTES,
}

# How long librdkafka waits to fill a produce request for the queue topics (`linger.ms`,
# `KQS_PRODUCE_LINGER_MS`): every send at low load waits that long, so it is short.
DEFAULT_LINGER_MS = 2
# The linger of the bulk producer (`KQS_PRODUCE_BULK_LINGER_MS`, 0: none), which sends join
# while the gateway is busy (`AsyncProducer.crowded`) and the queue's consumers lag behind.
# librdkafka's sending thread spins through the last millisecond of every linger window, and
# a short window also means small produce requests for the broker: in 100,000-message fills
# (32 clients, SendMessageBatch) that thread took 46-49 µs of CPU per message at 2 ms, 15-21
# at 5, 8-9 at 10 and ~3 at 20, and the broker's request handling 46, 29-40, 30-36 and 19-24
# (bench/results/archive/profile-journal.md, 2026-11-26 (cb32531)). A busy gateway's sends wait on the event loop
# anyway, so they can wait for a fuller request; a lone send keeps the short linger. Where
# consumers lag, the linger also keeps the producers from outrunning them (profile journal, 2026-11-27 (9fdcc3b)).
DEFAULT_BULK_LINGER_MS = 20
# The linger of the fill producer (`KQS_PRODUCE_FILL_LINGER_MS`, 0: the bulk producer's),
# which a busy gateway's sends to a queue nobody receives from join. There no consumer is
# to be kept pace with, and since the broker no longer syncs each append (profile journal, 2026-11-28 (7949891)) the
# shorter window costs no more CPU per message: 200,000-message fills (32 clients) ran at
# ~10,700 msg/s at 10 ms against ~9,100 at 20, 81-92 against 85-102 µs of server CPU per
# message, and slower again with every send at 2 ms (bench/results/archive/profile-journal.md, 2026-11-29 (20922b2)).
DEFAULT_FILL_LINGER_MS = 10
# Records produced and not yet acknowledged from which the gateway counts as busy: a lone
# SendMessageBatch (10) still goes out at once.
CROWDED_RECORDS = 11


class Linger(enum.Enum):
    """Which set of librdkafka producers a record joins. librdkafka has one `linger.ms` per
    client, so each linger is a set of clients of its own; a topic's records keep their order
    only within one set (FIFO queues use `PROMPT` alone)."""

    PROMPT = "prompt"  # `linger_ms`: a lone send waits little
    BULK = "bulk"  # `bulk_linger_ms`: a crowded gateway, the queue's consumers lagging
    FILL = "fill"  # `fill_linger_ms`: a crowded gateway, a queue nobody receives from


class ProduceFailed(Exception):
    """The broker did not acknowledge a record within the delivery timeout."""

    def __init__(self, error: KafkaError) -> None:
        super().__init__(str(error))
        self.code = (
            error.code()
        )  # an authorization code names a missing ACL (gateway/common/denials.py)
        self.retriable = bool(error.retriable()) or error.code() == KafkaError._MSG_TIMED_OUT
        # Taken out of librdkafka's queue unsent (`FollowerProducer.drop_unsent`), not refused.
        self.dropped = error.code() == KafkaError._PURGE_QUEUE


# How long a new shard's poll thread waits for its connection (`connect_now`) before polling:
# short against `message.timeout.ms`, whose failure reports it would otherwise hold back.
_CONNECT_TIMEOUT_S = 2.0
# Metadata requests `connect_now` makes at most: the bootstrap connection answers one at most
# (librdkafka then drops it), so the second goes to a broker by id; a bound all the same.
_CONNECT_ATTEMPTS = 3

# How many topics' shards `AsyncProducer._shard_for` remembers before it starts over.
_SHARD_MEMO_LIMIT = 100_000


@value_class
class Delivered:
    topic: str
    partition: int
    offset: int
    timestamp_ms: int


# Told of a record's acknowledgement on the event loop, before its `send` resumes.
OnDelivered = Callable[[Delivered], None]

# A delivery report as the poll thread receives it: whose future (and callback), the outcome.
_Report = tuple["asyncio.Future[Delivered]", OnDelivered | None, KafkaError | None, Message]


class _Shard:
    """One librdkafka producer of an `AsyncProducer`, with its poll thread and the delivery
    reports that thread has not handed to the event loop yet."""

    def __init__(self, config: dict[str, Any], statistics: bool) -> None:
        self.statistics = StatisticsHolder()
        self.client = Producer({**config, **(self.statistics.config() if statistics else {})})
        # Appended by librdkafka's callbacks inside poll(), popped by `hand_over`: deque
        # appends and pops are atomic.
        self.reports: deque[_Report] = deque()
        self.poller: threading.Thread | None = None


class AsyncProducer:
    """Produces with `acks=all` and settles each record's future from its delivery report.

    With `shards` > 1 the topics are spread over that many librdkafka producers, each topic
    always to the same one (so its records keep their order and idempotence): librdkafka
    finds a topic's state by walking its client's list of topics on every produce
    (`rd_kafka_topic_find`), which at 10,000 queue topics cost up to ~600 µs per produce
    against ~3 µs at the head of the list (bench/results/archive/profile-journal.md, 2026-11-24 (71f0c3d)). Shards are
    created on first use.
    """

    def __init__(
        self,
        bootstrap: str,
        extra: dict[str, Any] | None = None,
        statistics: bool = False,
        shards: int = 1,
        linger_ms: int = DEFAULT_LINGER_MS,
        bulk_linger_ms: int = 0,
        fill_linger_ms: int = 0,
        segment_sync: SegmentSync | None = None,
    ) -> None:
        self._config = {
            **connection(bootstrap),
            "linger.ms": linger_ms,
            **(extra or {}),
            **DURABLE_SETTINGS,
        }
        self._with_statistics = statistics
        # One set of shards per linger (`Linger`); the bulk and fill sets only when their
        # linger is configured. A record for a set that is not there joins another
        # (`_fallback`).
        self._lingers = {
            Linger.PROMPT: linger_ms,
            Linger.BULK: bulk_linger_ms,
            Linger.FILL: fill_linger_ms,
        }
        self._sets: dict[Linger, list[_Shard | None]] = {
            lane: [None] * max(1, shards)
            for lane, ms in self._lingers.items()
            if lane is Linger.PROMPT or ms > 0
        }
        # Records handed to librdkafka whose delivery report is not settled yet.
        self.unsettled = 0
        # With `statistics`, librdkafka's numbers of every shard, summed, every 5 s.
        self.statistics = CombinedStatistics()
        self._stopping = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        # Called on the event loop after each handed-over batch of reports is settled.
        self._batch_listeners: list[Callable[[], None]] = []
        self._settled_listeners: list[Callable[[list[asyncio.Future[Delivered]]], None]] = []
        # Batches of reports the poll threads have synced and handed over, oldest first. The
        # loop settles them from the callback each hand-over schedules, or sooner, from
        # `settle_handed` (see there).
        self._handed: deque[list[_Report]] = deque()
        # Records waiting for room in a full local queue (see `start`).
        self._waiting_for_room: set[asyncio.Task[None]] = set()
        # Each topic's shard in each set, once chosen (a CRC of the name): asked for every
        # record.
        self._shard_of: dict[Linger, dict[str, _Shard]] = {lane: {} for lane in self._sets}
        # With the embedded broker, the queue topics' records are synced to disk here, before
        # their reports reach the event loop (topology/segment_sync.py).
        self.segment_sync = segment_sync
        self._shard(0)  # connect now: a misconfigured bootstrap shows at start-up

    def crowded(self) -> bool:
        """Whether enough records await acknowledgement for a send to join the bulk or fill
        producer (it then waits for a fuller produce request instead of costing one of its
        own)."""
        return self.unsettled >= CROWDED_RECORDS

    def _shard_for(self, topic: str, lane: Linger = Linger.PROMPT) -> _Shard:
        chosen = self._shard_of.get(lane)
        if chosen is None:
            lane = self._fallback(lane)
            chosen = self._shard_of[lane]
        shard = chosen.get(topic)
        if shard is None:
            count = len(self._sets[lane])
            index = zlib.crc32(topic.encode()) % count if count > 1 else 0
            if len(chosen) >= _SHARD_MEMO_LIMIT:
                chosen.clear()  # topics come and go with their queues: keep it bounded
            shard = chosen[topic] = self._shard(index, lane, topic)
        return shard

    def _fallback(self, lane: Linger) -> Linger:
        """The set a record for an unconfigured one joins: a fill's joins the bulk set where
        there is one (the lingering it was meant for), any other the prompt set."""
        if lane is Linger.FILL and Linger.BULK in self._sets:
            return Linger.BULK
        return Linger.PROMPT

    def _shard(
        self, index: int, lane: Linger = Linger.PROMPT, first_topic: str | None = None
    ) -> _Shard:
        """The set's shard `index`, created (with its poll thread) on first use.
        `first_topic`: the topic of the record that asked for it, which the new shard's
        poll thread connects for before it polls (`connect_now`)."""
        shards = self._sets[lane]
        shard = shards[index]
        if shard is None:
            config = self._config
            if lane is not Linger.PROMPT:
                config = {**config, "linger.ms": self._lingers[lane]}
            shard = shards[index] = _Shard(config, self._with_statistics)
            self.statistics.add(shard.statistics)
            # Delivery reports fire from poll(); a dedicated thread per shard keeps them
            # flowing without blocking the event loop.
            kind = "" if lane is Linger.PROMPT else f"{lane.value}-"
            name = f"kqs-producer-{kind}{index}"
            shard.poller = threading.Thread(
                target=self._poll_forever, args=(shard, first_topic), name=name, daemon=True
            )
            shard.poller.start()
        return shard

    @property
    def shards_in_use(self) -> int:
        """How many of the shards have been created (a topic's first record creates its)."""
        return len(self._live_shards())

    def _live_shards(self) -> list[_Shard]:
        return [shard for shards in self._sets.values() for shard in shards if shard is not None]

    def _poll_forever(self, shard: _Shard, first_topic: str | None = None) -> None:
        if first_topic is not None:
            connect_now(shard.client, first_topic)
        while not self._stopping.is_set():
            shard.client.poll(0.05)
            self._hand_over(shard)

    def _hand_over(self, shard: _Shard) -> None:
        if not shard.reports or self._loop is None:
            return
        batch: list[_Report] = []
        while shard.reports:
            batch.append(shard.reports.popleft())
        if self.segment_sync is not None:
            batch = _synced(self.segment_sync, batch)
        self._handed.append(batch)
        try:
            self._loop.call_soon_threadsafe(self.settle_handed)
        except RuntimeError:
            pass  # the loop is closed: nobody waits for these any more

    def settle_handed(self) -> int:
        """Settle, on the event loop, every batch of reports handed over so far; returns how
        many reports that was.

        The callback each hand-over schedules runs only once the loop has worked through what
        was queued before it — under load, the rest of its turn: every connection's new
        requests, 3-4 ms in side-by-side workload (b) (bench/results/archive/profile-journal.md, 2026-11-29 (730104f)).
        The gateway's HTTP front calls this before it reads more requests, so sends waiting
        for these reports answer first; called from a plain loop callback (no Task running),
        their coroutines then resume at once (`add_settled_listener`).
        """
        handed = self._handed
        if not handed:
            return 0
        reports = handed.popleft()  # the poll thread's list, ours from here: extended in place
        while handed:
            reports.extend(handed.popleft())
        self._settle_all(reports)
        return len(reports)

    def add_batch_listener(self, listener: Callable[[], None]) -> None:
        """Call `listener` on the event loop after each batch of delivery reports.

        A batch is what the poll threads handed over since the loop last settled (one
        `poll()`'s reports, or several polls' when the loop was busy). The `on_delivered`
        callbacks of its records have run and their futures are settled, but no `send` has
        resumed yet: the listener can finish their work for all of them at once, in the same
        event-loop turn.
        """
        self._batch_listeners.append(listener)

    def add_settled_listener(
        self, listener: Callable[[list[asyncio.Future[Delivered]]], None]
    ) -> None:
        """Call `listener` with the futures of each batch of delivery reports, after the batch
        listeners: it may resume now what waits for them (`gateway/common/eager_start.py`), rather
        than on the loop's next iteration."""
        self._settled_listeners.append(listener)

    def _settle_all(self, reports: list[_Report]) -> None:
        self.unsettled -= len(reports)
        for future, on_delivered, error, msg in reports:
            if error is not None:
                if not future.done():
                    future.set_exception(ProduceFailed(error))
                continue
            # `coordinates`, in place: this runs for every record produced.
            topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
            assert topic is not None and partition is not None and offset is not None
            delivered = Delivered(topic, partition, offset, msg.timestamp()[1])
            if on_delivered is not None:
                # Even for a send whose caller is gone (cancelled): the record is in Kafka,
                # and applying it now keeps the partition's later records from waiting on it.
                try:
                    on_delivered(delivered)
                except Exception:
                    log.exception("delivery callback failed", extra={"topic": topic})
            if not future.done():
                future.set_result(delivered)
        self._batch_done([report[0] for report in reports])

    def _batch_done(self, futures: list[asyncio.Future[Delivered]]) -> None:
        for listener in self._batch_listeners:
            try:
                listener()
            except Exception:
                log.exception("delivery batch listener failed")
        for settled in self._settled_listeners:
            try:
                settled(futures)
            except Exception:
                log.exception("delivery settled listener failed")

    def _future(
        self, shard: _Shard, on_delivered: OnDelivered | None = None
    ) -> tuple[asyncio.Future[Delivered], Any]:
        """A future for one record and the `on_delivery` callback that settles it."""
        self._loop = asyncio.get_running_loop()
        future: asyncio.Future[Delivered] = self._loop.create_future()
        reports = shard.reports
        self.unsettled += 1  # until its report is settled (or it fails before producing)

        def on_delivery(error: KafkaError | None, msg: Message) -> None:
            reports.append((future, on_delivered, error, msg))

        return future, on_delivery

    async def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: list[tuple[str, bytes]] | None = None,
        timestamp_ms: int = 0,
        partition: int | None = None,
        on_delivered: OnDelivered | None = None,
    ) -> Delivered:
        """Produce a record; returns once the broker acknowledged it.

        `on_delivered` runs on the event loop when the acknowledgement arrives, in the same
        turn as the batch listeners, before this coroutine resumes.
        """
        return await self.start(topic, value, key, headers, timestamp_ms, partition, on_delivered)

    def start(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: list[tuple[str, bytes]] | None = None,
        timestamp_ms: int = 0,
        partition: int | None = None,
        on_delivered: OnDelivered | None = None,
        linger: Linger = Linger.PROMPT,
    ) -> asyncio.Future[Delivered]:
        """`send` without the coroutine: the record goes to librdkafka now and the returned
        future is its delivery report. The records of a SendMessageBatch are started in one
        go, so they share produce requests and need no task each. If librdkafka's queue is
        full the record waits for room without blocking the loop; errors librdkafka raises
        at once (an unknown partition) are raised here.

        `linger` picks the set of producers (`Linger`; for a set not configured, see
        `_fallback`). A topic's records keep their order only within one set: callers that
        need it (FIFO queues) must not mix them."""
        shard = self._shard_for(topic, linger)
        future, on_delivery = self._future(shard, on_delivered)
        kwargs: dict[str, Any] = {"value": value, "key": key, "on_delivery": on_delivery}
        if headers:
            kwargs["headers"] = headers
        if timestamp_ms:
            kwargs["timestamp"] = timestamp_ms
        if partition is not None:
            kwargs["partition"] = partition
        try:
            shard.client.produce(topic, **kwargs)
        except BufferError:
            task = asyncio.get_running_loop().create_task(
                self._produce_when_room(shard.client, topic, kwargs, future)
            )
            self._waiting_for_room.add(task)  # the loop keeps only weak references
            task.add_done_callback(self._waiting_for_room.discard)
        except BaseException:
            self.unsettled -= 1  # refused: no report will come
            raise
        return future

    async def _produce_when_room(
        self,
        client: Producer,
        topic: str,
        kwargs: dict[str, Any],
        future: asyncio.Future[Delivered],
    ) -> None:
        try:
            while not future.done():  # done: its sender gave up (cancelled)
                await asyncio.sleep(0.01)  # deliveries drain the local queue meanwhile
                try:
                    client.produce(topic, **kwargs)
                    return
                except BufferError:
                    continue
        except Exception as error:  # noqa: BLE001 - the sender's to handle
            if not future.done():
                future.set_exception(error)
        self.unsettled -= 1  # never produced: no report will come

    def send_soon(
        self, topic: str, value: bytes | None, key: bytes | None = None
    ) -> asyncio.Future[Delivered]:
        """Produce now, from the event loop, and return the future of the delivery report.

        Unlike `send`, the record is handed to librdkafka before this returns, so records
        produced by successive calls keep their order. A full local queue is drained in place
        (blocking the loop briefly) rather than awaited.
        """
        shard = self._shard_for(topic)
        future, on_delivery = self._future(shard)
        while True:
            try:
                shard.client.produce(topic, value=value, key=key, on_delivery=on_delivery)
                return future
            except BufferError:
                shard.client.poll(0.01)
                self._hand_over(shard)
            except BaseException:
                self.unsettled -= 1  # refused: no report will come
                raise

    def flush(self, timeout_s: float = 30.0) -> int:
        """Wait for outstanding deliveries; returns how many are still undelivered."""
        deadline = time.monotonic() + timeout_s
        remaining = 0
        for shard in self._live_shards():
            remaining += shard.client.flush(max(0.0, deadline - time.monotonic()))
            self._hand_over(shard)
        return remaining

    def close(self) -> None:
        remaining = self.flush()
        if remaining:
            log.warning("producer closed with undelivered records", extra={"remaining": remaining})
        self._stopping.set()
        for shard in self._live_shards():
            if shard.poller is not None:
                shard.poller.join(timeout=5)


def connect_now(client: Producer, topic: str) -> None:
    """Get a new producer connected and its producer id now, for the record that created it.

    An idempotent librdkafka producer asks for its producer id as it starts, and again on
    each metadata response, but only from a broker it knows by id: the bootstrap connection
    does not count. With none, it tries again 500 ms later (a fixed timer), so the first
    record of a new shard waited ~510 ms for its acknowledgement: the first SendMessage to a
    queue just created, and ~2 % of the open-loop workload's sends (bench/results/archive/profile-journal.md,
    2026-11-29 (f545409)). A metadata request answered by the broker itself (not the bootstrap
    connection, which answers first and is then dropped) has it ask at once: ~60 ms.
    Asked in the shard's own poll thread (the call blocks, without the GIL), for the one
    topic the record goes to, since a whole-cluster request grows with the queues. A failure
    changes nothing: the producer then connects as before.
    """
    deadline = time.monotonic() + _CONNECT_TIMEOUT_S
    for _ in range(_CONNECT_ATTEMPTS):
        left = deadline - time.monotonic()
        if left <= 0:
            return
        try:
            answered_by = client.list_topics(topic, timeout=left).orig_broker_id
        except KafkaException:
            return
        if answered_by >= 0:  # a broker by id; the bootstrap connection is -1
            return


def _synced(segment_sync: SegmentSync, batch: list[_Report]) -> list[_Report]:
    """`batch` once its queue-topic records are synced to disk; a record whose segment could
    not be synced is reported failed, so its send is not acknowledged."""
    ranges: dict[tuple[str, int], tuple[int, int]] = {}
    for _, _, error, msg in batch:
        topic = msg.topic()
        if error is not None or topic is None or not is_queue_topic(topic):
            continue
        key, offset = (topic, msg.partition() or 0), msg.offset() or 0
        lowest, highest = ranges.get(key, (offset, offset))
        ranges[key] = (min(lowest, offset), max(highest, offset))
    if not ranges:
        return batch
    failed = segment_sync.sync(ranges)
    if not failed:
        return batch
    for partition, reason in failed.items():
        log.error("queue records not synced", extra={"topic": partition[0], "error": reason})
    return [
        (future, on_delivered, KafkaError(KafkaError._FS, failed[key]), msg)
        if error is None and (key := (msg.topic() or "", msg.partition() or 0)) in failed
        else (future, on_delivered, error, msg)
        for future, on_delivered, error, msg in batch
    ]


def coordinates(msg: Message) -> tuple[str, int, int]:
    """Topic, partition and offset of a delivered or consumed record (never None there)."""
    topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
    assert topic is not None and partition is not None and offset is not None
    return topic, partition, offset
