"""The stacks every gateway of a deployment sees, kept durable in `__kqs_stacks`.

Each change to a stack is written (acks=all) before the operation goes on or answers, then
held here; every gateway follows the topic (`topology/stack_log.py`), so a stack created,
changed or deleted through one gateway is seen by all, and a restarted gateway comes back with
the stacks it acknowledged. Of two records of one stack, the one at the higher offset is the
current one (the catalog's rule, `topology/catalog.py`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from gateway.cloudformation.records import Stack

log = logging.getLogger("kqs.cloudformation")


class StackWriter(Protocol):
    async def put(self, stack_id: str, value: bytes) -> int: ...


class MemoryStackWriter:
    """A writer that keeps nothing: for a gateway-less use of the engine (unit tests)."""

    def __init__(self) -> None:
        self._offset = -1

    async def put(self, stack_id: str, value: bytes) -> int:
        self._offset += 1
        return self._offset


class StackStore:
    def __init__(self, writer: StackWriter) -> None:
        self._writer = writer
        self._stacks: dict[str, Stack] = {}
        self._offsets: dict[str, int] = {}
        self._locks: dict[tuple[str, str, str], asyncio.Lock] = {}

    def apply(self, records: list[tuple[int, str, bytes]]) -> None:
        """Records read from the topic (at start, and as followed), in log order."""
        for offset, _stack_id, value in records:
            try:
                stack = Stack.decode(value)
            except (ValueError, KeyError, TypeError):
                log.warning("unreadable stack record skipped", extra={"offset": offset})
                continue
            self._set(offset, stack)

    def _set(self, offset: int, stack: Stack) -> None:
        if offset <= self._offsets.get(stack.stack_id, -1):
            return
        self._offsets[stack.stack_id] = offset
        self._stacks[stack.stack_id] = stack

    async def save(self, stack: Stack) -> None:
        """Write the stack's state now (durable before this returns)."""
        copy = stack.copy()
        offset = await self._writer.put(stack.stack_id, copy.encode())
        self._set(offset, copy)

    def lock(self, region: str, account_id: str, name: str) -> asyncio.Lock:
        """Serializes this gateway's operations on one stack name."""
        return self._locks.setdefault((region, account_id, name), asyncio.Lock())

    def by_id(self, stack_id: str) -> Stack | None:
        stack = self._stacks.get(stack_id)
        return stack.copy() if stack is not None else None

    def current(self, region: str, account_id: str, name: str) -> Stack | None:
        """The stack of that name that is not deleted, if any."""
        for stack in self._stacks.values():
            if (
                stack.name == name
                and stack.region == region
                and stack.account_id == account_id
                and not stack.deleted
            ):
                return stack.copy()
        return None

    def find(self, region: str, account_id: str, name_or_id: str) -> Stack | None:
        """A stack by its id (deleted ones too) or by the name of a live one."""
        if name_or_id.startswith("arn:"):
            stack = self._stacks.get(name_or_id)
            if stack is None or stack.region != region or stack.account_id != account_id:
                return None
            return stack.copy()
        return self.current(region, account_id, name_or_id)

    def all(self, region: str, account_id: str) -> list[Stack]:
        """Every stack of the account in the region, deleted ones too, newest first."""
        stacks = [
            s.copy()
            for s in self._stacks.values()
            if s.region == region and s.account_id == account_id
        ]
        return sorted(stacks, key=lambda s: s.created_ms, reverse=True)

    def everywhere(self) -> list[Stack]:
        """Every stack of every account and region."""
        return [s.copy() for s in self._stacks.values()]

    def exports(self, region: str, account_id: str) -> dict[str, tuple[str, str]]:
        """Export name -> (exporting stack id, value), over the live stacks."""
        out: dict[str, tuple[str, str]] = {}
        for stack in self._stacks.values():
            if stack.region != region or stack.account_id != account_id or stack.deleted:
                continue
            for output in stack.outputs:
                if output.get("ExportName"):
                    out[output["ExportName"]] = (stack.stack_id, output["OutputValue"])
        return out

    def importers(self, region: str, account_id: str, export_name: str) -> list[str]:
        """The names of the live stacks whose template imports `export_name`."""
        names = []
        for stack in self._stacks.values():
            if stack.region != region or stack.account_id != account_id or stack.deleted:
                continue
            if export_name in stack.imports:
                names.append(stack.name)
        return names
