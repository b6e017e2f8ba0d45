"""`AsyncProducer` with several shards against a real broker: every topic keeps the order of
its records and batches of reports still reach the batch listeners; the statistics of the
shards add up; reports handed over are settled once, by the loop's code or its callback; a
new shard has its producer id asked for as soon as it is connected."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

from confluent_kafka import Producer

from topology.admin import TopicAdmin
from topology.producer import DURABLE_SETTINGS, AsyncProducer, Delivered, Linger, connect_now
from topology.producer_stats import CombinedStatistics, StatisticsHolder

TOPICS = 12
RECORDS_PER_TOPIC = 20


class _BatchCount:
    """A batch listener that counts the batches of reports settled."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> None:
        self.count += 1


def test_records_of_each_topic_keep_their_order_across_shards(kafka_bootstrap: str) -> None:
    prefix = f"shards-{uuid.uuid4().hex[:8]}"
    topics = [f"{prefix}-{i}" for i in range(TOPICS)]

    async def scenario() -> tuple[dict[str, list[Delivered]], int, int]:
        admin = TopicAdmin(kafka_bootstrap)
        await asyncio.gather(*(admin.create_topic(t, 1, {}) for t in topics))
        producer = AsyncProducer(kafka_bootstrap, statistics=True, shards=4)
        batches = _BatchCount()
        producer.add_batch_listener(batches)
        try:
            # Given every topic's records started interleaved, in one go
            futures: dict[str, list[asyncio.Future[Delivered]]] = {t: [] for t in topics}
            for n in range(RECORDS_PER_TOPIC):
                for topic in topics:
                    futures[topic].append(producer.start(topic, f"{n}".encode(), key=b"k"))
            delivered = {t: list(await asyncio.gather(*fs)) for t, fs in futures.items()}
            return delivered, producer.shards_in_use, batches.count
        finally:
            producer.close()

    delivered, shards_in_use, batches = asyncio.run(scenario())

    # Then each topic's records landed in the order they were started, and several shards
    # carried them
    for topic, reports in delivered.items():
        assert [r.offset for r in reports] == list(range(RECORDS_PER_TOPIC)), topic
        assert {r.topic for r in reports} == {topic}
    assert shards_in_use > 1
    assert batches >= 1


def test_one_shard_is_the_plain_producer(kafka_bootstrap: str) -> None:
    topic = f"shards-one-{uuid.uuid4().hex[:8]}"

    async def scenario() -> tuple[Delivered, int]:
        await TopicAdmin(kafka_bootstrap).create_topic(topic, 1, {})
        producer = AsyncProducer(kafka_bootstrap)
        try:
            return await producer.send(topic, b"x"), producer.shards_in_use
        finally:
            producer.close()

    delivered, shards_in_use = asyncio.run(scenario())

    assert (delivered.topic, delivered.offset, shards_in_use) == (topic, 0, 1)


def test_the_statistics_of_the_shards_add_up() -> None:
    first, second = StatisticsHolder(), StatisticsHolder()
    first.on_statistics(
        json.dumps(
            {"msg_cnt": 3, "txmsgs": 10, "brokers": {"b/1": {"nodeid": 1, "rtt": {"avg": 2000}}}}
        )
    )
    second.on_statistics(
        json.dumps(
            {"msg_cnt": 4, "txmsgs": 5, "brokers": {"b/1": {"nodeid": 1, "rtt": {"avg": 4000}}}}
        )
    )
    combined = CombinedStatistics()
    combined.add(first)
    combined.add(second)

    latest = combined.latest

    assert (latest.queue_messages, latest.messages_sent) == (7, 15)
    assert latest.broker_rtt_avg_s == {"b/1": 0.003}


def test_each_linger_has_its_own_producer_and_records_are_counted_until_settled(
    kafka_bootstrap: str,
) -> None:
    topic = f"shards-bulk-{uuid.uuid4().hex[:8]}"
    lanes = [Linger.PROMPT, Linger.BULK, Linger.FILL]

    async def scenario() -> tuple[list[Delivered], list[int], int, bool]:
        await TopicAdmin(kafka_bootstrap).create_topic(topic, 1, {})
        producer = AsyncProducer(kafka_bootstrap, bulk_linger_ms=20, fill_linger_ms=10)
        try:
            # Given no record in flight, the producer is not crowded
            crowded_before = producer.crowded()
            # When records are started through each of the three producers in turn
            futures = [
                producer.start(topic, f"{n}".encode(), linger=lanes[n % 3]) for n in range(12)
            ]
            counted = [producer.unsettled, int(producer.crowded())]
            delivered = list(await asyncio.gather(*futures))
            await asyncio.sleep(0)  # the batch's settlement and its listeners
            counted.append(producer.unsettled)
            return delivered, counted, producer.shards_in_use, crowded_before
        finally:
            producer.close()

    delivered, counted, shards_in_use, crowded_before = asyncio.run(scenario())

    # Then all three producers carried records, all twelve landed once, and the count of
    # records awaiting acknowledgement rose to twelve (crowded) and fell back to none
    assert not crowded_before
    assert shards_in_use == 3
    assert sorted(d.offset for d in delivered) == list(range(12))
    assert counted == [12, 1, 0]


def test_a_linger_not_configured_falls_back_to_another_set(kafka_bootstrap: str) -> None:
    topic = f"shards-fallback-{uuid.uuid4().hex[:8]}"

    async def scenario() -> tuple[int, int, list[int]]:
        await TopicAdmin(kafka_bootstrap).create_topic(topic, 1, {})
        with_bulk = AsyncProducer(kafka_bootstrap, bulk_linger_ms=20)
        prompt_only = AsyncProducer(kafka_bootstrap)
        try:
            # Given a producer with a bulk linger and none for fills, and one with neither
            # When fill and bulk records are started through each
            futures = [
                with_bulk.start(topic, b"fill", linger=Linger.FILL),
                with_bulk.start(topic, b"bulk", linger=Linger.BULK),
                prompt_only.start(topic, b"fill", linger=Linger.FILL),
                prompt_only.start(topic, b"bulk", linger=Linger.BULK),
            ]
            delivered = await asyncio.gather(*futures)
            return with_bulk.shards_in_use, prompt_only.shards_in_use, [d.offset for d in delivered]
        finally:
            with_bulk.close()
            prompt_only.close()

    with_bulk, prompt_only, offsets = asyncio.run(scenario())

    # Then the fills joined the bulk producer where there is one (the prompt producer, which
    # connects at start, and the bulk one), and the prompt producer where there is not
    assert (with_bulk, prompt_only) == (2, 1)
    assert sorted(offsets) == [0, 1, 2, 3]


def test_reports_handed_over_are_settled_by_whoever_comes_first(kafka_bootstrap: str) -> None:
    """`settle_handed` settles what the poll threads handed over without waiting for the
    callback each hand-over schedules (the lean front calls it before each read); that
    callback then finds nothing left, and nothing is settled twice."""
    topic = f"handed-{uuid.uuid4().hex[:8]}"

    async def scenario() -> tuple[int, bool, int, int]:
        admin = TopicAdmin(kafka_bootstrap)
        await admin.create_topic(topic, 1, {})
        producer = AsyncProducer(kafka_bootstrap)
        batches = _BatchCount()
        producer.add_batch_listener(batches)
        try:
            # Given records whose reports the poll thread hands over while the loop is busy
            # (blocked here, so the scheduled callbacks cannot run)
            futures = [producer.start(topic, f"{n}".encode(), key=b"k") for n in range(3)]
            settled = 0
            for _ in range(500):
                settled += producer.settle_handed()
                if settled == len(futures):
                    break
                time.sleep(0.01)  # noqa: ASYNC251 - blocking the loop is the point here
            # When they were settled from the loop's own code: done at once
            done_at_once = all(future.done() for future in futures)
            # Then the scheduled callbacks, run now, settle nothing again
            await asyncio.sleep(0.05)
            return settled, done_at_once, batches.count, producer.unsettled
        finally:
            producer.close()

    settled, done_at_once, batches, unsettled = asyncio.run(scenario())
    assert settled == 3
    assert done_at_once
    assert 1 <= batches <= 3  # one per settle that found reports, none from the callbacks
    assert unsettled == 0


def test_a_new_producer_asks_for_its_producer_id_as_soon_as_it_is_connected(
    kafka_bootstrap: str,
) -> None:
    # librdkafka asks for an idempotent producer's id only from a broker it knows by id, on
    # a metadata response; without one it waits in WaitTransport for a timer 500 ms away,
    # which the first record of every new shard waited for. `connect_now` returns once a
    # broker by id has answered, so from then on the id is being asked for (RequestPID,
    # WaitPID) or held (Assigned).
    topic = f"shards-connect-{uuid.uuid4().hex[:8]}"
    asyncio.run(TopicAdmin(kafka_bootstrap).create_topic(topic, 1, {}))
    for _ in range(3):  # each attempt a new client: the bootstrap race goes either way
        reports: list[dict[str, Any]] = []
        created = time.monotonic()
        client = Producer(
            {
                "bootstrap.servers": kafka_bootstrap,
                **DURABLE_SETTINGS,
                "statistics.interval.ms": 10,
                "stats_cb": lambda stats, into=reports: into.append(json.loads(stats)),
            }
        )
        try:
            # When the shard connects for its first topic
            connect_now(client, topic)
            connected_after_us = (time.monotonic() - created) * 1_000_000

            # Then the first statistics taken after that (librdkafka's `age` counts from a
            # moment later than `created`) show the id asked for or assigned, not WaitTransport
            after: list[dict[str, Any]] = []
            deadline = time.monotonic() + 10
            while not after and time.monotonic() < deadline:
                client.poll(0.05)
                after = [r for r in reports if r["age"] >= connected_after_us]
            assert after, "no statistics after connecting"
            assert after[0]["eos"]["idemp_state"] in ("RequestPID", "WaitPID", "Assigned")
        finally:
            client.flush(5)
