"""`IngestShards`: each topic always read by the same consumer, consumers made on first use,
the bounds shared (no Kafka: the consumers are recorders)."""

from __future__ import annotations

import threading
from typing import Any, cast

from topology.ingest import (
    DEFAULT_PREFETCH_KBYTES,
    MAX_BATCHES_IN_FLIGHT,
    IngestConsumer,
    IngestShards,
)


class Recorder:
    def __init__(self, in_flight: threading.BoundedSemaphore, prefetch_kbytes: int) -> None:
        self.in_flight = in_flight
        self.prefetch_kbytes = prefetch_kbytes
        self.started = self.stopped = False
        self.calls: list[tuple[Any, ...]] = []

    def start(self) -> None:
        self.started = True

    def stop(self) -> None:
        self.stopped = True

    def assign(self, topic: str, next_offsets: dict[int, int]) -> None:
        self.calls.append(("assign", topic, next_offsets))

    def unassign(self, topic: str, partitions: int) -> None:
        self.calls.append(("unassign", topic, partitions))

    def commit(self, offsets: list[tuple[str, int, int]]) -> None:
        self.calls.append(("commit", tuple(offsets)))


def shards_of(count: int) -> tuple[IngestShards, list[Recorder]]:
    made: list[Recorder] = []

    def make(in_flight: threading.BoundedSemaphore, prefetch_kbytes: int) -> IngestConsumer:
        made.append(Recorder(in_flight, prefetch_kbytes))
        return cast(IngestConsumer, made[-1])

    return IngestShards(make, count), made


def owner(made: list[Recorder], topic: str) -> Recorder:
    (found,) = [r for r in made if any(c[1] == topic for c in r.calls if c[0] == "assign")]
    return found


def test_each_topic_is_read_by_one_consumer_made_on_first_use_and_started_with_the_rest() -> None:
    shards, made = shards_of(4)
    assert shards.consumers == 0
    shards.assign("kqs.q0", {0: 0})
    assert len(made) == 1 and not made[0].started  # not started before the gateway starts
    shards.start()
    assert made[0].started
    topics = [f"kqs.q{i}" for i in range(40)]
    for topic in topics:
        shards.assign(topic, {0: 5})
    assert shards.consumers == len(made) == 4  # 40 topics reach every shard
    assert all(r.started for r in made)  # those made after start are started at once
    for topic in topics:
        shards.unassign(topic, 1)
        assert ("unassign", topic, 1) in owner(made, topic).calls


def test_commits_go_to_the_consumer_of_each_topic_in_one_call_per_consumer() -> None:
    shards, made = shards_of(3)
    topics = [f"kqs.q{i}" for i in range(12)]
    for topic in topics:
        shards.assign(topic, {0: 0})
    shards.commit([(t, 0, 7) for t in topics])
    for recorder in made:
        commits = [c for c in recorder.calls if c[0] == "commit"]
        assert len(commits) == 1
        assert {t for t, _, _ in commits[0][1]} == {
            c[1] for c in recorder.calls if c[0] == "assign"
        }


def test_the_bounds_are_shared_and_stop_reaches_every_consumer() -> None:
    shards, made = shards_of(8)
    for i in range(64):
        shards.assign(f"kqs.q{i}", {0: 0})
    assert len({id(r.in_flight) for r in made}) == 1  # one bound on batches for the loop
    semaphore = made[0].in_flight
    for _ in range(MAX_BATCHES_IN_FLIGHT):
        assert semaphore.acquire(blocking=False)
    assert not semaphore.acquire(blocking=False)
    assert sum(r.prefetch_kbytes for r in made) <= DEFAULT_PREFETCH_KBYTES
    shards.stop()
    assert all(r.stopped for r in made)
