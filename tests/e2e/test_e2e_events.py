"""Analytics events and `/metrics` end to end: a known workload through both protocols on a
real gateway and Kafka, then `__kqs_events` read back with a plain consumer and `/metrics`
scraped, both compared with exactly what the workload did. Also: a gateway whose events
cluster is unreachable still answers every request, and counts the dropped events."""

from __future__ import annotations

import json
import time
import urllib.request
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.support.events import WAIT_S, Event, events_published, name_of, read_events
from tests.support.harness import (
    ACCOUNT_ID,
    REGION,
    GatewayProcess,
    NewQueue,
    free_port,
    json_client,
    signed_headers,
)
from tests.support.prometheus_text import Exposition, scrape
from tests.support.workload import Workload, run_workload
from topology import event_format


def arn_of(url: str) -> str:
    return f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:{name_of(url)}"


def sqs_size(body: str, attributes: dict[str, dict[str, Any]] | None = None) -> int:
    """SentMessageSize as SQS defines it: body plus attribute names, types and values."""
    size = len(body.encode())
    for name, value in (attributes or {}).items():
        size += len(name.encode()) + len(value["DataType"].encode())
        raw = value.get("BinaryValue")
        size += len(raw) if raw is not None else len(value["StringValue"].encode())
    return size


def outcome_events(bootstrap: str, endpoint: str, queue_url: str) -> list[Event]:
    events_published(endpoint)
    return [e for e in read_events(bootstrap, queue_url) if e["type"] != "gauges"]


def sent_sizes(events: list[Event]) -> dict[str, int]:
    """Message id -> SentMessageSize, over the `sent` events (one per send request)."""
    return {
        message_id: size
        for e in events
        if e["type"] == "sent"
        for message_id, size in zip(
            event_format.message_ids_of(e), event_format.sizes_of(e), strict=True
        )
    }


def counts_by_type(events: list[Event]) -> Counter[str]:
    """What the events stand for, per type (an event counts `count` outcomes: empty
    receives of one queue within a second share one event)."""
    counts: Counter[str] = Counter()
    for event in events:
        counts[event["type"]] += event["count"]
    return counts


def requests_delta(before: Exposition, after: Exposition, protocol: str) -> Counter[str]:
    """Requests this test made, as "Action outcome" -> count."""
    delta: Counter[str] = Counter()
    for labels, value in after.series("kqs_requests_total").items():
        label = dict(labels)
        if label["protocol"] != protocol:
            continue
        moved = value - before.series("kqs_requests_total").get(labels, 0.0)
        if moved:
            delta[f"{label['action']} {label['outcome']}"] = int(moved)
    return delta


def duration_count(metrics: Exposition, action: str, long_poll: bool) -> float:
    return metrics.value(
        "kqs_request_duration_seconds_count",
        action=action,
        long_poll="true" if long_poll else "false",
    )


ATTRIBUTES: dict[str, dict[str, Any]] = {
    "kind": {"DataType": "String", "StringValue": "order"},
    "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01\x02\xff"},
    "n": {"DataType": "Number.int", "StringValue": "42"},
}


def test_a_known_workload_publishes_exactly_its_events_and_moves_the_metrics_by_as_much(
    sqs: Any, protocol: str, new_queue: NewQueue, gateway: GatewayProcess, kafka_bootstrap: str
) -> None:
    # Given a queue, and a source queue that dead-letters after one receive
    main = new_queue("ev-main")
    dlq = new_queue("ev-dlq")
    src = new_queue(
        "ev-src",
        RedrivePolicy=json.dumps({"deadLetterTargetArn": arn_of(dlq), "maxReceiveCount": 1}),
    )
    before = events_published(gateway.endpoint)

    # When 4 messages are sent (one alone, three in a batch with a fourth entry refused)
    one = sqs.send_message(QueueUrl=main, MessageBody="héllo wörld", MessageAttributes=ATTRIBUTES)
    batch = sqs.send_message_batch(
        QueueUrl=main,
        Entries=[
            {"Id": "a", "MessageBody": "a" * 100},
            {"Id": "b", "MessageBody": "b", "MessageAttributes": {"k": ATTRIBUTES["kind"]}},
            {"Id": "c", "MessageBody": "🎉"},
            {"Id": "refused", "MessageBody": "\x01"},
        ],
    )
    assert [f["Id"] for f in batch["Failed"]] == ["refused"]
    ids = {e["Id"]: e["MessageId"] for e in batch["Successful"]}
    sizes = {
        one["MessageId"]: sqs_size("héllo wörld", ATTRIBUTES),
        ids["a"]: 100,
        ids["b"]: sqs_size("b", {"k": ATTRIBUTES["kind"]}),
        ids["c"]: 4,
    }
    # ... all 4 are received (long polls, counting any that come back empty) ...
    received: dict[str, dict[str, Any]] = {}
    long_polls = empty_long_polls = 0
    while len(received) < 4:
        got = sqs.receive_message(
            QueueUrl=main, MaxNumberOfMessages=10, VisibilityTimeout=600, WaitTimeSeconds=1
        ).get("Messages", [])
        long_polls += 1
        empty_long_polls += not got
        received.update({m["MessageId"]: m for m in got})
    # ... 3 are deleted (2 by batch, 1 alone), and that one deleted again (already gone) ...
    to_delete = sorted(received)[:3]
    handles = [received[message_id]["ReceiptHandle"] for message_id in to_delete]
    deleted = sqs.delete_message_batch(
        QueueUrl=main,
        Entries=[
            {"Id": "d0", "ReceiptHandle": handles[0]},
            {"Id": "d1", "ReceiptHandle": handles[1]},
        ],
    )
    assert len(deleted["Successful"]) == 2
    sqs.delete_message(QueueUrl=main, ReceiptHandle=handles[2])
    sqs.delete_message(QueueUrl=main, ReceiptHandle=handles[2])
    # ... 2 receives find nothing (the 4th message is in flight) ...
    for _ in range(2):
        assert "Messages" not in sqs.receive_message(QueueUrl=main, WaitTimeSeconds=0)
    # ... the queue is purged (1 message: the one in flight) ...
    sqs.purge_queue(QueueUrl=main)
    # ... 2 messages are received once from the source, then dead-lettered by the next receive
    first = sqs.send_message(
        QueueUrl=src,
        MessageBody="to the dlq",
        MessageAttributes={"long": {"DataType": "String", "StringValue": "y" * 300}},
    )
    second = sqs.send_message(QueueUrl=src, MessageBody="me too")
    leased = sqs.receive_message(
        QueueUrl=src, MaxNumberOfMessages=10, VisibilityTimeout=0, WaitTimeSeconds=0
    )["Messages"]
    assert len(leased) == 2
    assert "Messages" not in sqs.receive_message(QueueUrl=src, WaitTimeSeconds=0)
    in_dlq = sqs.receive_message(
        QueueUrl=dlq, MaxNumberOfMessages=10, VisibilityTimeout=600, WaitTimeSeconds=0
    )["Messages"]
    moved_ids = {first["MessageId"], second["MessageId"]}
    assert {m["MessageId"] for m in in_dlq} == moved_ids
    # ... and one request fails
    with pytest.raises(ClientError):
        sqs.get_queue_url(QueueName=f"missing-{uuid.uuid4().hex}")

    # Then the main queue's events are exactly what happened to it
    events = outcome_events(kafka_bootstrap, gateway.endpoint, main)
    assert counts_by_type(events) == {
        "sent": 4,
        "received": 4,
        "deleted": 3,
        "empty_receive": empty_long_polls + 2,
        "purged": 1,
    }
    assert sent_sizes(events) == sizes
    received_events = [e for e in events if e["type"] == "received"]
    assert {i for e in received_events for i in event_format.message_ids_of(e)} == set(sizes)
    assert {
        count
        for e in received_events
        for count in e.get("receive_counts", [e.get("receive_count")])
    } == {1}
    deleted_ids = [
        i for e in events if e["type"] == "deleted" for i in event_format.message_ids_of(e)
    ]
    assert sorted(deleted_ids) == to_delete
    assert [e["count"] for e in events if e["type"] == "purged"] == [1]
    assert {(e["v"], e["account"], e["queue"]) for e in events} == {(1, ACCOUNT_ID, name_of(main))}
    # And the source queue's: 2 sent, 2 received, 1 empty receive (its moves are the DLQ's)
    src_events = outcome_events(kafka_bootstrap, gateway.endpoint, src)
    assert counts_by_type(src_events) == {"sent": 2, "received": 2, "empty_receive": 1}
    # And the DLQ's: the 2 moves, keyed by the DLQ, naming the source, then 2 receives
    dlq_events = outcome_events(kafka_bootstrap, gateway.endpoint, dlq)
    assert counts_by_type(dlq_events) == {"moved_to_dlq": 2, "received": 2}
    moves = {e["message_id"]: e for e in dlq_events if e["type"] == "moved_to_dlq"}
    assert set(moves) == moved_ids
    for move in moves.values():
        assert (move["queue"], move["source_queue"]) == (name_of(dlq), name_of(src))
        assert (move["count"], move["receive_count"]) == (1, 1)
        assert move["age_ms"] >= 0
    assert moves[first["MessageId"]]["attributes"] == {"long": "y" * 256}
    assert moves[second["MessageId"]]["attributes"] == {}

    # And /metrics counted exactly these requests, by action, protocol and outcome
    after = events_published(gateway.endpoint)
    receives = long_polls + 2 + 2 + 1
    assert requests_delta(before, after, protocol) == {
        "SendMessage ok": 3,
        "SendMessageBatch ok": 1,
        "ReceiveMessage ok": receives,
        "DeleteMessageBatch ok": 1,
        "DeleteMessage ok": 2,
        "PurgeQueue ok": 1,
        "GetQueueUrl AWS.SimpleQueueService.NonExistentQueue": 1,
    }
    assert (
        duration_count(after, "ReceiveMessage", True)
        - duration_count(before, "ReceiveMessage", True)
        == long_polls
    )
    assert (
        duration_count(after, "ReceiveMessage", False)
        - duration_count(before, "ReceiveMessage", False)
        == receives - long_polls
    )
    # And every event was published, none dropped
    all_events = len(events) + len(src_events) + len(dlq_events)
    published = after.value("kqs_events_published_total") - before.value(
        "kqs_events_published_total"
    )
    assert published >= all_events  # plus other queues' periodic gauges
    for reason in ("buffer_full", "delivery_failed"):
        assert after.value("kqs_events_dropped_total", reason=reason) == 0


def test_queue_gauges_in_metrics_and_events_equal_get_queue_attributes(
    sqs: Any, new_queue: NewQueue, gateway: GatewayProcess, kafka_bootstrap: str
) -> None:
    # Given a queue with 1 visible, 1 in-flight and 1 delayed message
    url = new_queue("ev-gauges")
    started_s = time.time()
    sqs.send_message(QueueUrl=url, MessageBody="visible")
    sqs.send_message(QueueUrl=url, MessageBody="in flight")
    sqs.send_message(QueueUrl=url, MessageBody="delayed", DelaySeconds=900)
    assert len(sqs.receive_message(QueueUrl=url, VisibilityTimeout=600)["Messages"]) == 1
    settled_ms = int(time.time() * 1000)

    # When the gauges are read from GetQueueAttributes, /metrics and __kqs_events
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    metrics = scrape(gateway.endpoint)
    deadline = time.monotonic() + WAIT_S
    while True:  # the next periodic snapshot (every KQS_GAUGE_INTERVAL_S, 10 s by default)
        gauges = [
            e
            for e in read_events(kafka_bootstrap, url)
            if e["type"] == "gauges" and e["ts"] >= settled_ms
        ]
        if gauges:
            break
        assert time.monotonic() < deadline, "no gauges event"
        time.sleep(1)

    # Then all three agree
    expected = {
        "visible": int(attributes["ApproximateNumberOfMessages"]),
        "not_visible": int(attributes["ApproximateNumberOfMessagesNotVisible"]),
        "delayed": int(attributes["ApproximateNumberOfMessagesDelayed"]),
    }
    assert expected == {"visible": 1, "not_visible": 1, "delayed": 1}
    queue = {"account": ACCOUNT_ID, "queue": name_of(url), "region": REGION}
    assert {
        state: int(metrics.value("kqs_queue_messages", **queue, state=state)) for state in expected
    } == expected
    assert {state: gauges[0][state] for state in expected} == expected
    assert gauges[0]["count"] == 1
    # And the oldest message's age is no older than the test
    elapsed_s = time.time() - started_s + 1
    assert 0 <= metrics.value("kqs_queue_oldest_message_age_seconds", **queue) <= elapsed_s
    assert 0 <= gauges[0]["oldest_age_s"] <= elapsed_s


def test_metrics_is_prometheus_text_and_sqs_still_answers_beside_it(
    sqs: Any, gateway: GatewayProcess
) -> None:
    # Given a queue named "metrics"
    url = sqs.create_queue(QueueName="metrics")["QueueUrl"]
    # When it is used, and SQS is called with Query GETs on / and on /metrics
    sqs.send_message(QueueUrl=url, MessageBody="not a scrape")
    [message] = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1, VisibilityTimeout=0)[
        "Messages"
    ]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    answers = []
    for path in ("/", "/metrics"):
        target = (
            f"{gateway.endpoint}{path}?Action=ListQueues&Version=2012-11-05&QueueNamePrefix=metrics"
        )
        signed = urllib.request.Request(target, headers=signed_headers(target, b"", {}, "GET"))
        with urllib.request.urlopen(signed, timeout=10) as response:
            answers.append(response.read().decode())
    # Then the queue behaved as a queue, both GETs were SQS answers, and /metrics parses
    assert message["Body"] == "not a scrape"
    for answer in answers:
        assert "<ListQueuesResponse" in answer and url.rsplit("/", 2)[-2] in answer
    metrics = scrape(gateway.endpoint)
    for family in (
        "kqs_requests_total",
        "kqs_request_duration_seconds",
        "kqs_queue_messages",
        "kqs_queue_oldest_message_age_seconds",
        "kqs_events_published_total",
        "kqs_events_dropped_total",
        "kqs_kafka_producer_queue_messages",
        "kqs_kafka_producer_broker_rtt_avg_seconds",
        "kqs_lease_changelog_records_total",
    ):
        assert family in metrics.types, family
    assert (
        metrics.value("kqs_queue_messages", account=ACCOUNT_ID, queue="metrics", state="visible")
        == 0
    )


def test_with_its_events_cluster_unreachable_a_gateway_answers_every_send_and_counts_drops(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    # Given a gateway whose events go to a port nobody listens on, through a 5-event buffer
    gateway = GatewayProcess(
        tmp_path / "gateway",
        kafka_bootstrap,
        env={
            "KQS_EVENTS_BOOTSTRAP": f"127.0.0.1:{free_port()}",
            "KQS_EVENTS_BUFFER_MESSAGES": "5",
            "KQS_GAUGE_INTERVAL_S": "3600",
        },
    )
    gateway.start()
    try:
        sqs = json_client(gateway.endpoint)
        url = sqs.create_queue(QueueName=f"ev-drops-{uuid.uuid4().hex[:12]}")["QueueUrl"]

        # When 20 messages are sent, received and deleted
        sent = [sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")["MessageId"] for i in range(20)]
        received: list[dict[str, Any]] = []
        while len(received) < 20:
            received += sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1
            ).get("Messages", [])
        for message in received:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])

        # Then every request succeeded, and the events that did not fit were counted as dropped
        assert sorted(m["MessageId"] for m in received) == sorted(sent)
        metrics = scrape(gateway.endpoint)
        assert (
            metrics.value("kqs_requests_total", action="SendMessage", protocol="json", outcome="ok")
            == 20
        )
        assert (
            metrics.value(
                "kqs_requests_total", action="DeleteMessage", protocol="json", outcome="ok"
            )
            == 20
        )
        assert metrics.value("kqs_events_published_total") == 0
        # 42 message events at least (20 sent, 2 or more received: a receive's messages share
        # one, 20 deleted); 5 fit in the buffer
        assert metrics.value("kqs_events_dropped_total", reason="buffer_full") >= 37
    finally:
        gateway.stop()


def test_the_shared_accuracy_workload_publishes_exactly_its_expected_events(
    sqs: Any, gateway: GatewayProcess, kafka_bootstrap: str
) -> None:
    # Given N=23 sends, M=17 receives, K=11 deletes, E=3 empty receives, D=4 dead-lettered
    workload = Workload(sends=23, receives=17, deletes=11, empty_receives=3, dead_lettered=4)
    # When it is driven through the gateway
    result = run_workload(sqs, workload)
    # Then each queue's events add up to exactly what it expects, message by message
    for queue, expected in result.expected.items():
        events = outcome_events(kafka_bootstrap, gateway.endpoint, f"/{ACCOUNT_ID}/{queue}")
        published: Counter[str] = Counter()
        for event in events:
            published[event["type"]] += event["count"]
        assert published == expected, queue
        if queue in result.sizes:
            assert sent_sizes(events) == result.sizes[queue]
    moves = outcome_events(kafka_bootstrap, gateway.endpoint, f"/{ACCOUNT_ID}/{result.dlq}")
    assert {e["message_id"] for e in moves} == result.moved_ids
    assert {e["source_queue"] for e in moves} == {result.source}
