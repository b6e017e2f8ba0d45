"""Log lines: readable on a terminal, JSON otherwise or when asked."""

from __future__ import annotations

import io
import json
import logging

import pytest

from gateway import logs


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_auto_is_text_on_a_terminal_and_json_elsewhere() -> None:
    assert logs.resolve("auto", _Terminal()) == "text"
    assert logs.resolve("auto", io.StringIO()) == "json"
    assert logs.resolve("json", _Terminal()) == "json"
    assert logs.resolve("text", io.StringIO()) == "text"
    with pytest.raises(ValueError, match="log format"):
        logs.resolve("xml")


def _record() -> logging.LogRecord:
    record = logging.LogRecord("kqs.serve", logging.INFO, __file__, 1, "listening", None, None)
    record.endpoint = "http://127.0.0.1:9324"
    record.note = "two words"
    return record


def test_a_text_line_reads_time_level_logger_message_and_fields() -> None:
    line = logs.TextFormatter().format(_record())
    stamp, rest = line.split(" ", 1)
    assert len(stamp) == len("12:03:04.512")
    assert rest == ('INFO  kqs.serve  listening  endpoint=http://127.0.0.1:9324 note="two words"')


def test_a_json_line_carries_the_same_fields() -> None:
    entry = json.loads(logs.JsonFormatter().format(_record()))
    assert {k: entry[k] for k in ("level", "logger", "msg", "endpoint", "note")} == {
        "level": "info",
        "logger": "kqs.serve",
        "msg": "listening",
        "endpoint": "http://127.0.0.1:9324",
        "note": "two words",
    }
