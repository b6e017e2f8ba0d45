"""gateway.common.checksums against the test vectors of docs/SQS-BEHAVIOUR.md, "Checksums"."""

from __future__ import annotations

import hashlib

from gateway.common.checksums import md5_of_attributes
from lease_store.records import AttributeValue, StoredMessage

TRACE_HEADER = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"


def test_body_md5_is_the_hex_md5_of_the_utf8_bytes_before_and_after_storing() -> None:
    body = "ünïcødé 🎉\r\n".encode()
    expected = hashlib.md5(body).hexdigest()
    message = StoredMessage("m-1", body, 0)  # as ingested from another producer: no digest yet
    stored = StoredMessage.decode(message.encode())

    assert message.md5_of_body() == expected
    assert stored.body_md5 == hashlib.md5(body).digest()  # computed once, kept
    assert stored.md5_of_body() == expected


def test_string_attribute_matches_the_reference_vector() -> None:
    attributes = {"attribName1": AttributeValue("String", string_value="attribValue 1")}
    assert md5_of_attributes(attributes) == "19e27d4e946b072f3f58da80d94fd778"


def test_binary_attribute_matches_the_reference_vector() -> None:
    attributes = {"binaryAttribute": AttributeValue("Binary", binary_value=b"Hello binary world!")}
    assert md5_of_attributes(attributes) == "31a92b15d92f8db860eda32aceb656c3"


def test_trace_header_system_attribute_matches_the_reference_vector() -> None:
    system = {"AWSTraceHeader": AttributeValue("String", string_value=TRACE_HEADER)}
    assert md5_of_attributes(system) == "5ae4d5d7636402d80f4eb6d213245a88"


def test_no_attributes_give_no_digest_rather_than_the_md5_of_nothing() -> None:
    assert md5_of_attributes({}) is None


def test_attribute_order_does_not_change_the_digest() -> None:
    # Given the same attributes inserted in two orders
    a = AttributeValue("String", string_value="1")
    b = AttributeValue("Number", string_value="2")
    # Then the digest is the same: names are sorted before hashing
    assert md5_of_attributes({"a": a, "b": b}) == md5_of_attributes({"b": b, "a": a})


def test_custom_type_label_is_part_of_the_digest() -> None:
    plain = {"n": AttributeValue("Number", string_value="7")}
    labelled = {"n": AttributeValue("Number.int", string_value="7")}
    assert md5_of_attributes(plain) != md5_of_attributes(labelled)


def test_string_and_binary_of_the_same_bytes_differ_by_transport_byte() -> None:
    as_string = {"x": AttributeValue("String", string_value="abc")}
    as_binary = {"x": AttributeValue("String", binary_value=b"abc")}
    assert md5_of_attributes(as_string) != md5_of_attributes(as_binary)


def test_digest_is_the_spec_byte_layout() -> None:
    # Given one Number attribute with a custom label, hashed by hand from the spec's layout
    expected = hashlib.md5(
        b"\x00\x00\x00\x05price" + b"\x00\x00\x00\x0aNumber.eur" + b"\x01" + b"\x00\x00\x00\x0412.5"
    ).hexdigest()
    # Then gateway.common.checksums agrees
    attributes = {"price": AttributeValue("Number.eur", string_value="12.5")}
    assert md5_of_attributes(attributes) == expected


def test_independent_test_helper_agrees_with_the_reference_vectors() -> None:
    from tests.support.attribute_md5 import attributes_md5

    assert (
        attributes_md5({"attribName1": {"DataType": "String", "StringValue": "attribValue 1"}})
        == "19e27d4e946b072f3f58da80d94fd778"
    )
    assert (
        attributes_md5(
            {"binaryAttribute": {"DataType": "Binary", "BinaryValue": b"Hello binary world!"}}
        )
        == "31a92b15d92f8db860eda32aceb656c3"
    )
    assert (
        attributes_md5({"AWSTraceHeader": {"DataType": "String", "StringValue": TRACE_HEADER}})
        == "5ae4d5d7636402d80f4eb6d213245a88"
    )
