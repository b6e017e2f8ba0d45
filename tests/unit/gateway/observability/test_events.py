"""Analytics events without a gateway: the `__kqs_events` record format, the Kafka event sink
(with a recording publisher and a manual clock), the lease-store facts events need, and the
bounded publisher against a Kafka that does not answer (real librdkafka, no broker)."""

from __future__ import annotations

import base64
import dataclasses
import time

import pytest

from gateway.observability.events import KafkaEventSink
from lease_store.clock import ManualClock
from lease_store.records import AttributeValue
from lease_store.store import LeaseStore
from lease_store.types import Counts, Delivery
from tests.support.builders import (
    DAY_MS,
    SECOND_MS,
    T0,
    a_fact,
    a_message,
    a_partition,
    on_every_backend,
)
from tests.support.builders import records as queue_records
from tests.support.harness import free_port
from topology import event_format
from topology.catalog import QueueRecord
from topology.events import BUFFER_FULL, DELIVERY_FAILED, EventPublisher

ACCOUNT = "000000000000"
QUEUE = QueueRecord(ACCOUNT, "orders", "ab" * 16, 1)
DLQ = QueueRecord(ACCOUNT, "orders-dlq", "cd" * 16, 1)
PK = a_partition()


class RecordingPublisher:
    """Keeps what the sink publishes, decoded; `fail` makes `publish` raise."""

    def __init__(self, fail: bool = False) -> None:
        self.records: list[tuple[str, event_format.Event]] = []
        self.fail = fail

    def publish(self, key: bytes, value: bytes) -> bool:
        if self.fail:
            raise RuntimeError("publisher broken")
        self.records.append((key.decode(), event_format.decode(value)))
        return True


def a_sink(fail: bool = False) -> tuple[KafkaEventSink, RecordingPublisher, ManualClock]:
    publisher = RecordingPublisher(fail)
    clock = ManualClock(T0)
    return KafkaEventSink(publisher, clock), publisher, clock


# -- record format ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("account", "queue", "region", "message_id"),
    [
        (ACCOUNT, "orders", "us-east-1", "6f1d0a5e-1c7b-4a53-9d2b-2f5e8a0c1b3d"),
        ("123456789012", "q-ü_1.fifo", "eu-west-1", 'id "quoted" \\ ünï'),
        # Plain characters around the separator of joined ids (`_ids_text`): still one id.
        (ACCOUNT, "orders", "us-east-1", 'a","b'),
    ],
)
def test_the_direct_encoders_write_the_same_bytes_as_the_builders(
    account: str, queue: str, region: str, message_id: str
) -> None:
    members = event_format.queue_members(account, queue, region)

    for messages in ([(message_id, 3)], [(message_id, 3), ("m2", 1), ("m3", 12)]):
        assert event_format.encode_sent(T0, members, messages) == event_format.encode(
            event_format.sent(T0, account, queue, messages, region=region)
        )
        assert event_format.encode_received(T0, members, messages) == event_format.encode(
            event_format.received(T0, account, queue, messages, region=region)
        )
        ids = [message_id for message_id, _ in messages]
        assert event_format.encode_deleted(T0, members, ids) == event_format.encode(
            event_format.deleted(T0, account, queue, ids, region=region)
        )


def test_every_event_carries_version_type_time_account_queue_and_count() -> None:
    # When each builder makes an event
    events = [
        event_format.sent(T0, ACCOUNT, "q", [("m1", 12)], region="us-east-1"),
        event_format.received(T0, ACCOUNT, "q", [("m1", 2)], region="us-east-1"),
        event_format.deleted(T0, ACCOUNT, "q", ["m1"], region="us-east-1"),
        event_format.empty_receive(T0, ACCOUNT, "q", region="us-east-1"),
        event_format.moved_to_dlq(T0, ACCOUNT, "dlq", "q", "m1", 1, T0 - 5, {}, region="us-east-1"),
        event_format.expired(T0, ACCOUNT, "q", "m1", region="us-east-1"),
        event_format.purged(T0, ACCOUNT, "q", 7, region="us-east-1"),
        event_format.gauges(T0, ACCOUNT, "q", 1, 2, 3, 4, region="us-east-1"),
    ]
    # Then the common fields are there, with the documented types, and they round-trip
    assert [e["type"] for e in events] == list(event_format.TYPES)
    for event in events:
        assert event_format.decode(event_format.encode(event)) == event
        assert {k: event[k] for k in ("v", "ts", "account")} == {
            "v": 1,
            "ts": T0,
            "account": ACCOUNT,
        }
        assert isinstance(event["count"], int)
    assert [e["count"] for e in events] == [1, 1, 1, 1, 1, 1, 7, 1]
    assert events[-1] == {
        "v": 1,
        "type": "gauges",
        "ts": T0,
        "account": ACCOUNT,
        "queue": "q",
        "region": "us-east-1",
        "count": 1,
        "visible": 1,
        "not_visible": 2,
        "delayed": 3,
        "oldest_age_s": 4,
    }


def test_event_key_is_the_queues_catalog_key() -> None:
    assert event_format.event_key(ACCOUNT, "orders") == b"000000000000/orders"
    assert event_format.event_key(ACCOUNT, "orders", "eu-west-1") == (
        b"eu-west-1/000000000000/orders"
    )


def test_events_of_a_queue_of_another_region_carry_it_and_are_keyed_apart() -> None:
    # Given the same name in the default region and in eu-west-1
    sink, publisher, _ = a_sink()
    elsewhere = dataclasses.replace(QUEUE, region="eu-west-1", region_in_names=True)
    # When each gets a purge
    sink.purged(QUEUE, 1)
    sink.purged(elsewhere, 2)
    # Then the keys and the events tell them apart
    assert [(key, event["region"], event["count"]) for key, event in publisher.records] == [
        ("000000000000/orders", "us-east-1", 1),
        ("eu-west-1/000000000000/orders", "eu-west-1", 2),
    ]


def test_moved_to_dlq_shows_attributes_as_text_base64_for_binary_cut_to_256_chars() -> None:
    # Given attributes of every kind, one longer than 256 characters
    attributes = {
        "s": AttributeValue("String", string_value="x" * 300),
        "n": AttributeValue("Number.int", string_value="42"),
        "b": AttributeValue("Binary", binary_value=b"\x00\x01\xff"),
    }
    # When the event is built
    event = event_format.moved_to_dlq(
        T0, ACCOUNT, "dlq", "src", "m1", 3, T0 - 1500, attributes, region="us-east-1"
    )
    # Then
    assert event["attributes"] == {
        "s": "x" * 256,
        "n": "42",
        "b": base64.b64encode(b"\x00\x01\xff").decode(),
    }
    assert (event["queue"], event["source_queue"]) == ("dlq", "src")
    assert (event["receive_count"], event["age_ms"]) == (3, 1500)


# -- the Kafka sink --------------------------------------------------------------------------


def test_sink_publishes_one_event_per_outcome_keyed_by_queue_at_clock_time() -> None:
    # Given a sink whose clock reads T0 + 5 s
    sink, publisher, clock = a_sink()
    clock.advance(5 * SECOND_MS)
    first = Delivery(0, a_fact(receive_count=1), a_message("m1"))
    second = Delivery(1, a_fact(receive_count=3), a_message("m2"))

    # When two messages are sent by one request and one by another, two are received by one
    # request, then one by another, one expires, nothing is found once, and two messages are
    # deleted by one request
    sink.sent(QUEUE, [(a_message("m1"), 100), (a_message("m2"), 7)])
    sink.sent(QUEUE, [(a_message("m3"), 12)])
    sink.received(QUEUE, [first, second])
    sink.received(QUEUE, [second])
    sink.expired(QUEUE, ["m3"])
    sink.empty_receive(QUEUE)
    sink.flush()  # empty receives are counted, then published together
    sink.deleted(QUEUE, ["m1", "m2"])

    # Then one event per outcome, naming its messages, with the queue's key and the clock's time
    assert [
        (key, e["type"], e["count"], event_format.message_ids_of(e)) for key, e in publisher.records
    ] == [
        ("000000000000/orders", "sent", 2, ["m1", "m2"]),
        ("000000000000/orders", "sent", 1, ["m3"]),
        ("000000000000/orders", "received", 2, ["m1", "m2"]),
        ("000000000000/orders", "received", 1, ["m2"]),
        ("000000000000/orders", "expired", 1, ["m3"]),
        ("000000000000/orders", "empty_receive", 1, []),
        ("000000000000/orders", "deleted", 2, ["m1", "m2"]),
    ]
    assert [event_format.sizes_of(e) for _, e in publisher.records[:2]] == [[100, 7], [12]]
    assert publisher.records[2][1]["receive_counts"] == [1, 3]
    assert publisher.records[3][1]["receive_count"] == 3
    assert {e["ts"] for _, e in publisher.records} == {T0 + 5 * SECOND_MS}


def test_sink_counts_empty_receives_per_queue_in_windows_of_a_second_within_a_minute() -> None:
    # Given a sink 59.5 s into a minute (T0 is 20 s into one)
    sink, publisher, clock = a_sink()
    clock.advance(39_500)
    start = clock.now_ms()
    # When a queue sees 3 empty receives within 0.4 s, another queue 1, then (the minute
    # turns) 2 more on the first queue, then 1 more 1.5 s after those
    for _ in range(3):
        sink.empty_receive(QUEUE)
        clock.advance(200)
    sink.empty_receive(DLQ)
    assert publisher.records == [] and sink.held_back == 2  # nothing sent yet
    clock.advance(100)  # 60.2 s: a new minute
    sink.empty_receive(QUEUE)
    sink.empty_receive(QUEUE)
    clock.advance(1_500)
    sink.empty_receive(QUEUE)
    sink.flush()
    # Then one event per queue and window: the time of its first, the number it stands for
    got = [(key, e["ts"] - start, e["count"]) for key, e in publisher.records]
    assert sorted(got) == sorted(
        [
            ("000000000000/orders", 0, 3),  # the first minute's
            ("000000000000/orders", 700, 2),  # the next minute's first second
            ("000000000000/orders", 2_200, 1),
            ("000000000000/orders-dlq", 600, 1),
        ]
    )
    assert sink.held_back == 0
    assert sum(e["count"] for _, e in publisher.records) == 7


def test_sink_keys_a_dead_letter_move_by_the_dlq() -> None:
    sink, publisher, clock = a_sink()
    clock.advance(DAY_MS)
    message = a_message("m1", sent_ms=T0, attributes={"k": AttributeValue("String", "v")})

    sink.moved_to_dlq(QUEUE, DLQ, Delivery(4, a_fact(receive_count=2), message))

    [(key, event)] = publisher.records
    assert key == "000000000000/orders-dlq"
    assert event == {
        "v": 1,
        "type": "moved_to_dlq",
        "ts": T0 + DAY_MS,
        "account": ACCOUNT,
        "queue": "orders-dlq",
        "region": "us-east-1",
        "count": 1,
        "message_id": "m1",
        "receive_count": 2,
        "age_ms": DAY_MS,
        "source_queue": "orders",
        "attributes": {"k": "v"},
    }


def test_sink_publishes_purge_count_and_gauges() -> None:
    sink, publisher, _ = a_sink()

    sink.purged(QUEUE, 12)
    sink.gauges(QUEUE, Counts(visible=5, in_flight=2, delayed=1), 30)

    purged, gauges = (event for _, event in publisher.records)
    assert (purged["type"], purged["count"]) == ("purged", 12)
    assert {k: gauges[k] for k in ("visible", "not_visible", "delayed", "oldest_age_s")} == {
        "visible": 5,
        "not_visible": 2,
        "delayed": 1,
        "oldest_age_s": 30,
    }


def test_sink_never_raises_and_counts_what_it_could_not_publish() -> None:
    # Given a publisher that raises
    sink, _, _ = a_sink(fail=True)
    # When outcomes are reported
    sink.sent(QUEUE, [(a_message("m1"), 5)])
    sink.deleted(QUEUE, ["m1"])
    # Then the caller saw nothing, and the failures are counted
    assert sink.errors == 2


# -- lease-store facts behind the events -------------------------------------------------------


@on_every_backend
def test_expire_ids_name_the_expired_messages(store: LeaseStore, clock: ManualClock) -> None:
    # Given two messages sent at T0 and one a day later
    store.ingest(PK, queue_records([0, 1]))
    store.ingest(PK, queue_records([2], sent_ms=T0 + DAY_MS))
    clock.advance(4 * DAY_MS)
    # When the first two pass a 4-day retention
    dropped = store.expire_ids(PK, clock.now_ms(), 4 * DAY_MS)
    # Then their ids come back
    assert sorted(dropped) == ["msg-0", "msg-1"]


@on_every_backend
def test_receive_reports_the_ids_of_expired_messages_it_dropped(
    store: LeaseStore, clock: ManualClock
) -> None:
    store.ingest(PK, queue_records([0]))
    store.ingest(PK, queue_records([1], sent_ms=T0 + DAY_MS))
    clock.advance(4 * DAY_MS)

    outcome = store.receive(PK, clock.now_ms(), 10, 30 * SECOND_MS, 4 * DAY_MS)

    assert (outcome.expired, outcome.expired_ids) == (1, ["msg-0"])
    assert [d.message.message_id for d in outcome.delivered] == ["msg-1"]


@on_every_backend
def test_oldest_sent_time_is_that_of_the_oldest_live_message(
    store: LeaseStore, clock: ManualClock
) -> None:
    # Given nothing, then a message at T0 + 1 s and (a DLQ copy) one sent at T0 - 1 day
    assert store.oldest_sent_ms(PK) is None
    store.ingest(PK, queue_records([0], sent_ms=T0 + SECOND_MS))
    store.ingest(PK, queue_records([1], sent_ms=T0 - DAY_MS))
    # Then the oldest is the older SentTimestamp, whatever its offset
    assert store.oldest_sent_ms(PK) == T0 - DAY_MS
    # And once that one is deleted, the next one
    store.remove(PK, 1, clock.now_ms())
    assert store.oldest_sent_ms(PK) == T0 + SECOND_MS


# -- the bounded publisher ---------------------------------------------------------------------


def test_publisher_with_no_reachable_kafka_takes_what_fits_and_counts_the_rest() -> None:
    # Given a publisher whose cluster does not answer and whose buffer holds 3 events
    publisher = EventPublisher(f"127.0.0.1:{free_port()}", buffer_messages=3)
    try:
        # (librdkafka counts its queued log lines and error callbacks in the buffer too: the
        # refused connection's are served by the poll thread within 50 ms)
        deadline = time.monotonic() + 5
        while publisher.buffered and time.monotonic() < deadline:
            time.sleep(0.01)
        # When 10 events are published
        accepted = [publisher.publish(b"k", b"{}") for _ in range(10)]
        # Then what fits waits in the buffer and the rest was dropped at once, without an
        # exception (up to 3 fit: a reconnect's log line arriving meanwhile takes a place,
        # as on a loaded test machine)
        fitted = accepted.count(True)
        assert 1 <= fitted <= 3
        assert accepted == [True] * fitted + [False] * (10 - fitted)
        assert publisher.dropped == {BUFFER_FULL: 10 - fitted, DELIVERY_FAILED: 0}
        assert publisher.buffered >= fitted  # librdkafka also counts its pending requests
        assert publisher.published == 0
    finally:
        publisher.close(timeout_s=0.1)
