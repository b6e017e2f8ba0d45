"""Who a request comes from, once its signature has been checked."""

from __future__ import annotations

from dataclasses import field

from gateway.iam.policy import Policy
from lease_store.value_class import value_class


@value_class
class Principal:
    """An authenticated caller, or the anonymous one of an unsigned request.

    `arn` is `arn:aws:iam::<account>:root` for an account's own credentials and
    `arn:aws:iam::<account>:user/<name>` for a user. `policies` are the identity policies of
    the user and of its groups (an account root needs none: it may do anything to its queues).
    """

    account_id: str
    arn: str
    access_key: str | None = None
    user_name: str | None = None
    is_admin: bool = False
    policies: tuple[Policy, ...] = field(default=())
    # None of `policies` has a condition: its decisions can be memoized (`iam.authorize`).
    unconditional: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "unconditional", all(p.unconditional for p in self.policies))

    @property
    def anonymous(self) -> bool:
        return self.access_key is None

    @property
    def is_root(self) -> bool:
        return not self.anonymous and self.user_name is None

    @classmethod
    def root(cls, account_id: str, access_key: str, is_admin: bool = False) -> Principal:
        return cls(account_id, root_arn(account_id), access_key, None, is_admin)


ANONYMOUS_ARN = "*"


def anonymous(account_id: str) -> Principal:
    """The caller of an unsigned request; `account_id` is only where bare queue names point."""
    return Principal(account_id, ANONYMOUS_ARN)


def root_arn(account_id: str) -> str:
    return f"arn:aws:iam::{account_id}:root"


def user_arn(account_id: str, name: str) -> str:
    return f"arn:aws:iam::{account_id}:user/{name}"
