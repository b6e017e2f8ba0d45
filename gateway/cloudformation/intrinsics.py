"""The intrinsic functions, the pseudo parameters and the Conditions section, evaluated.

A `Scope` knows a stack's parameter values, its pseudo parameters and how to read what its
resources answer (`Ref`, `Fn::GetAtt`) and other stacks' exports (`Fn::ImportValue`); it turns
a template value into a plain one. `AWS::NoValue` removes the property or list item it stands
for, as in AWS.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

from gateway.cloudformation.errors import ValidationError
from gateway.cloudformation.template import Template, sub_variables

NO_VALUE = object()  # what `Ref: AWS::NoValue` resolves to, dropped by the caller


class Scope:
    def __init__(
        self,
        template: Template,
        parameters: dict[str, Any],
        pseudo: dict[str, Any],
        resource_ref: Callable[[str], Any],
        resource_attribute: Callable[[str, str], Any],
        import_value: Callable[[str], str],
    ) -> None:
        self.template = template
        self._parameters = parameters
        self._pseudo = pseudo
        self._resource_ref = resource_ref
        self._resource_attribute = resource_attribute
        self._import_value = import_value
        self._conditions: dict[str, bool] = {}
        self._evaluating: set[str] = set()

    def condition(self, name: str) -> bool:
        """The value of the named condition of the template's Conditions section."""
        if name in self._conditions:
            return self._conditions[name]
        declared = self.template.conditions
        if name not in declared:
            raise ValidationError(f"Template error: unresolved condition dependency {name}")
        if name in self._evaluating:
            raise ValidationError(f"Template error: circular condition dependency {name}")
        self._evaluating.add(name)
        value = self.resolve(declared[name])
        self._evaluating.discard(name)
        if not isinstance(value, bool):
            raise ValidationError(
                f"Template error: condition {name} does not evaluate to a boolean"
            )
        self._conditions[name] = value
        return value

    def included(self, declaration: dict[str, Any]) -> bool:
        """Whether a resource or output with this declaration exists (its `Condition`)."""
        name = declaration.get("Condition")
        return True if name is None else self.condition(str(name))

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            items = [self.resolve(item) for item in value]
            return [item for item in items if item is not NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, argument),) = value.items()
            function = _FUNCTIONS.get(key)
            if function is not None:
                return function(self, argument)
        resolved = {k: self.resolve(v) for k, v in value.items()}
        return {k: v for k, v in resolved.items() if v is not NO_VALUE}

    def ref(self, name: Any) -> Any:
        if not isinstance(name, str):
            raise ValidationError(
                "Template error: every Ref object must have a single String value."
            )
        if name == "AWS::NoValue":
            return NO_VALUE
        if name in self._pseudo:
            return self._pseudo[name]
        if name in self._parameters:
            return self._parameters[name]
        if name in self.template.resources:
            return self._resource_ref(name)
        raise ValidationError(f"Template format error: Unresolved resource dependencies [{name}]")

    def get_att(self, argument: Any) -> Any:
        if isinstance(argument, str):
            resource, _, attribute = argument.partition(".")
        elif isinstance(argument, list) and len(argument) == 2:
            resource, attribute = str(argument[0]), self.resolve(argument[1])
        else:
            raise ValidationError(
                "Template error: every Fn::GetAtt object requires two non-empty parameters, "
                "the resource name and the resource attribute"
            )
        if resource not in self.template.resources:
            raise ValidationError(
                f"Template error: instance of Fn::GetAtt references undefined resource {resource}"
            )
        return self._resource_attribute(resource, str(attribute))

    def sub(self, argument: Any) -> str:
        if isinstance(argument, str):
            text, variables = argument, {}
        elif isinstance(argument, list) and len(argument) == 2 and isinstance(argument[1], dict):
            text, variables = str(argument[0]), argument[1]
        else:
            raise ValidationError(
                "Template error: Fn::Sub takes a string, or [string, {variables}]"
            )
        values = {name: self.resolve(v) for name, v in variables.items()}
        for name in sub_variables(text):
            if name in values:
                value = values[name]
            elif "." in name and name.split(".")[0] in self.template.resources:
                value = self.get_att(name)
            else:
                value = self.ref(name)
            if isinstance(value, list):
                value = ",".join(str(v) for v in value)
            text = text.replace("${" + name + "}", _text(value))
        return text.replace("${!", "${")


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def _join(scope: Scope, argument: Any) -> str:
    if not (isinstance(argument, list) and len(argument) == 2):
        raise ValidationError("Template error: Fn::Join takes [delimiter, [values]]")
    delimiter, values = scope.resolve(argument[0]), scope.resolve(argument[1])
    if not isinstance(values, list):
        raise ValidationError("Template error: Fn::Join's second argument must be a list")
    return str(delimiter).join(_text(v) for v in values)


def _select(scope: Scope, argument: Any) -> Any:
    if not (isinstance(argument, list) and len(argument) == 2):
        raise ValidationError("Template error: Fn::Select takes [index, [values]]")
    index, values = scope.resolve(argument[0]), scope.resolve(argument[1])
    if not isinstance(values, list):
        raise ValidationError("Template error: Fn::Select's second argument must be a list")
    try:
        return values[int(index)]
    except (ValueError, IndexError):
        raise ValidationError(
            f"Template error: Fn::Select cannot select nonexistent value at index {index}"
        ) from None


def _split(scope: Scope, argument: Any) -> list[str]:
    if not (isinstance(argument, list) and len(argument) == 2):
        raise ValidationError("Template error: Fn::Split takes [delimiter, string]")
    delimiter, text = scope.resolve(argument[0]), scope.resolve(argument[1])
    return str(text).split(str(delimiter))


def _if(scope: Scope, argument: Any) -> Any:
    if not (isinstance(argument, list) and len(argument) == 3):
        raise ValidationError("Template error: Fn::If requires a list argument with three elements")
    return scope.resolve(argument[1] if scope.condition(str(argument[0])) else argument[2])


def _equals(scope: Scope, argument: Any) -> bool:
    if not (isinstance(argument, list) and len(argument) == 2):
        raise ValidationError("Template error: Fn::Equals requires a list of two values")
    left, right = (scope.resolve(a) for a in argument)
    return _text(left) == _text(right)


def _boolean(scope: Scope, value: Any, function: str) -> bool:
    resolved = scope.resolve(value)
    if not isinstance(resolved, bool):
        raise ValidationError(f"Template error: every {function} member must be a condition")
    return resolved


def _not(scope: Scope, argument: Any) -> bool:
    if not (isinstance(argument, list) and len(argument) == 1):
        raise ValidationError("Template error: Fn::Not requires a list argument with one element")
    return not _boolean(scope, argument[0], "Fn::Not")


def _and(scope: Scope, argument: Any) -> bool:
    if not (isinstance(argument, list) and 2 <= len(argument) <= 10):
        raise ValidationError("Template error: Fn::And requires a list of 2 to 10 conditions")
    return all(_boolean(scope, a, "Fn::And") for a in argument)


def _or(scope: Scope, argument: Any) -> bool:
    if not (isinstance(argument, list) and 2 <= len(argument) <= 10):
        raise ValidationError("Template error: Fn::Or requires a list of 2 to 10 conditions")
    return any(_boolean(scope, a, "Fn::Or") for a in argument)


def _find_in_map(scope: Scope, argument: Any) -> Any:
    if not (isinstance(argument, list) and len(argument) == 3):
        raise ValidationError(
            "Template error: Fn::FindInMap takes [map, top-level key, second-level key]"
        )
    name, top, second = (str(scope.resolve(a)) for a in argument)
    mapping = scope.template.mappings.get(name)
    if not isinstance(mapping, dict):
        raise ValidationError(f"Template error: Unable to get mapping for {name}")
    try:
        return mapping[top][second]
    except (KeyError, TypeError):
        raise ValidationError(
            f"Template error: Unable to get mapping for {name}::{top}::{second}"
        ) from None


def _import_value(scope: Scope, argument: Any) -> str:
    return scope._import_value(str(scope.resolve(argument)))


def _base64(scope: Scope, argument: Any) -> str:
    return base64.b64encode(_text(scope.resolve(argument)).encode()).decode()


def _get_azs(scope: Scope, argument: Any) -> list[str]:
    region = str(scope.resolve(argument) or scope.ref("AWS::Region"))
    return [f"{region}{zone}" for zone in "abc"]


def _condition(scope: Scope, argument: Any) -> bool:
    return scope.condition(str(argument))


_FUNCTIONS: dict[str, Callable[[Scope, Any], Any]] = {
    "Ref": Scope.ref,
    "Fn::GetAtt": Scope.get_att,
    "Fn::Sub": Scope.sub,
    "Fn::Join": _join,
    "Fn::Select": _select,
    "Fn::Split": _split,
    "Fn::If": _if,
    "Fn::Equals": _equals,
    "Fn::Not": _not,
    "Fn::And": _and,
    "Fn::Or": _or,
    "Fn::FindInMap": _find_in_map,
    "Fn::ImportValue": _import_value,
    "Fn::Base64": _base64,
    "Fn::GetAZs": _get_azs,
    "Condition": _condition,
}
