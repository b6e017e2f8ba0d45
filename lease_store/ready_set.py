"""The visible offsets of one queue partition, in order: cheap for what a queue does most.

Nearly every change to a partition's ready set is one of two: a message ingested is added
above every offset there (Kafka offsets only grow), and a receive takes the lowest. A
`SortedList` did both in ~1 µs of Python each (bisects, sublist upkeep, three or four
calls); here they are an append to a list and a step of its head index.

The offsets live in two places:

* the **run**: a sorted list read from `_head` on. Offsets above its last are appended.
  Removing its first advances `_head`; the entries before the head stay until they are more
  than half the list (and over `_CUT_AFTER`), when the list is cut. Removing one further
  in marks it in `_gone` (few: a message deleted or leased while visible, out of order),
  and adding a marked offset back unmarks it, as it is already in its place.
* the **others**: a `SortedList` of what was added below the run's last offset and is not
  marked in it (a lease that ended, a message whose hold was lifted): rarer, and any order.

Reading merges the two. Nothing here is durable: `PartitionVisibility` builds it from the
lease facts.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from itertools import islice

from sortedcontainers import SortedList

# The run is cut (its removed head dropped) once the head passes this many entries and half
# its length: a cut copies the rest, so it happens at most once per that many removals.
_CUT_AFTER = 4096


class ReadySet:
    __slots__ = ("_gone", "_head", "_others", "_run")

    def __init__(self, offsets: Iterable[int] = ()) -> None:
        self._run: list[int] = sorted(offsets)
        self._head = 0
        # Marked removed, still in the run after `_head` (never its first: that one goes).
        self._gone: set[int] = set()
        self._others: SortedList[int] = SortedList()

    def __len__(self) -> int:
        return len(self._run) - self._head - len(self._gone) + len(self._others)

    def __contains__(self, offset: int) -> bool:
        return self._in_run(offset) or offset in self._others

    def __iter__(self) -> Iterator[int]:
        """The offsets, lowest first; the set must not change while this is read."""
        # By index: an `islice` from the head would step over the removed entries before it.
        run: Iterable[int] = map(self._run.__getitem__, range(self._head, len(self._run)))
        if self._gone:
            gone = self._gone
            run = (offset for offset in run if offset not in gone)
        return heapq.merge(run, self._others) if self._others else iter(run)

    def first(self, limit: int) -> list[int]:
        """The `limit` lowest offsets."""
        if limit <= 0:
            return []
        if not self._gone and not self._others:
            return self._run[self._head : self._head + limit]  # nearly always
        return list(islice(self, limit))

    def add(self, offset: int) -> None:
        """Add an offset that is not here."""
        run = self._run
        if len(run) == self._head or offset > run[-1]:
            run.append(offset)  # a message ingested: above everything
        elif offset in self._gone:
            self._gone.remove(offset)  # back in its old place in the run
        else:
            self._others.add(offset)

    def discard(self, offset: int) -> None:
        """Remove the offset if it is here."""
        run, head = self._run, self._head
        if head < len(run) and run[head] == offset:
            self._advance()  # the lowest, taken by a receive: the common case
        elif self._in_run(offset):
            self._gone.add(offset)
            if len(self._gone) > _CUT_AFTER and 2 * len(self._gone) > len(run) - head:
                self._compact()
        else:
            self._others.discard(offset)

    def _advance(self) -> None:
        """Step the head past the run's first offset and any removed ones after it."""
        run, gone = self._run, self._gone
        head = self._head + 1
        while gone and head < len(run) and run[head] in gone:
            gone.remove(run[head])
            head += 1
        if head > _CUT_AFTER and 2 * head > len(run):
            del run[:head]
            head = 0
        self._head = head

    def _compact(self) -> None:
        """Drop the removed offsets from the run, when they are many."""
        gone = self._gone
        self._run = [offset for offset in self._run[self._head :] if offset not in gone]
        self._head = 0
        gone.clear()

    def _in_run(self, offset: int) -> bool:
        """Whether the offset is in the run and not marked removed."""
        if offset in self._gone:
            return False
        run = self._run
        at = bisect_left(run, offset, self._head)
        return at < len(run) and run[at] == offset
