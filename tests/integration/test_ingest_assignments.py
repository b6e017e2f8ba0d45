"""The ingest consumer's assignments in group mode when the group's decisions race the event
loop's requests: a real librdkafka consumer on the test broker, driven from the test instead
of its own thread, so the race is played in a known order."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from confluent_kafka import TopicPartition

from topology.ingest import IngestConsumer

TOPIC = "kqs.000000000000.raced.0123456789abcdef0123456789abcdef"


class Listener:
    def __init__(self) -> None:
        self.told: list[tuple[str, list[tuple[str, int]]]] = []

    def assigned(self, partitions: list[tuple[str, int]]) -> None:
        self.told.append(("assigned", partitions))

    def revoked(self, partitions: list[tuple[str, int]]) -> None:
        self.told.append(("revoked", partitions))

    def lost(self, partitions: list[tuple[str, int]]) -> None:
        self.told.append(("lost", partitions))


@pytest.fixture
def ingest(kafka_bootstrap: str) -> Iterator[IngestConsumer]:
    loop = asyncio.new_event_loop()
    made = IngestConsumer(kafka_bootstrap, loop, lambda *_: None, group_listener=Listener())
    yield made
    made._consumer.close()
    loop.close()


def assigned(ingest: IngestConsumer) -> set[tuple[str, int]]:
    return {(tp.topic, tp.partition) for tp in ingest._consumer.assignment()}


def given(*partitions: int) -> list[TopicPartition]:
    return [TopicPartition(TOPIC, p) for p in partitions]


def test_a_partition_revoked_before_its_requested_assignment_applies_is_not_assigned(
    ingest: IngestConsumer,
) -> None:
    # Given two partitions given by the group, and the loop asking to ingest both
    ingest._on_assign(ingest._consumer, given(0, 1))
    ingest.assign(TOPIC, {0: 5, 1: 7})

    # When the group revokes one (inside a poll) before the thread applies the request
    ingest._on_revoke(ingest._consumer, given(1))
    ingest._apply_commands()

    # Then only the one still given is assigned
    assert assigned(ingest) == {(TOPIC, 0)}


def test_a_partition_given_again_while_still_assigned_moves_instead_of_failing(
    ingest: IngestConsumer,
) -> None:
    # Given a partition assigned, then revoked and given again before the revocation
    # reached the consumer's assignment (its unassign found nothing assigned yet)
    ingest._on_assign(ingest._consumer, given(0))
    ingest.assign(TOPIC, {0: 5})
    ingest._apply_commands()
    ingest._given.clear()
    ingest._on_assign(ingest._consumer, given(0))

    # When the loop asks for it again, twice in one round
    ingest.assign(TOPIC, {0: 3})
    ingest.assign(TOPIC, {0: 4})
    ingest._apply_commands()  # librdkafka would refuse to assign it twice ("_CONFLICT")

    # Then it stays assigned once, and the thread lives on
    assert assigned(ingest) == {(TOPIC, 0)}
