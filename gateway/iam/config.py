"""Accounts, users, groups and their credentials and identity policies, from a TOML file.

```toml
[[accounts]]
id = "111111111111"                 # 12 digits
access_key_id = "alice-root"        # optional: the account's own (root) credentials,
secret_access_key = "..."           # which may do anything to the account's queues
admin = false                       # optional: root of this account is an administrator

[[accounts.groups]]
name = "developers"
policies = ['''{"Version": "2012-10-17", "Statement": [
  {"Effect": "Allow", "Action": "sqs:*", "Resource": "arn:aws:sqs:*:111111111111:*"}]}''']

[[accounts.users]]
name = "bob"
access_key_id = "bob"
secret_access_key = "bob-secret"
groups = ["developers"]
policies = []                       # JSON strings or TOML tables, as the groups' policies
admin = false                       # an administrator lists, deletes and purges every queue
```

Without a file the embedded default applies: one account (`KQS_ACCOUNT_ID`, by default
000000000000) with the user `test` (secret `test`, allowed `sqs:*`) and the administrator
`admin` (secret `admin`, allowed `sqs:*`).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gateway.iam.policy import Policy, PolicyError
from gateway.iam.principal import Principal, root_arn, user_arn

_ACCOUNT_ID = re.compile(r"^\d{12}$")
_NAME = re.compile(r"^[\w+=,.@-]{1,64}$")
FULL_ACCESS = Policy.parse(
    {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "sqs:*", "Resource": "*"}],
    }
)


class ConfigError(ValueError):
    """An IAM configuration file that cannot be used; the message says where and why."""


@dataclass(frozen=True)
class Group:
    name: str
    policies: tuple[Policy, ...] = ()


@dataclass(frozen=True)
class User:
    name: str
    access_key_id: str
    secret_access_key: str
    groups: tuple[str, ...] = ()
    policies: tuple[Policy, ...] = ()
    admin: bool = False


@dataclass(frozen=True)
class Account:
    id: str
    access_key_id: str | None = None
    secret_access_key: str | None = None
    admin: bool = False
    users: tuple[User, ...] = ()
    groups: tuple[Group, ...] = ()


@dataclass(frozen=True)
class Credential:
    secret: str
    principal: Principal


@dataclass
class Directory:
    """Access key id -> secret and principal, for every account of the configuration."""

    accounts: tuple[Account, ...]
    default_account_id: str
    accept_any_access_key: bool = False
    embedded_default: bool = False
    _by_key: dict[str, Credential] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        for account in self.accounts:
            if account.access_key_id and account.secret_access_key:
                self._add(
                    account.access_key_id,
                    Credential(
                        account.secret_access_key,
                        Principal.root(account.id, account.access_key_id, account.admin),
                    ),
                )
            groups = {g.name: g for g in account.groups}
            for user in account.users:
                policies = list(user.policies)
                for name in user.groups:
                    policies.extend(groups[name].policies)
                principal = Principal(
                    account.id,
                    user_arn(account.id, user.name),
                    user.access_key_id,
                    user.name,
                    user.admin,
                    tuple(policies),
                )
                self._add(user.access_key_id, Credential(user.secret_access_key, principal))

    def _add(self, access_key: str, credential: Credential) -> None:
        if access_key in self._by_key:
            raise ConfigError(f"access key id {access_key!r} is used twice")
        self._by_key[access_key] = credential

    def credential(self, access_key: str) -> Credential | None:
        return self._by_key.get(access_key)

    def secret_of(self, access_key: str) -> str | None:
        credential = self._by_key.get(access_key)
        return credential.secret if credential else None

    def any_key_principal(self, access_key: str) -> Principal:
        """With `accept_any_access_key`: an unknown key acts as the default account's root."""
        return Principal(self.default_account_id, root_arn(self.default_account_id), access_key)

    def account_ids(self) -> list[str]:
        return [a.id for a in self.accounts]


def embedded_default(account_id: str) -> tuple[Account, ...]:
    return (
        Account(
            id=account_id,
            users=(
                User("test", "test", "test", policies=(FULL_ACCESS,)),
                User("admin", "admin", "admin", policies=(FULL_ACCESS,), admin=True),
            ),
        ),
    )


def load_directory(
    path: str | Path | None, default_account_id: str, accept_any_access_key: bool = False
) -> Directory:
    """The configured accounts, or the embedded default when `path` is empty."""
    if not path:
        return Directory(
            embedded_default(default_account_id),
            default_account_id,
            accept_any_access_key,
            embedded_default=True,
        )
    try:
        raw = tomllib.loads(Path(path).read_text())
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: not valid TOML: {error}") from None
    accounts = parse_accounts(raw, str(path))
    default = str(raw.get("default_account", accounts[0].id))
    if default not in {a.id for a in accounts}:
        raise ConfigError(f"{path}: default_account {default} is not one of the accounts")
    return Directory(accounts, default, accept_any_access_key)


def parse_accounts(raw: Mapping[str, Any], where: str = "config") -> tuple[Account, ...]:
    items = raw.get("accounts")
    if not isinstance(items, list) or not items:
        raise ConfigError(f"{where}: needs at least one [[accounts]] table")
    accounts = tuple(_account(item, f"{where}: accounts[{i}]") for i, item in enumerate(items))
    ids = [a.id for a in accounts]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{where}: an account id appears twice")
    return accounts


def _account(raw: Any, where: str) -> Account:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: must be a table")
    account_id = str(raw.get("id", ""))
    if not _ACCOUNT_ID.match(account_id):
        raise ConfigError(f"{where}: id must be 12 digits, got {account_id!r}")
    groups = tuple(
        Group(_name(g, f"{where}.groups[{i}]"), _policies(g, f"{where}.groups[{i}]"))
        for i, g in enumerate(_tables(raw.get("groups", []), f"{where}.groups"))
    )
    group_names = {g.name for g in groups}
    users = tuple(
        _user(u, f"{where}.users[{i}]", group_names)
        for i, u in enumerate(_tables(raw.get("users", []), f"{where}.users"))
    )
    key, secret = raw.get("access_key_id"), raw.get("secret_access_key")
    if (key is None) != (secret is None):
        raise ConfigError(f"{where}: access_key_id and secret_access_key go together")
    return Account(
        id=account_id,
        access_key_id=str(key) if key is not None else None,
        secret_access_key=str(secret) if secret is not None else None,
        admin=bool(raw.get("admin", False)),
        users=users,
        groups=groups,
    )


def _user(raw: Mapping[str, Any], where: str, group_names: set[str]) -> User:
    key, secret = raw.get("access_key_id"), raw.get("secret_access_key")
    if not isinstance(key, str) or not key or not isinstance(secret, str) or not secret:
        raise ConfigError(f"{where}: access_key_id and secret_access_key are required strings")
    groups = raw.get("groups", [])
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        raise ConfigError(f"{where}: groups must be a list of group names")
    unknown = [g for g in groups if g not in group_names]
    if unknown:
        raise ConfigError(f"{where}: unknown group(s) {', '.join(unknown)}")
    return User(
        name=_name(raw, where),
        access_key_id=key,
        secret_access_key=secret,
        groups=tuple(groups),
        policies=_policies(raw, where),
        admin=bool(raw.get("admin", False)),
    )


def _tables(value: Any, where: str) -> Iterable[Mapping[str, Any]]:
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ConfigError(f"{where}: must be an array of tables")
    return value


def _name(raw: Mapping[str, Any], where: str) -> str:
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(f"{where}: name must be 1-64 characters of [A-Za-z0-9_+=,.@-]")
    return name


def _policies(raw: Mapping[str, Any], where: str) -> tuple[Policy, ...]:
    items = raw.get("policies", [])
    if not isinstance(items, list):
        raise ConfigError(f"{where}: policies must be a list of policy documents")
    out = []
    for i, item in enumerate(items):
        try:
            out.append(Policy.parse(item))
        except PolicyError as error:
            raise ConfigError(f"{where}.policies[{i}]: {error}") from None
    return tuple(out)
