"""The Query protocol's text handling: form decoding (`gateway.http.query.parse_form`) reads the
pairs `urllib.parse.parse_qsl(..., keep_blank_values=True)` reads, and XML escaping
(`gateway.http.query.escape`) writes what the chain of five replacements wrote, whatever the text."""

from __future__ import annotations

import random
from urllib.parse import parse_qsl, urlencode

import pytest

from gateway.http import query

QUEUE_URL = "http://127.0.0.1:9324/000000000000/orders"
PIECES = [
    "a",
    "Z",
    "0",
    ".",
    "=",
    "&",
    "+",
    "%",
    "%2",
    "%20",
    "%2B",
    "%26",
    "%3D",
    "%zz",
    "%C3%A9",
    "%C3",
    "%FF",
    "%F0%9F%8E%89",
    "é",
    "🎉",
    " ",
    "~",
    "-",
    "_",
    "*",
    ";",
]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "&",
        "&&a=1&&",
        "Action=SendMessage&Version=2012-11-05",
        urlencode({"QueueUrl": QUEUE_URL, "MessageBody": "hello world+x & y=z ünï 🎉"}),
        "flag&empty=&=value&a=b=c",
        "MessageBody=" + "x" * 1024 + "%20" + "+" * 200,
        "ReceiptHandle=" + "AQEB%2Babc%2Fdef%3D%3D" * 20,
        "bad=%zz%&utf8=%FF%FE&half=%C3",
    ],
)
def test_a_form_reads_as_parse_qsl_reads_it(text: str) -> None:
    assert query.parse_form(text) == parse_qsl(text, keep_blank_values=True)


def test_random_forms_read_as_parse_qsl_reads_them_also_when_decoded_again() -> None:
    rng = random.Random(16)
    for _ in range(3000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randrange(0, 40)))
        # Twice: the second reading takes the remembered decoding of short values.
        assert query.parse_form(text) == parse_qsl(text, keep_blank_values=True), text
        assert query.parse_form(text) == parse_qsl(text, keep_blank_values=True), text


def _escaped_by_the_chain(text: str) -> str:
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("\r", "&#xD;")
    )


def test_xml_escaping_writes_what_the_chain_of_replacements_wrote() -> None:
    rng = random.Random(16)
    pieces = ["&", "<", ">", '"', "\r", "\n", "'", "&amp;", "x", "é", "🎉", " ", "\u2028"]
    texts = ["", "x" * 1024, 'a <b> & "c"\r\n'] + [
        "".join(rng.choice(pieces) for _ in range(rng.randrange(0, 30))) for _ in range(3000)
    ]
    for text in texts:
        assert query.escape(text) == _escaped_by_the_chain(text), text
