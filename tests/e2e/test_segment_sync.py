"""The gateway's own fsync of the embedded broker's queue-topic segments
(topology/segment_sync.py): which files it syncs, what a failed sync does to a send, and that
a gateway on a jar broker of its machine acknowledges sends after syncing (as `kqs serve`
does on its embedded broker)."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported, not in __all__
    AdminClient,
    ConfigResource,
)

from tests.support.harness import GatewayProcess, NewQueue
from tests.support.prometheus_text import scrape
from topology.admin import SYNCED_BY_GATEWAY, TopicAdmin
from topology.producer import AsyncProducer, ProduceFailed
from topology.segment_sync import SegmentSync, segments_holding


def test_the_segments_holding_a_range_are_those_it_overlaps() -> None:
    bases = [0, 100, 200]
    assert segments_holding(bases, 150, 160) == [100]
    assert segments_holding(bases, 50, 120) == [0, 100]  # a roll within the batch
    assert segments_holding(bases, 250, 260) == [200]
    assert segments_holding(bases, 100, 100) == [100]
    assert segments_holding([5], 0, 3) == []  # below the log start: no segment has it


def _segments(partition_dir: Path, *bases: int) -> None:
    partition_dir.mkdir(parents=True, exist_ok=True)
    for base in bases:
        for suffix in (".log", ".index", ".timeindex"):
            (partition_dir / f"{base:020d}{suffix}").write_bytes(b"x")


def test_sync_fsyncs_the_segments_holding_the_records_and_a_new_segment_s_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a partition of two segments, and fsyncs recorded by path
    synced: list[str] = []
    for name in ("fdatasync", "fsync"):
        real = getattr(os, name)

        def record(fd: int, real: Any = real, name: str = name) -> None:
            synced.append(f"{name} {os.path.basename(os.readlink(f'/proc/self/fd/{fd}'))}")
            real(fd)

        monkeypatch.setattr(os, name, record)
    partition = tmp_path / "kqs.a.q.1-0"
    _segments(partition, 0, 100)
    sync = SegmentSync(tmp_path)

    # When records 50-120 are synced, then 130, then (after a roll) 210
    assert sync.sync({("kqs.a.q.1", 0): (50, 120)}) == {}
    first = list(synced)
    synced.clear()
    assert sync.sync({("kqs.a.q.1", 0): (130, 130)}) == {}
    second = list(synced)
    synced.clear()
    _segments(partition, 200)
    assert sync.sync({("kqs.a.q.1", 0): (210, 210)}) == {}

    # Then only the segments holding them, never an index; each directory entry once
    assert first == [
        f"fdatasync {0:020d}.log",
        f"fdatasync {100:020d}.log",
        f"fsync {tmp_path.name}",
        "fsync kqs.a.q.1-0",
    ]
    assert second == [f"fdatasync {100:020d}.log"]
    assert synced == [f"fdatasync {200:020d}.log", "fsync kqs.a.q.1-0"]
    assert sync.syncs == 3 + 1 + 2


def test_a_partition_without_the_records_segment_is_reported_failed(tmp_path: Path) -> None:
    _segments(tmp_path / "kqs.a.q.1-0", 100)
    failed = SegmentSync(tmp_path).sync({("kqs.a.q.1", 0): (5, 5), ("kqs.a.q.1", 1): (0, 0)})
    assert set(failed) == {("kqs.a.q.1", 0), ("kqs.a.q.1", 1)}
    assert "holds offset 5" in failed[("kqs.a.q.1", 0)]
    assert "No such file or directory" in failed[("kqs.a.q.1", 1)]


def test_a_send_whose_segment_cannot_be_synced_is_not_acknowledged(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    # Given a producer that syncs queue topics' segments in a directory without them
    topic = f"kqs.000000000000.unsynced-{uuid.uuid4().hex[:8]}.{uuid.uuid4().hex}"
    own_topic = f"__kqs_test_{uuid.uuid4().hex[:8]}"

    async def scenario() -> tuple[BaseException | None, int]:
        admin = TopicAdmin(kafka_bootstrap)
        await asyncio.gather(admin.create_topic(topic, 1, {}), admin.create_topic(own_topic, 1, {}))
        producer = AsyncProducer(kafka_bootstrap, segment_sync=SegmentSync(tmp_path))
        try:
            # When a record is produced, and the broker acknowledges it
            failure: BaseException | None = None
            try:
                await producer.send(topic, b"body", key=b"k")
            except ProduceFailed as exc:
                failure = exc
            # Then its send fails, not knowing the record to be on disk; other topics are
            # not the gateway's to sync
            await producer.send(own_topic, b"{}", key=b"k")
            return failure, producer.unsettled
        finally:
            producer.close()

    failure, unsettled = asyncio.run(scenario())
    assert isinstance(failure, ProduceFailed)
    assert "fsync of the queue topic's segment failed" in str(failure)
    assert unsettled == 0


def test_a_gateway_on_its_machine_s_broker_syncs_a_send_s_segment_before_answering(
    sqs: Any, new_queue: NewQueue, gateway: GatewayProcess
) -> None:
    # Given a queue of a gateway whose broker's log directory it syncs (as `kqs serve` does)
    url = new_queue("segment-sync")
    name = url.rsplit("/", 1)[1]
    before = scrape(gateway.endpoint).value("kqs_queue_segment_syncs_total")

    # When a batch of ten is sent
    sent = sqs.send_message_batch(
        QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"m{i}"} for i in range(10)]
    )

    # Then it was answered after the gateway synced the segment holding it, and the broker
    # does not flush the queue topic per append (but once a minute)
    assert len(sent["Successful"]) == 10
    assert scrape(gateway.endpoint).value("kqs_queue_segment_syncs_total") > before
    admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
    topic = next(t for t in admin.list_topics(timeout=10).topics if f".{name}." in t)
    resource = ConfigResource("topic", topic)
    config = admin.describe_configs([resource])[resource].result(timeout=10)
    assert {key: config[key].value for key in SYNCED_BY_GATEWAY} == SYNCED_BY_GATEWAY
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
    assert received.get("Messages")
