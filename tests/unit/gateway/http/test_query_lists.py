"""Query lists of strings, flattened (`AttributeName.1`) or by their JSON name
(`MessageSystemAttributeNames.1`), decode to one JSON list (`gateway/http/query.py`)."""

from __future__ import annotations

import pytest

from gateway.http.query import to_json_shape


@pytest.mark.parametrize("name", ["MessageSystemAttributeName", "MessageSystemAttributeNames"])
def test_message_system_attribute_names_decode_in_either_form(name: str) -> None:
    params = {"Action": "ReceiveMessage", f"{name}.2": "SenderId", f"{name}.1": "All"}
    assert to_json_shape(params)["MessageSystemAttributeNames"] == ["All", "SenderId"]


def test_a_numbered_json_list_name_decodes_like_the_flattened_one() -> None:
    flattened = to_json_shape({"AttributeName.1": "All", "MessageAttributeName.1": ".*"})
    numbered = to_json_shape({"AttributeNames.1": "All", "MessageAttributeNames.1": ".*"})
    assert flattened == numbered == {"AttributeNames": ["All"], "MessageAttributeNames": [".*"]}


def test_a_structure_under_a_list_name_is_left_for_the_action_to_refuse() -> None:
    assert to_json_shape({"AttributeNames.x": "All"}) == {"AttributeNames": {"x": "All"}}
