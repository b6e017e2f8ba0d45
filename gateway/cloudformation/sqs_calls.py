"""The SQS requests a stack's resources are made with, run as the stack's caller's own.

Each goes through the SQS action module a client's request would (`gateway/actions/`), after
the same authorization (`authorize`, given by the HTTP edge), so a queue a stack creates gets
exactly CreateQueue's validation and the caller's permissions; an SQS error becomes the
resource's failure, with SQS's own message.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from gateway.actions import (
    create_queue,
    delete_queue,
    get_queue_attributes,
    set_queue_attributes,
    tag_queue,
    untag_queue,
)
from gateway.actions.action import Action, Result
from gateway.actions.context import RequestContext
from gateway.actions.params import Params
from gateway.cloudformation.errors import ResourceFailed
from gateway.common.errors import QueueDoesNotExist, SqsError

log = logging.getLogger("kqs.cloudformation")

# (SQS action name, its parameters in the JSON shape): raises the SQS error that refuses it.
Authorize = Callable[[str, dict[str, Any]], None]


class SqsCalls:
    def __init__(self, ctx: RequestContext, authorize: Authorize) -> None:
        self._ctx = ctx
        self._authorize = authorize

    @property
    def region(self) -> str:
        return self._ctx.region

    @property
    def account_id(self) -> str:
        return self._ctx.account_id

    def queue_url(self, name: str) -> str:
        return f"{self._ctx.base_url}/{self._ctx.account_id}/{name}"

    def queue_arn(self, name: str) -> str:
        return f"arn:aws:sqs:{self._ctx.region}:{self._ctx.account_id}:{name}"

    def queue_exists(self, name: str) -> bool:
        return self._ctx.runtime.registry.active(self.region, self.account_id, name) is not None

    async def _call(self, action: Action[Any], params: dict[str, Any]) -> Result:
        try:
            self._authorize(action.name, params)
            return await action(Params(params), self._ctx)
        except SqsError as error:
            raise ResourceFailed(
                f'Resource handler returned message: "{error.message_for(query=False)}" '
                f"(HandlerErrorCode: {_handler_code(error)})"
            ) from error
        except Exception as error:
            # Whatever else goes wrong (Kafka unavailable, a fault of KQS) fails the
            # resource, so the operation rolls back instead of leaving the stack in progress.
            log.exception("stack resource request failed", extra={"action": action.name})
            raise ResourceFailed(
                f"Internal failure ({type(error).__name__}); the request can be retried"
            ) from error

    async def create_queue(
        self, name: str, attributes: dict[str, str], tags: dict[str, str]
    ) -> str:
        params = {"QueueName": name, "Attributes": attributes, "tags": tags}
        result = await self._call(create_queue.ACTION, params)
        return str(result["QueueUrl"])

    async def set_attributes(self, queue_url: str, attributes: dict[str, str]) -> None:
        await self._call(
            set_queue_attributes.ACTION, {"QueueUrl": queue_url, "Attributes": attributes}
        )

    async def get_attributes(self, queue_url: str) -> dict[str, str]:
        result = await self._call(
            get_queue_attributes.ACTION, {"QueueUrl": queue_url, "AttributeNames": ["All"]}
        )
        return dict(result.get("Attributes", {}))

    async def tag(self, queue_url: str, tags: dict[str, str]) -> None:
        await self._call(tag_queue.ACTION, {"QueueUrl": queue_url, "Tags": tags})

    async def untag(self, queue_url: str, keys: list[str]) -> None:
        await self._call(untag_queue.ACTION, {"QueueUrl": queue_url, "TagKeys": keys})

    async def delete_queue(self, queue_url: str) -> None:
        """Delete the queue; one already gone counts as deleted (as CloudFormation does)."""
        try:
            await self._call(delete_queue.ACTION, {"QueueUrl": queue_url})
        except ResourceFailed as failed:
            if not isinstance(failed.__cause__, QueueDoesNotExist):
                raise

    async def clear_policy(self, queue_url: str) -> None:
        """Remove the queue's Policy; a queue already gone has none."""
        try:
            await self.set_attributes(queue_url, {"Policy": ""})
        except ResourceFailed as failed:
            if not isinstance(failed.__cause__, QueueDoesNotExist):
                raise


def _handler_code(error: SqsError) -> str:
    # The handler error codes of the CloudFormation resource provider contract.
    if error.http_status == 403:
        return "AccessDenied"
    if isinstance(error, QueueDoesNotExist):
        return "NotFound"
    return "InvalidRequest" if error.sender_fault else "ServiceInternalError"
