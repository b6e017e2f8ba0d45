"""The awsQuery wire of CloudFormation and STS: flattened form parameters in, XML out.

Lists travel as `Name.member.N` (`Parameters.member.1.ParameterKey=...`) and are rendered back
as `<Name><member>...</member></Name>`, the shape botocore's query parser reads for every
list of these two services (`cloudformation/2010-05-15`, `sts/2011-06-15` service models).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

CLOUDFORMATION_NAMESPACE = "http://cloudformation.amazonaws.com/doc/2010-05-15/"
STS_NAMESPACE = "https://sts.amazonaws.com/doc/2011-06-15/"


def to_tree(pairs: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """`A.member.2.B=x` → `{"A": [{}, {"B": "x"}]}`-like nesting (lists in member order)."""
    tree: dict[str, Any] = {}
    for key, value in pairs:
        node = tree
        parts = key.split(".")
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                break  # a scalar and a structure under one name: keep the scalar
            node = child
        else:
            node.setdefault(parts[-1], value)
    converted = _lists(tree)
    assert isinstance(converted, dict)
    return converted


def _lists(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    if set(node) == {"member"} and isinstance(node["member"], dict):
        members = node["member"]
        numbered = sorted((int(k), v) for k, v in members.items() if k.isdigit())
        return [_lists(v) for _, v in numbered]
    return {k: _lists(v) for k, v in node.items()}


def escape(text: str) -> str:
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("\r", "&#xD;")
    )


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return escape(str(value))


def _element(name: str, value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dict):
        return f"<{name}>{_members(value)}</{name}>"
    if isinstance(value, list):
        items = "".join(_element("member", item) for item in value)
        return f"<{name}>{items}</{name}>"
    return f"<{name}>{_scalar(value)}</{name}>"


def _members(result: dict[str, Any]) -> str:
    return "".join(_element(key, value) for key, value in result.items())


def render_result(action: str, result: dict[str, Any], request_id: str, namespace: str) -> str:
    body = _members(result)
    result_xml = f"<{action}Result>{body}</{action}Result>" if body else f"<{action}Result/>"
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<{action}Response xmlns="{namespace}">'
        f"{result_xml}<ResponseMetadata><RequestId>{request_id}</RequestId>"
        f"</ResponseMetadata></{action}Response>"
    )


def render_error(
    code: str, message: str, sender_fault: bool, request_id: str, namespace: str
) -> str:
    fault = "Sender" if sender_fault else "Receiver"
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<ErrorResponse xmlns="{namespace}">'
        f"<Error><Type>{fault}</Type><Code>{escape(code)}</Code>"
        f"<Message>{escape(message)}</Message></Error>"
        f"<RequestId>{request_id}</RequestId></ErrorResponse>"
    )
