"""The gateway's own fsync of the embedded broker's queue-topic segments.

A queue topic's record is a message's durable record: it must be on disk before SendMessage
answers. The broker can do that itself (`flush.messages=1`), but its flush runs inside the
partition's log lock and syncs three files per append — the segment, its offset index and
its time index (`LogSegment.flush`): measured on this machine's disk, ~1.4 ms for the segment
and ~1.1 ms for each index, so every produce request of a queue spent ~4 ms in the broker and
the next one waited for it (bench/results/archive/profile-journal.md, 2026-11-28 (7949891)). Only the segment holds the
record; Kafka rebuilds the indexes of everything after its recovery point when it starts
after an unclean shutdown.

So when the gateway runs the embedded broker (same machine, same file system) it syncs the
segment itself: the producer's poll thread, holding a batch of delivery reports, fdatasyncs
each touched partition's segment files once (`os.fdatasync` releases the GIL), before the
reports reach the event loop. Acknowledged by the broker (`acks=all`) means appended to the
segment, so the sync that follows covers the record. A partition's directory is synced too
the first time one of its segments is, so a new segment's name survives a power loss.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

# A partition's records of one batch of delivery reports: the lowest and highest offset.
OffsetRange = tuple[int, int]
TopicPartition = tuple[str, int]

_SEGMENT_SUFFIX = ".log"


class SegmentSync:
    """fdatasyncs the segment files of a broker's log directory that hold given offsets."""

    def __init__(self, log_dir: Path) -> None:
        self._log_dir = log_dir
        # Per partition, the newest segment whose directory entry is synced. The poll threads of
        # a topic's producers (prompt, bulk, fill) may sync one partition at once: at worst a
        # directory is synced twice.
        self._dir_synced: dict[TopicPartition, int] = {}
        # Syncs done, for `/metrics`: segment files, and a partition's directory when a new
        # segment's entry is synced (the log directory's one-off sync is not counted); poll
        # threads add to it.
        self.syncs = 0

    def sync(self, ranges: Mapping[TopicPartition, OffsetRange]) -> dict[TopicPartition, str]:
        """Sync the segments holding each partition's offset range; returns the partitions
        whose records are not known to be on disk, with the reason (their sends must fail)."""
        failed: dict[TopicPartition, str] = {}
        for partition, (lowest, highest) in ranges.items():
            try:
                self._sync_partition(partition, lowest, highest)
            except OSError as exc:
                failed[partition] = f"fsync of the queue topic's segment failed: {exc}"
        return failed

    def _sync_partition(self, partition: TopicPartition, lowest: int, highest: int) -> None:
        directory = self._log_dir / f"{partition[0]}-{partition[1]}"
        # Listed each time (a few files): the broker rolls and deletes segments on its own.
        bases = sorted(
            int(name[: -len(_SEGMENT_SUFFIX)])
            for name in os.listdir(directory)
            if name.endswith(_SEGMENT_SUFFIX) and name[: -len(_SEGMENT_SUFFIX)].isdigit()
        )
        holding = segments_holding(bases, lowest, highest)
        if not holding:
            raise FileNotFoundError(f"no segment of {directory} holds offset {lowest}")
        for base in holding:
            _fsync(directory / f"{base:020d}{_SEGMENT_SUFFIX}")
            self.syncs += 1
        newest = holding[-1]
        if self._dir_synced.get(partition, -1) < newest:
            if partition not in self._dir_synced:
                _fsync(self._log_dir, data_only=False)  # the partition directory's own entry
            _fsync(directory, data_only=False)
            self.syncs += 1
            self._dir_synced[partition] = newest


def segments_holding(bases: list[int], lowest: int, highest: int) -> list[int]:
    """The base offsets (of the sorted `bases`) of the segments holding any offset from
    `lowest` to `highest`: a segment runs from its base to the next segment's."""
    holding = []
    for index, base in enumerate(bases):
        following = bases[index + 1] if index + 1 < len(bases) else None
        if base <= highest and (following is None or following > lowest):
            holding.append(base)
    return holding


def _fsync(path: Path, data_only: bool = True) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        (os.fdatasync if data_only else os.fsync)(descriptor)
    finally:
        os.close(descriptor)
