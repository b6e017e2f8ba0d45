"""The shape every SQS action module exports: a decoder and a handler for one typed request."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from gateway.actions.context import RequestContext
from gateway.actions.params import Params

Request = TypeVar("Request")
Result = dict[str, Any]


@dataclass(frozen=True)
class Action(Generic[Request]):
    name: str
    decode: Callable[[Params], Request]
    handle: Callable[[Request, RequestContext], Awaitable[Result]]

    async def __call__(self, params: Params, ctx: RequestContext) -> Result:
        return await self.handle(self.decode(params), ctx)
