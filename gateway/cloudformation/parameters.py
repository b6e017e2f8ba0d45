"""A stack's parameter values: given, kept from before (`UsePreviousValue`) or defaulted, and
checked against their declarations (type, AllowedValues, AllowedPattern, lengths, bounds)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gateway.cloudformation.errors import ValidationError
from gateway.cloudformation.template import Template


@dataclass(frozen=True)
class GivenParameter:
    key: str
    value: str | None  # None: UsePreviousValue
    use_previous: bool = False


def resolve(
    template: Template, given: list[GivenParameter], previous: dict[str, str]
) -> dict[str, str]:
    """The value of every declared parameter (as the string the API shows)."""
    declared = template.parameters
    unknown = [p.key for p in given if p.key not in declared]
    if unknown:
        raise ValidationError(f"Parameters: [{', '.join(unknown)}] do not exist in the template")
    by_key = {p.key: p for p in given}
    values: dict[str, str] = {}
    missing: list[str] = []
    for name, declaration in declared.items():
        parameter = by_key.get(name)
        if parameter is not None and parameter.use_previous:
            if name not in previous:
                raise ValidationError(
                    f"Invalid input for parameter key {name}. Cannot specify usePreviousValue "
                    "as true for a parameter key not in the previous template"
                )
            values[name] = previous[name]
        elif parameter is not None and parameter.value is not None:
            values[name] = parameter.value
        elif "Default" in declaration:
            values[name] = _as_text(declaration["Default"])
        else:
            missing.append(name)
            continue
        _check(name, declaration, values[name])
    if missing:
        raise ValidationError(f"Parameters: [{', '.join(missing)}] must have values")
    return values


def resolve_default(value: Any) -> str:
    """A declared Default as the API shows it."""
    return _as_text(value)


def _as_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(_as_text(v) for v in value)
    return str(value)


def _check(name: str, declaration: dict[str, Any], value: str) -> None:
    kind = declaration["Type"]
    described = declaration.get("ConstraintDescription")

    def refuse(reason: str) -> ValidationError:
        if described:
            return ValidationError(f"Parameter '{name}' failed to satisfy constraint: {described}")
        return ValidationError(f"Parameter '{name}' {reason}")

    items = value.split(",") if kind in ("List<Number>", "CommaDelimitedList") else [value]
    if kind in ("Number", "List<Number>"):
        for item in items:
            try:
                float(item)
            except ValueError:
                raise ValidationError(f"Parameter '{name}' must be a number.") from None
    allowed = declaration.get("AllowedValues")
    if allowed is not None:
        allowed_text = [_as_text(a) for a in allowed]
        if any(item not in allowed_text for item in items):
            raise refuse("must be one of AllowedValues")
    pattern = declaration.get("AllowedPattern")
    if pattern is not None and not re.fullmatch(str(pattern), value):
        raise refuse(f"must match pattern {pattern}")
    if "MinLength" in declaration and len(value) < int(declaration["MinLength"]):
        raise refuse(f"must contain at least {declaration['MinLength']} characters")
    if "MaxLength" in declaration and len(value) > int(declaration["MaxLength"]):
        raise refuse(f"must contain at most {declaration['MaxLength']} characters")
    if kind == "Number":
        number = float(value)
        if "MinValue" in declaration and number < float(declaration["MinValue"]):
            raise refuse(f"must be a number not less than {declaration['MinValue']}")
        if "MaxValue" in declaration and number > float(declaration["MaxValue"]):
            raise refuse(f"must be a number not greater than {declaration['MaxValue']}")


def typed(template: Template, values: dict[str, str]) -> dict[str, Any]:
    """What `Ref` of each parameter gives: a list for the list types, else the string."""
    out: dict[str, Any] = {}
    for name, value in values.items():
        kind = template.parameters.get(name, {}).get("Type")
        out[name] = value.split(",") if kind in ("List<Number>", "CommaDelimitedList") else value
    return out


def shown(template: Template, values: dict[str, str]) -> list[dict[str, str]]:
    """Parameters as DescribeStacks answers them: NoEcho ones masked."""
    out = []
    for name, value in values.items():
        no_echo = str(template.parameters.get(name, {}).get("NoEcho", "")).lower() == "true"
        out.append({"ParameterKey": name, "ParameterValue": "****" if no_echo else value})
    return out
