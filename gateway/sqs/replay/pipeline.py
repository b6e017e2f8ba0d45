"""A replay task's sends, several batches on their way at once.

A batch's `send_many` waits for every record's `acks=all` acknowledgement and its application
to the destination's lease store; one batch at a time, the task ran at one batch per such round
trip (bench/results/replay.md). The pipeline keeps up to `depth` batches on their way and
settles them oldest first: each acknowledged batch moves the task's positions past its records
and counts what it sent, so the positions only ever cover a run of acknowledged batches, which
is what a checkpoint may record.

A checkpoint's destination marks must bound every record sent before its positions and none
after them. With batches on their way, the marks are read before the next batch is sent
(`mark`), and the checkpoint is written once every batch sent before them is settled
(`due_checkpoint`): then every record of the batches past the positions was produced after the
marks were read, so it lies above them, where a next runner looks for it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from topology.log_reader import LoggedMessage

# Batches on their way at most, into a standard queue (a FIFO destination: one, so that each
# group's messages reach it in log order across batches).
DEPTH = 4

OnSettled = Callable[[list[LoggedMessage], int], None]


@dataclass
class _OnItsWay:
    sending: asyncio.Future[None]
    records: list[LoggedMessage]  # the batch as read, skipped records included
    sent: int  # how many of them it sends


class SendPipeline:
    def __init__(self, depth: int, on_settled: OnSettled) -> None:
        self._depth = depth
        self._on_settled = on_settled  # (records, sent) of each acknowledged batch, in order
        self._on_its_way: deque[_OnItsWay] = deque()
        self._added = 0
        self._settled = 0
        self._marks: tuple[int, dict[int, int]] | None = None  # (batches added then, marks)

    def __len__(self) -> int:
        return len(self._on_its_way)

    async def add(self, sending: Awaitable[None], records: list[LoggedMessage], sent: int) -> None:
        """Put a batch on its way (`sending`, already started); returns once there is room for
        the next one (raises as `settle` does)."""
        self._on_its_way.append(_OnItsWay(asyncio.ensure_future(sending), records, sent))
        self._added += 1
        self.settle_done()
        await self.settle(self._depth - 1)

    def settle_done(self) -> None:
        """Settle the oldest batches already acknowledged, without waiting (so that the
        positions, the count and the checkpoints keep up while batches are on their way)."""
        while self._on_its_way and self._on_its_way[0].sending.done():
            oldest = self._on_its_way.popleft()
            if (failed := oldest.sending.exception()) is not None:
                self._on_its_way.appendleft(oldest)  # unsettled, as `settle` leaves it
                raise failed
            self._settled += 1
            self._on_settled(oldest.records, oldest.sent)

    async def settle(self, keep: int = 0) -> None:
        """Wait for the oldest batches until at most `keep` are on their way. A failed one
        raises its error; it and the batches after it stay unsettled (`abandon`)."""
        while len(self._on_its_way) > keep:
            oldest = self._on_its_way[0]
            await oldest.sending
            self._on_its_way.popleft()
            self._settled += 1
            self._on_settled(oldest.records, oldest.sent)

    async def abandon(self) -> None:
        """Wait for every batch on its way, settling the run of acknowledged ones up to the
        first that failed (the positions stop there) and ignoring the rest."""
        failed = False
        while self._on_its_way:
            oldest = self._on_its_way.popleft()
            try:
                await oldest.sending
            except Exception:  # noqa: BLE001 - the task ends or stops anyway
                failed = True
            if not failed:
                self._settled += 1
                self._on_settled(oldest.records, oldest.sent)

    def wants_marks(self) -> bool:
        """Whether new marks would be taken (none is waiting for its checkpoint)."""
        return self._marks is None

    def mark(self, marks: dict[int, int]) -> None:
        """The destination's end offsets, read before the next batch is added (kept until
        their checkpoint is due: later marks would wait for later batches, and so on)."""
        if self._marks is None:
            self._marks = (self._added, marks)

    def due_checkpoint(self) -> dict[int, int] | None:
        """The marks to checkpoint with, once every batch added before they were read is
        settled (then taken: one checkpoint per `mark`)."""
        self.settle_done()
        if self._marks is None or self._settled < self._marks[0]:
            return None
        marks = self._marks[1]
        self._marks = None
        return marks
