"""Reading a template (JSON, or YAML with the short-form tags) and checking it before any
resource is touched: its sections, its resource types, what each resource refers to and the
order that gives.

A template naming a resource type KQS does not serve is refused here, as AWS refuses an
unknown type ("Unrecognized resource types"), so no stack is ever half-created for it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import yaml

from gateway.cloudformation.errors import TemplateError, ValidationError

SUPPORTED_TYPES = (
    "AWS::SQS::Queue",
    "AWS::SQS::QueuePolicy",
    "AWS::SQS::QueueInlinePolicy",
    # What `cdk synth` adds to every stack unless version reporting is off: no effect here.
    "AWS::CDK::Metadata",
)
PARAMETER_TYPES = ("String", "Number", "List<Number>", "CommaDelimitedList")
PSEUDO_PARAMETERS = (
    "AWS::AccountId",
    "AWS::NotificationARNs",
    "AWS::NoValue",
    "AWS::Partition",
    "AWS::Region",
    "AWS::StackId",
    "AWS::StackName",
    "AWS::URLSuffix",
)
_SECTIONS = (
    "AWSTemplateFormatVersion",
    "Description",
    "Metadata",
    "Parameters",
    "Mappings",
    "Conditions",
    "Resources",
    "Outputs",
)
_RESOURCE_KEYS = (
    "Type",
    "Properties",
    "DependsOn",
    "Condition",
    "DeletionPolicy",
    "UpdateReplacePolicy",
    "Metadata",
    "CreationPolicy",
    "UpdatePolicy",
)
DELETION_POLICIES = ("Delete", "Retain", "RetainExceptOnCreate")
MAX_BODY_BYTES = 51_200  # TemplateBody's limit in the API
_SUB_VARIABLE = re.compile(r"\$\{([^}!][^}]*)\}")


@dataclass(frozen=True)
class Template:
    body: str
    document: dict[str, Any]

    @property
    def description(self) -> str | None:
        value = self.document.get("Description")
        return str(value) if value is not None else None

    @property
    def parameters(self) -> dict[str, dict[str, Any]]:
        return dict(self.document.get("Parameters") or {})

    @property
    def resources(self) -> dict[str, dict[str, Any]]:
        return dict(self.document.get("Resources") or {})

    @property
    def outputs(self) -> dict[str, dict[str, Any]]:
        return dict(self.document.get("Outputs") or {})

    @property
    def conditions(self) -> dict[str, Any]:
        return dict(self.document.get("Conditions") or {})

    @property
    def mappings(self) -> dict[str, Any]:
        return dict(self.document.get("Mappings") or {})

    def dependencies(self, logical_id: str) -> set[str]:
        """The resources `logical_id` needs first: what it refers to, and its DependsOn."""
        resource = self.resources[logical_id]
        needed = {n for n in references(resource.get("Properties")) if n in self.resources}
        return needed | set(_depends_on(resource))


def parse(body: str) -> Template:
    """The template `body` holds, checked; raises `ValidationError` saying what is wrong."""
    if len(body.encode()) > MAX_BODY_BYTES:
        raise ValidationError(
            "1 validation error detected: Value at 'templateBody' failed to satisfy "
            f"constraint: Member must have length less than or equal to {MAX_BODY_BYTES}"
        )
    document = _load(body)
    template = Template(body, document)
    _check(template)
    return template


def _load(body: str) -> dict[str, Any]:
    if body.lstrip().startswith("{"):
        try:
            document = json.loads(body)
        except ValueError as exc:
            raise TemplateError(f"JSON not well-formed. ({exc})") from None
    else:
        try:
            document = yaml.load(body, Loader=_Loader)  # a SafeLoader
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
            raise TemplateError(f"YAML not well-formed.{where}") from None
    if not isinstance(document, dict):
        raise TemplateError("The template is not a JSON or YAML object.")
    return document


class _Loader(yaml.SafeLoader):
    """YAML as CloudFormation reads it: the short-form tags, and no dates (an unquoted
    `AWSTemplateFormatVersion: 2010-09-09` is the string, not a date)."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _short_form(loader: _Loader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        assert isinstance(node, yaml.MappingNode)
        value = loader.construct_mapping(node, deep=True)
    if suffix == "Ref":
        return {"Ref": value}
    if suffix == "Condition":
        return {"Condition": value}
    if suffix == "GetAtt" and isinstance(value, str):
        resource, _, attribute = value.partition(".")
        return {"Fn::GetAtt": [resource, attribute]}
    return {f"Fn::{suffix}": value}


_Loader.add_multi_constructor("!", _short_form)


def _check(template: Template) -> None:
    document = template.document
    unknown = [key for key in document if key not in _SECTIONS]
    if "Transform" in unknown:
        raise ValidationError(
            "Transform is not supported: KQS expands no macros (AWS::Serverless…)."
        )
    if "Rules" in unknown:
        raise ValidationError("Rules are not supported by KQS; remove the Rules section.")
    if unknown:
        raise TemplateError(f"Invalid template property or properties [{', '.join(unknown)}]")
    version = document.get("AWSTemplateFormatVersion")
    if version is not None and str(version) != "2010-09-09":
        raise TemplateError(f"'{version}' is not a supported AWSTemplateFormatVersion value.")
    for section in ("Parameters", "Mappings", "Conditions", "Resources", "Outputs"):
        if section in document and not isinstance(document[section], dict):
            raise TemplateError(f"{section} must be an object.")
    resources = template.resources
    if not resources:
        raise TemplateError("At least one Resources member must be defined.")
    unrecognized = []
    for logical_id, resource in resources.items():
        if not isinstance(resource, dict) or "Type" not in resource:
            raise TemplateError(
                f"[/Resources/{logical_id}] Every Resources object must contain a Type member."
            )
        extra = [key for key in resource if key not in _RESOURCE_KEYS]
        if extra:
            raise TemplateError(f"Invalid template resource property '{extra[0]}'")
        if resource["Type"] not in SUPPORTED_TYPES:
            unrecognized.append(str(resource["Type"]))
        policy = resource.get("DeletionPolicy", "Delete")
        if policy not in DELETION_POLICIES:
            raise TemplateError(
                f"[/Resources/{logical_id}/DeletionPolicy] {policy} is not one of "
                f"{', '.join(DELETION_POLICIES)} (the policies KQS applies to SQS resources)"
            )
        properties = resource.get("Properties", {})
        if not isinstance(properties, dict):
            raise TemplateError(f"[/Resources/{logical_id}/Properties] must be an object.")
    if unrecognized:
        raise TemplateError(
            f"Unrecognized resource types: [{', '.join(unrecognized)}] (KQS serves "
            f"{', '.join(SUPPORTED_TYPES[:3])})"
        )
    _check_parameters(template)
    _check_references(template)
    order(template, list(resources))


def _check_parameters(template: Template) -> None:
    for name, declaration in template.parameters.items():
        if not isinstance(declaration, dict) or "Type" not in declaration:
            raise TemplateError(
                f"[/Parameters/{name}] Every Parameters object must contain a Type member."
            )
        if declaration["Type"] not in PARAMETER_TYPES:
            raise ValidationError(
                f"Parameter '{name}' has type {declaration['Type']}, which KQS does not "
                f"support (it supports {', '.join(PARAMETER_TYPES)})."
            )


def _check_references(template: Template) -> None:
    known = set(template.resources) | set(template.parameters) | set(PSEUDO_PARAMETERS)
    unresolved: list[str] = []
    for resource in template.resources.values():
        for name in sorted(references(resource.get("Properties"))):
            if name not in known and name not in unresolved:
                unresolved.append(name)
        for name in _depends_on(resource):
            if name not in template.resources and name not in unresolved:
                unresolved.append(name)
        condition = resource.get("Condition")
        if condition is not None and condition not in template.conditions:
            raise TemplateError(
                f"Unresolved dependencies [{condition}]. Cannot reference resources in the "
                "Conditions block of the template"
            )
    if unresolved:
        raise TemplateError(
            f"Unresolved resource dependencies [{', '.join(unresolved)}] in the Resources "
            "block of the template"
        )
    for output_id, output in template.outputs.items():
        if not isinstance(output, dict) or "Value" not in output:
            raise TemplateError(
                f"[/Outputs/{output_id}] Every Outputs member must contain a Value object"
            )
        missing = sorted(n for n in references(output) if n not in known)
        if missing:
            raise TemplateError(
                f"Unresolved resource dependencies [{', '.join(missing)}] in the Outputs "
                "block of the template"
            )


def _depends_on(resource: dict[str, Any]) -> list[str]:
    value = resource.get("DependsOn", [])
    return [value] if isinstance(value, str) else [str(v) for v in value]


def references(value: Any) -> set[str]:
    """The names `value` refers to by Ref, Fn::GetAtt or a Fn::Sub variable."""
    return set(_references(value))


def _references(value: Any) -> Iterator[str]:
    if isinstance(value, list):
        for item in value:
            yield from _references(item)
    elif isinstance(value, dict):
        if len(value) == 1:
            ((key, argument),) = value.items()
            if key == "Ref" and isinstance(argument, str):
                yield argument
                return
            if key == "Fn::GetAtt":
                target = argument.split(".")[0] if isinstance(argument, str) else argument[0]
                if isinstance(target, str):
                    yield target
                return
            if key == "Fn::Sub":
                text, variables = (
                    (argument, {}) if isinstance(argument, str) else (argument[0], argument[1])
                )
                for name in sub_variables(str(text)):
                    base = name.split(".")[0]
                    if base not in variables:
                        yield base
                yield from _references(variables)
                return
        for item in value.values():
            yield from _references(item)


def sub_variables(text: str) -> list[str]:
    """The `${Name}` / `${Name.Attribute}` variables of a Fn::Sub string (`${!…}` is literal)."""
    return [m.group(1).strip() for m in _SUB_VARIABLE.finditer(text)]


def order(template: Template, logical_ids: list[str]) -> list[str]:
    """`logical_ids` so that each comes after the resources it needs (template order among
    equals); raises on a circular dependency, naming the resources in the cycle."""
    pending = {lid: template.dependencies(lid) & set(logical_ids) for lid in logical_ids}
    done: list[str] = []
    while pending:
        ready = [lid for lid in logical_ids if lid in pending and not pending[lid] - set(done)]
        if not ready:
            raise ValidationError(
                f"Circular dependency between resources: [{', '.join(sorted(pending))}]"
            )
        for lid in ready:
            done.append(lid)
            del pending[lid]
    return done
