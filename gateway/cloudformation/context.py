"""What every CloudFormation action receives: the stacks, the caller's SQS, who and where."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gateway.cloudformation.sqs_calls import SqsCalls
from gateway.cloudformation.store import StackStore


@dataclass(frozen=True)
class CallerIdentity:
    account_id: str
    arn: str
    user_id: str


@dataclass(frozen=True)
class CfnContext:
    store: StackStore
    sqs: SqsCalls
    region: str
    caller: CallerIdentity
    now_ms: Callable[[], int]
    request_id: str

    @property
    def account_id(self) -> str:
        return self.caller.account_id
