"""The access policy language: parse a policy document, evaluate it against one request.

Pure: no I/O, no clock. A request is described by `RequestFacts` (who, which action, on
which resource, and the condition keys with their values); `Policy.evaluate` says what this
one policy decides about it:

* `DENY` when a Deny statement matches (an explicit deny, which nothing overrides);
* `ALLOW` when no Deny but an Allow statement matches;
* `IMPLICIT_DENY` otherwise (the policy does not apply: the default deny).

A statement matches when its principal (`Principal` / `NotPrincipal`, resource policies
only), its action (`Action` / `NotAction`), its resource (`Resource` / `NotResource`) and
every one of its conditions match. Inside a condition, several keys must all match and
several values of one key are alternatives. Action names compare case-insensitively, with
`*` and `?` wildcards; resources and principals case-sensitively (resources with wildcards,
and the old `<account>/<queue>` form of the 2009 guide). Condition keys compare
case-insensitively (the seeds write both `aws:CurrentTime` and `AWS:CurrentTime`).

Combining several policies (identity and queue policies, same or other account) is
`authorize.py`'s job.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from datetime import UTC, datetime
from enum import Enum
from functools import lru_cache
from typing import Any

from lease_store.value_class import value_class


class Decision(Enum):
    ALLOW = "Allow"
    DENY = "Deny"
    IMPLICIT_DENY = "ImplicitDeny"


class PolicyError(ValueError):
    """A policy document that is not valid access policy language."""


@value_class
class RequestFacts:
    """What a policy is evaluated against.

    `principal_arn` is `*` for an anonymous caller, whose `principal_account` is None.
    `actions` are the `sqs:<Name>` forms that the request may be granted by: the action
    itself and, for a batch action, its single twin. `conditions` maps lower-case keys to
    their values; a key that does not apply to the request is absent.
    """

    principal_arn: str
    principal_account: str | None
    actions: tuple[str, ...]
    resource: str
    conditions: Mapping[str, str]


@value_class
class Condition:
    operator: str  # e.g. "StringEquals", "DateLessThan", without IfExists / set prefixes
    if_exists: bool
    key: str  # lower-case
    values: tuple[str, ...]


@value_class
class Statement:
    sid: str | None
    effect: Decision  # ALLOW or DENY
    principals: tuple[str, ...] | None  # None: no Principal element
    not_principals: tuple[str, ...] | None
    actions: tuple[str, ...] | None
    not_actions: tuple[str, ...] | None
    resources: tuple[str, ...] | None
    not_resources: tuple[str, ...] | None
    conditions: tuple[Condition, ...]

    def matches(self, facts: RequestFacts, resource_policy: bool) -> bool:
        return (
            (not resource_policy or self._principal_matches(facts))
            and self._action_matches(facts)
            and self._resource_matches(facts)
            and all(_condition_holds(c, facts.conditions) for c in self.conditions)
        )

    def _principal_matches(self, facts: RequestFacts) -> bool:
        if self.principals is not None:
            return any(_principal_is(p, facts) for p in self.principals)
        if self.not_principals is not None:
            return not any(_principal_is(p, facts) for p in self.not_principals)
        return False  # a resource policy statement names whom it is about

    def _action_matches(self, facts: RequestFacts) -> bool:
        if self.actions is not None:
            return any(
                _glob(a, ignore_case=True).match(x) for a in self.actions for x in facts.actions
            )
        assert self.not_actions is not None
        return not any(
            _glob(a, ignore_case=True).match(x) for a in self.not_actions for x in facts.actions
        )

    def _resource_matches(self, facts: RequestFacts) -> bool:
        if self.resources is not None:
            return any(_resource_is(r, facts.resource) for r in self.resources)
        if self.not_resources is not None:
            return not any(_resource_is(r, facts.resource) for r in self.not_resources)
        return True  # a queue policy covers its queue


# Memoized decisions kept per policy before the memo starts over (bounds its memory).
_MAX_MEMOIZED = 4096


@value_class
class Policy:
    id: str | None
    statements: tuple[Statement, ...]
    document: Mapping[str, Any]
    # Without conditions a policy's decision depends only on who, what and which resource,
    # which repeat from request to request: it is evaluated once per combination (the
    # embedded users' full-access policy is evaluated on every request otherwise).
    _decisions: dict[tuple[str, str | None, tuple[str, ...], str, bool], Decision] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    # No statement has a condition: known at construction, asked on every request.
    unconditional: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "unconditional", not any(s.conditions for s in self.statements))

    @classmethod
    def parse(cls, text: str | Mapping[str, Any]) -> Policy:
        """Parse a policy from its JSON text (or the decoded object); raise PolicyError."""
        if isinstance(text, str):
            try:
                document = json.loads(text)
            except ValueError as error:
                raise PolicyError(f"The policy is not valid JSON: {error}") from None
        else:
            document = text
        if not isinstance(document, dict):
            raise PolicyError("The policy must be a JSON object.")
        raw_statements = document.get("Statement")
        if isinstance(raw_statements, dict):
            raw_statements = [raw_statements]
        if not isinstance(raw_statements, list):  # an empty list is a policy that grants nothing
            raise PolicyError("The policy must contain a Statement list.")
        statements = tuple(_statement(s) for s in raw_statements)
        policy_id = document.get("Id")
        return cls(policy_id if isinstance(policy_id, str) else None, statements, document)

    def evaluate(self, facts: RequestFacts, resource_policy: bool) -> Decision:
        """DENY, ALLOW or IMPLICIT_DENY; `resource_policy` for a queue's own policy."""
        if not self.unconditional:
            return self._evaluate(facts, resource_policy)
        key = (
            facts.principal_arn,
            facts.principal_account,
            facts.actions,
            facts.resource,
            resource_policy,
        )
        decision = self._decisions.get(key)
        if decision is None:
            decision = self._evaluate(facts, resource_policy)
            if len(self._decisions) >= _MAX_MEMOIZED:
                self._decisions.clear()
            self._decisions[key] = decision
        return decision

    def _evaluate(self, facts: RequestFacts, resource_policy: bool) -> Decision:
        matching = [s.effect for s in self.statements if s.matches(facts, resource_policy)]
        if Decision.DENY in matching:
            return Decision.DENY
        if Decision.ALLOW in matching:
            return Decision.ALLOW
        return Decision.IMPLICIT_DENY


def combine(decisions: Sequence[Decision]) -> Decision:
    """Several policies together: an explicit deny wins, then any allow, else default deny."""
    if Decision.DENY in decisions:
        return Decision.DENY
    if Decision.ALLOW in decisions:
        return Decision.ALLOW
    return Decision.IMPLICIT_DENY


# -- parsing -------------------------------------------------------------------------------


def _statement(raw: Any) -> Statement:
    if not isinstance(raw, dict):
        raise PolicyError("Each Statement must be a JSON object.")
    effect = raw.get("Effect")
    if effect not in ("Allow", "Deny"):
        raise PolicyError(f"Effect must be Allow or Deny, not {effect!r}.")
    if ("Action" in raw) == ("NotAction" in raw):
        raise PolicyError("A statement must have exactly one of Action and NotAction.")
    if "Principal" in raw and "NotPrincipal" in raw:
        raise PolicyError("A statement cannot have both Principal and NotPrincipal.")
    if "Resource" in raw and "NotResource" in raw:
        raise PolicyError("A statement cannot have both Resource and NotResource.")
    sid = raw.get("Sid")
    return Statement(
        sid=str(sid) if sid is not None else None,
        effect=Decision(effect),
        principals=_principals(raw["Principal"]) if "Principal" in raw else None,
        not_principals=_principals(raw["NotPrincipal"]) if "NotPrincipal" in raw else None,
        actions=_strings(raw["Action"], "Action") if "Action" in raw else None,
        not_actions=_strings(raw["NotAction"], "NotAction") if "NotAction" in raw else None,
        resources=_strings(raw["Resource"], "Resource") if "Resource" in raw else None,
        not_resources=(
            _strings(raw["NotResource"], "NotResource") if "NotResource" in raw else None
        ),
        conditions=_conditions(raw.get("Condition", {})),
    )


def _strings(value: Any, element: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise PolicyError(f"{element} must be a string or a non-empty list of strings.")


def _principals(value: Any) -> tuple[str, ...]:
    """`"*"`, `{"AWS": "..."}` or `{"AWS": [...]}`; other principal types match no caller."""
    if value == "*":
        return ("*",)
    if not isinstance(value, dict) or not value:
        raise PolicyError('Principal must be "*" or an object such as {"AWS": [...]}.')
    out: list[str] = []
    for kind, names in value.items():
        parsed = _strings(names, "Principal")
        if kind == "AWS":
            out.extend(parsed)
    return tuple(out)


_OPERATORS: dict[str, Callable[[str, str], bool]] = {}
_NEGATED = {
    "StringNotEquals",
    "StringNotEqualsIgnoreCase",
    "StringNotLike",
    "NumericNotEquals",
    "DateNotEquals",
    "NotIpAddress",
    "ArnNotEquals",
    "ArnNotLike",
}


def _conditions(raw: Any) -> tuple[Condition, ...]:
    if not isinstance(raw, dict):
        raise PolicyError("Condition must be a JSON object.")
    out: list[Condition] = []
    for full_operator, block in raw.items():
        operator = full_operator.split(":", 1)[-1]  # ForAnyValue: / ForAllValues: on 1 value
        if_exists = operator.endswith("IfExists") and operator != "IfExists"
        operator = operator.removesuffix("IfExists")
        if operator not in _OPERATORS and operator != "Null":
            raise PolicyError(f"Unknown condition operator {full_operator}.")
        if not isinstance(block, dict) or not block:
            raise PolicyError(f"Condition {full_operator} must map keys to values.")
        for key, values in block.items():
            if isinstance(values, bool | int | float):
                values = str(values).lower() if isinstance(values, bool) else str(values)
            if isinstance(values, list):
                values = [str(v).lower() if isinstance(v, bool) else str(v) for v in values]
            out.append(Condition(operator, if_exists, key.lower(), _strings(values, full_operator)))
    return tuple(out)


# -- matching ------------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def _glob(pattern: str, ignore_case: bool = False) -> re.Pattern[str]:
    """`*` any run of characters, `?` one character, everything else literal."""
    body = "".join(".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in pattern)
    return re.compile(f"^{body}$", re.DOTALL | (re.IGNORECASE if ignore_case else 0))


_ACCOUNT = re.compile(r"^\d{12}$")
_HYPHENATED_ACCOUNT = re.compile(r"^\d{4}-\d{4}-\d{4}$")
_ROOT = re.compile(r"^arn:aws[\w-]*:iam::(\d{12}):root$")
_OLD_RESOURCE = re.compile(r"^/?(\d{12})/(.+)$")


def _principal_is(name: str, facts: RequestFacts) -> bool:
    if name == "*":
        return True
    if _HYPHENATED_ACCOUNT.match(name):  # the 2014 guide: "1234-5678-9012, with or without"
        name = name.replace("-", "")
    if facts.principal_account is None:
        return False  # only "*" names the anonymous caller
    if _ACCOUNT.match(name):
        return name == facts.principal_account
    root = _ROOT.match(name)
    if root:
        return root.group(1) == facts.principal_account
    return name == facts.principal_arn


def _resource_is(pattern: str, resource: str) -> bool:
    old = _OLD_RESOURCE.match(pattern)
    if old:  # the 2009 form <account>/<queue>
        pattern = f"arn:aws:sqs:*:{old.group(1)}:{old.group(2)}"
    return bool(_glob(pattern).match(resource))


def _condition_holds(condition: Condition, request: Mapping[str, str]) -> bool:
    actual = request.get(condition.key)
    if condition.operator == "Null":
        want_missing = condition.values[0].lower() == "true"
        return (actual is None) == want_missing
    if actual is None:
        return condition.if_exists or condition.operator in _NEGATED
    test = _OPERATORS[condition.operator]
    return any(test(actual, expected) for expected in condition.values) != (
        condition.operator in _NEGATED
    )


def _number(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None


def _date(value: str) -> datetime | None:
    number = _number(value)
    if number is not None:
        return datetime.fromtimestamp(number, UTC)
    try:
        parsed = datetime.fromisoformat(value.replace("z", "Z"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _compare_numbers(test: Callable[[float, float], bool]) -> Callable[[str, str], bool]:
    def check(actual: str, expected: str) -> bool:
        a, e = _number(actual), _number(expected)
        return a is not None and e is not None and test(a, e)

    return check


def _compare_dates(test: Callable[[datetime, datetime], bool]) -> Callable[[str, str], bool]:
    def check(actual: str, expected: str) -> bool:
        a, e = _date(actual), _date(expected)
        return a is not None and e is not None and test(a, e)

    return check


def _in_network(actual: str, expected: str) -> bool:
    try:
        return ipaddress.ip_address(actual) in ipaddress.ip_network(expected, strict=False)
    except ValueError:
        return False


def _equals(a: Any, b: Any) -> bool:
    return bool(a == b)


def _less(a: Any, b: Any) -> bool:
    return bool(a < b)


def _less_eq(a: Any, b: Any) -> bool:
    return bool(a <= b)


def _greater(a: Any, b: Any) -> bool:
    return bool(a > b)


def _greater_eq(a: Any, b: Any) -> bool:
    return bool(a >= b)


def _string_like(actual: str, expected: str) -> bool:
    return bool(_glob(expected).match(actual))


def _string_ignore_case(actual: str, expected: str) -> bool:
    return actual.casefold() == expected.casefold()


def _bool(actual: str, expected: str) -> bool:
    return actual.lower() == expected.lower()


# A negated operator is the positive test, inverted in `_condition_holds`.
_OPERATORS.update(
    {
        "StringEquals": _equals,
        "StringNotEquals": _equals,
        "StringEqualsIgnoreCase": _string_ignore_case,
        "StringNotEqualsIgnoreCase": _string_ignore_case,
        "StringLike": _string_like,
        "StringNotLike": _string_like,
        "NumericEquals": _compare_numbers(_equals),
        "NumericNotEquals": _compare_numbers(_equals),
        "NumericLessThan": _compare_numbers(_less),
        "NumericLessThanEquals": _compare_numbers(_less_eq),
        "NumericGreaterThan": _compare_numbers(_greater),
        "NumericGreaterThanEquals": _compare_numbers(_greater_eq),
        "DateEquals": _compare_dates(_equals),
        "DateNotEquals": _compare_dates(_equals),
        "DateLessThan": _compare_dates(_less),
        "DateLessThanEquals": _compare_dates(_less_eq),
        "DateGreaterThan": _compare_dates(_greater),
        "DateGreaterThanEquals": _compare_dates(_greater_eq),
        "Bool": _bool,
        "IpAddress": _in_network,
        "NotIpAddress": _in_network,
        "ArnEquals": _string_like,
        "ArnNotEquals": _string_like,
        "ArnLike": _string_like,
        "ArnNotLike": _string_like,
    }
)
