"""The Query protocol: flattened form parameters in, XML out.

`to_json_shape` turns `Attribute.1.Name=A&Attribute.1.Value=B` style parameters into the JSON
1.0 request shape (`{"Attributes": {"A": "B"}}`), so every action decodes one shape.
`render_result` and `render_error` write the XML documents SQS answers with.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any
from urllib.parse import unquote

NAMESPACE = "http://queue.amazonaws.com/doc/2012-11-05/"

# Query member name -> JSON member name, for flattened lists of strings.
_LISTS = {
    "AttributeName": "AttributeNames",
    "MessageAttributeName": "MessageAttributeNames",
    "MessageSystemAttributeName": "MessageSystemAttributeNames",
    "TagKey": "TagKeys",
    "AWSAccountId": "AWSAccountIds",
    "ActionName": "Actions",
    "StringListValue": "StringListValues",
    "BinaryListValue": "BinaryListValues",
    "Status": "Statuses",  # PeekMessages (KQS's own)
}
# Lists named by their JSON member and numbered (`MessageSystemAttributeNames.1=All`), as
# clients generated from the current API model send them: ReceiveMessage's
# MessageSystemAttributeNames (2024) never had a flattened `...Name.N` form in AWS's models.
_NUMBERED_LISTS = frozenset(_LISTS.values())
# Query member name -> (JSON member name, key field, value field), for flattened maps.
_MAPS = {
    "Attribute": ("Attributes", "Name", "Value"),
    "Tag": ("Tags", "Key", "Value"),
    "MessageAttribute": ("MessageAttributes", "Name", "Value"),
    "MessageSystemAttribute": ("MessageSystemAttributes", "Name", "Value"),
    # StartMessageReplayTask (KQS's own): partition -> offset.
    "StartOffset": ("StartOffsets", "Key", "Value"),
    "EndOffset": ("EndOffsets", "Key", "Value"),
}
# Actions whose response has no Result element in SQS.
_NO_RESULT = {
    "AddPermission",
    "ChangeMessageVisibility",
    "DeleteMessage",
    "DeleteQueue",
    "PurgeQueue",
    "RemovePermission",
    "SetQueueAttributes",
    "TagQueue",
    "UntagQueue",
}
_ENTRY_LISTS = {
    "SendMessageBatchRequestEntry",
    "DeleteMessageBatchRequestEntry",
    "ChangeMessageVisibilityBatchRequestEntry",
}
# botocore sends an empty list as its JSON member name with an empty value
# (`MessageAttributeNames=`, `Entries=`): it means an empty list.
_EMPTY_LIST_NAMES = {*_LISTS.values(), "Entries"}

# JSON member -> XML element of each list item, when rendering results.
_RESULT_LISTS = {
    "QueueUrls": "QueueUrl",
    "queueUrls": "QueueUrl",
    "Messages": "Message",
    "Failed": "BatchResultErrorEntry",
    "Results": "ListMessageMoveTasksResultEntry",
    "Tasks": "MessageReplayTask",  # ListMessageReplayTasks (KQS's own)
    "StringListValues": "StringListValue",
    "BinaryListValues": "BinaryListValue",
}
_RESULT_MAPS = {
    "Attributes": ("Attribute", "Name", "Value"),
    "MessageAttributes": ("MessageAttribute", "Name", "Value"),
    "Tags": ("Tag", "Key", "Value"),
}


def parse_form(text: str) -> list[tuple[str, str]]:
    """`urllib.parse.parse_qsl(text, keep_blank_values=True)`, decoding the short names and
    values that come again on every request (`Action`, `Version`, `QueueUrl`, ...) once."""
    pairs = []
    for field in text.split("&"):
        if field:
            name, _, value = field.partition("=")
            pairs.append((_decoded(name), _decoded(value)))
    return pairs


# Longer values (bodies, receipt handles) rarely repeat: decoded each time, never kept.
_REPEATED_UP_TO = 128


def _decoded(text: str) -> str:
    # `in` before `replace`: see `escape`.
    plus = "+" in text
    if not plus and "%" not in text:
        return text
    if len(text) <= _REPEATED_UP_TO:
        return _decoded_repeated(text)
    return unquote(text.replace("+", " ") if plus else text)


@lru_cache(maxsize=1024)
def _decoded_repeated(text: str) -> str:
    return unquote(text.replace("+", " "))


def to_json_shape(params: dict[str, str]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for key, value in params.items():
        node = tree
        parts = key.split(".")
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                break  # a scalar and a structure under one name: keep the scalar
            node = child
        else:
            node.setdefault(parts[-1], value)
    return _convert(tree)


def _ordered(items: dict[str, Any]) -> list[Any]:
    numbered = [(int(k), v) for k, v in items.items() if k.isdigit()]
    return [v for _, v in sorted(numbered, key=lambda kv: kv[0])]


def _convert(node: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _LISTS and isinstance(value, dict):
            out[_LISTS[key]] = _ordered(value)
        elif key in _NUMBERED_LISTS and isinstance(value, dict) and all(map(str.isdigit, value)):
            out[key] = _ordered(value)
        elif key in _MAPS and isinstance(value, dict):
            name, key_field, value_field = _MAPS[key]
            mapping: dict[str, Any] = {}
            for item in _ordered(value):
                if isinstance(item, dict) and key_field in item:
                    item_value = item.get(value_field)
                    mapping[item[key_field]] = (
                        _convert(item_value) if isinstance(item_value, dict) else item_value
                    )
            out[name] = mapping
        elif key in _ENTRY_LISTS and isinstance(value, dict):
            out["Entries"] = [_convert(v) for v in _ordered(value) if isinstance(v, dict)]
        elif key in _EMPTY_LIST_NAMES and value == "":
            out[key] = []
        elif isinstance(value, dict):
            out[key] = _convert(value)
        else:
            out[key] = value
    return out


def escape(text: str) -> str:
    """XML text escaping that also protects CR, which XML parsers would turn into LF."""
    # Each replace only where its character occurs: `in` finds a character with memchr,
    # while `str.replace` counts it a character at a time even when it is absent (1.5 µs
    # per KB, so five of them cost ~6 µs for each 1 KB message body a receive renders).
    if "&" in text:
        text = text.replace("&", "&amp;")
    if "<" in text:
        text = text.replace("<", "&lt;")
    if ">" in text:
        text = text.replace(">", "&gt;")
    if '"' in text:
        text = text.replace('"', "&quot;")
    if "\r" in text:
        text = text.replace("\r", "&#xD;")
    return text


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return escape(str(value))


def _element(name: str, value: Any, successful_item: str) -> str:
    if isinstance(value, dict):
        return f"<{name}>{_members(value, successful_item)}</{name}>"
    return f"<{name}>{_scalar(value)}</{name}>"


def _members(result: dict[str, Any], successful_item: str) -> str:
    parts: list[str] = []
    for key, value in result.items():
        if value is None:
            continue
        if key in _RESULT_MAPS and isinstance(value, dict):
            item, key_field, value_field = _RESULT_MAPS[key]
            for map_key, map_value in value.items():
                inner = _element(key_field, map_key, successful_item) + _element(
                    value_field, map_value, successful_item
                )
                parts.append(f"<{item}>{inner}</{item}>")
        elif isinstance(value, list):
            item = successful_item if key == "Successful" else _RESULT_LISTS.get(key, key)
            parts.extend(_element(item, v, successful_item) for v in value)
        else:
            parts.append(_element(key, value, successful_item))
    return "".join(parts)


def render_result(action: str, result: dict[str, Any], request_id: str) -> str:
    body = _members(result, f"{action}ResultEntry")
    if action in _NO_RESULT:
        result_xml = ""
    elif body:
        result_xml = f"<{action}Result>{body}</{action}Result>"
    else:
        result_xml = f"<{action}Result/>"  # e.g. an empty receive: clients expect the element
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<{action}Response xmlns="{NAMESPACE}">'
        f"{result_xml}<ResponseMetadata><RequestId>{request_id}</RequestId>"
        f"</ResponseMetadata></{action}Response>"
    )


def render_error(code: str, message: str, sender_fault: bool, request_id: str) -> str:
    fault = "Sender" if sender_fault else "Receiver"
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<ErrorResponse xmlns="{NAMESPACE}">'
        f"<Error><Type>{fault}</Type><Code>{escape(code)}</Code>"
        f"<Message>{escape(message)}</Message><Detail/></Error>"
        f"<RequestId>{request_id}</RequestId></ErrorResponse>"
    )
