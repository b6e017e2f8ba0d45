"""Who is calling, and whether they may: the gateway's side of `gateway.iam`.

`authenticate` checks the SigV4 signature of a request (Authorization header or presigned
query) against the configured credentials and answers the caller's principal and the
region of its credential scope; an unsigned request is the anonymous principal.
`authorize` finds what the action acts on (the queue a QueueUrl or QueueName names in the
request's region, or a SourceArn names in its own, with its Policy attribute) and applies the evaluation order of `iam.authorize`,
raising AccessDenied (or MissingAuthenticationToken for an anonymous caller) when the
decision is not an allow.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from datetime import datetime
from functools import lru_cache
from typing import Any

from aiohttp import web

from gateway.common.errors import AccessDenied, MissingAuthenticationToken, SignatureDoesNotMatch
from gateway.iam import sigv4
from gateway.iam.authorize import Target, decide
from gateway.iam.config import Directory
from gateway.iam.policy import Decision, Policy, PolicyError
from gateway.iam.principal import Principal, anonymous
from gateway.sqs.move_tasks import decode_handle
from gateway.sqs.queues import QueueRegistry, parse_arn, url_path_parts
from lease_store.value_class import value_class
from topology.names import REGION_PATTERN

log = logging.getLogger("kqs.auth")

# The services a request may be signed for: SQS, and CloudFormation and STS, which the
# gateway answers on the same port (`gateway/http/other_services.py`).
SIGNED_SERVICES = ("sqs", "cloudformation", "sts")


@value_class
class Caller:
    principal: Principal
    region: str | None  # of the credential scope; None when unsigned
    # The credential scope's service: "sqs", or "cloudformation" / "sts" for the endpoints
    # `other_services.py` serves on the same port; None when unsigned.
    service: str | None = None


def authenticate(request: web.Request, body: bytes, directory: Directory, now: datetime) -> Caller:
    """The caller and the region its credential scope names (None when unsigned).

    The region decides which region's queues the request sees, and it is part of topic
    names, so a region that cannot be one (`names.REGION_PATTERN`) is refused.
    """
    headers, query = request.headers, request.query
    if not sigv4.is_signed(headers, query):
        return Caller(anonymous(directory.default_account_id), None)
    access_key = sigv4.access_key_of(headers, query) if directory.accept_any_access_key else None
    if access_key and directory.credential(access_key) is None:
        scope = _scope(headers, query)
        region, service = (scope[2], scope[3]) if scope else (None, None)
        caller = Caller(directory.any_key_principal(access_key), region, service)
    else:
        verified = sigv4.verify(
            request.method,
            request.raw_path,
            headers,
            body,
            now,
            directory.secret_of,
            SIGNED_SERVICES,
        )
        credential = directory.credential(verified.access_key)
        assert credential is not None  # verify() refuses unknown keys
        caller = Caller(credential.principal, verified.region, verified.service)
    if caller.region is not None and not REGION_PATTERN.match(caller.region):
        raise SignatureDoesNotMatch("Credential should be scoped to a valid region.")
    return caller


def _scope(headers: Mapping[str, str], query: Mapping[str, str]) -> list[str] | None:
    """The credential's parts (key, date, region, service, "aws4_request"), unverified."""
    authorization = headers.get("Authorization", "")
    credential = authorization.partition("Credential=")[2].split(",", 1)[0]
    credential = credential or query.get("X-Amz-Credential", "")
    parts = credential.split("/")
    return parts if len(parts) == 5 else None


def condition_keys(request: web.Request, principal: Principal, now: datetime) -> Mapping[str, str]:
    """The global condition keys of the access policy language, lower-case, for this request.

    Built only when a policy is evaluated: most requests come from the queue owner's root
    credentials with no queue policy, and `decide` answers those without reading any key.
    """
    return _ConditionKeys(request, principal, now)


class _ConditionKeys(Mapping[str, str]):
    """`condition_keys`, computed on first access."""

    __slots__ = ("_request", "_principal", "_now", "_keys")

    def __init__(self, request: web.Request, principal: Principal, now: datetime) -> None:
        self._request = request
        self._principal = principal
        self._now = now
        self._keys: dict[str, str] | None = None

    def _built(self) -> dict[str, str]:
        if self._keys is None:
            self._keys = _build_condition_keys(self._request, self._principal, self._now)
        return self._keys

    def __getitem__(self, key: str) -> str:
        return self._built()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._built())

    def __len__(self) -> int:
        return len(self._built())


def _build_condition_keys(
    request: web.Request, principal: Principal, now: datetime
) -> dict[str, str]:
    keys = {
        "aws:currenttime": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "aws:epochtime": str(int(now.timestamp())),
        "aws:securetransport": "true" if request.secure else "false",
        "aws:principaltype": (
            "Anonymous" if principal.anonymous else "Account" if principal.is_root else "User"
        ),
    }
    if request.remote:
        keys["aws:sourceip"] = request.remote
    for header, key in (
        ("User-Agent", "aws:useragent"),
        ("Referer", "aws:referer"),
        ("X-Amz-Source-Arn", "aws:sourcearn"),
    ):
        value = request.headers.get(header)
        if value is not None:
            keys[key] = value
    if not principal.anonymous:
        keys["aws:principalaccount"] = principal.account_id
        keys["aws:principalarn"] = principal.arn
        keys["aws:userid"] = principal.access_key or ""
    if principal.user_name:
        keys["aws:username"] = principal.user_name
    return keys


def authorize(
    action: str,
    params: Mapping[str, Any],
    principal: Principal,
    conditions: Mapping[str, str],
    registry: QueueRegistry,
    region: str,
    base_url: str,
) -> None:
    """Raise unless `principal` may perform `action` with these request parameters.

    `region` is the request's (its SigV4 scope's, else the default region). A move task that
    names a DestinationArn also needs SendMessage on that queue, and so does a replay task
    on its destination (the queue itself by default), unless an administrator starts it.
    """
    target_region, owner, name = _named_queue(action, params, principal.account_id, region)
    checks: list[tuple[str, str, str, str | None]] = [(action, target_region, owner, name)]
    destination = params.get("DestinationArn")
    if action == "StartMessageMoveTask" and isinstance(destination, str):
        parsed = parse_arn(destination)
        if parsed is not None:
            checks.append(("SendMessage", *parsed))
    if action == "StartMessageReplayTask" and not principal.is_admin:
        # A replay sends: to DestinationQueueUrl, else back into the queue itself (the
        # administrator may replay any queue into any other: replaying is its right).
        destination_url = params.get("DestinationQueueUrl") or params.get("QueueUrl")
        if isinstance(destination_url, str):
            named = _named_queue(
                "SendMessage", {"QueueUrl": destination_url}, principal.account_id, region
            )
            checks.append(("SendMessage", *named))
    for checked_action, checked_region, checked_owner, checked_name in checks:
        _authorize_one(
            checked_action,
            checked_region,
            checked_owner,
            checked_name,
            principal,
            conditions,
            registry,
            base_url,
        )


def _authorize_one(
    action: str,
    region: str,
    owner: str,
    name: str | None,
    principal: Principal,
    conditions: Mapping[str, str],
    registry: QueueRegistry,
    base_url: str,
) -> None:
    policy = None
    if name is not None:
        record = registry.active(region, owner, name)
        if record is None and action != "CreateQueue" and not principal.anonymous:
            return  # the handler answers NonExistentQueue, in any account, as SQS does
        if record is not None:
            policy = queue_policy(record.attributes.get("Policy", ""))
    target = Target(owner, f"arn:aws:sqs:{region}:{owner}:{name or '*'}", policy)
    if decide(principal, action, target, conditions) is Decision.ALLOW:
        return
    if principal.anonymous:
        raise MissingAuthenticationToken()
    resource = f"{base_url}/{owner}/{name}" if name is not None else f"{base_url}/"
    raise AccessDenied.to(resource)


def _named_queue(
    action: str, params: Mapping[str, Any], caller_account: str, region: str
) -> tuple[str, str, str | None]:
    """(region, owner account, queue name or None for account-wide actions) a request acts
    on: a queue URL or name is in the request's region, an ARN names its own."""
    queue_url = params.get("QueueUrl")
    if isinstance(queue_url, str) and queue_url:
        parts = url_path_parts(queue_url)
        if len(parts) == 1:
            return region, caller_account, parts[0]
        if len(parts) >= 2:
            return region, parts[-2], parts[-1]
    queue_name = params.get("QueueName")
    if action in ("GetQueueUrl", "CreateQueue") and isinstance(queue_name, str) and queue_name:
        owner = params.get("QueueOwnerAWSAccountId") if action == "GetQueueUrl" else None
        owner = owner if isinstance(owner, str) and owner else caller_account
        return region, owner, queue_name
    source_arn = params.get("SourceArn")
    handle = params.get("TaskHandle")
    if action in ("CancelMessageMoveTask", "CancelMessageReplayTask") and isinstance(handle, str):
        # A replay task's handle is made as a move task's (`replay/tasks.py`).
        decoded = decode_handle(handle)
        source_arn = decoded[1] if decoded is not None else None
    if isinstance(source_arn, str):
        parsed = parse_arn(source_arn)
        if parsed is not None:
            return parsed
    return region, caller_account, None


@lru_cache(maxsize=1024)
def queue_policy(text: str) -> Policy | None:
    """The parsed Policy attribute of a queue (cached by its text); None if unset or invalid."""
    if not text:
        return None
    try:
        return Policy.parse(text)
    except PolicyError as error:
        log.warning("ignoring a queue policy that does not parse", extra={"error": str(error)})
        return None
