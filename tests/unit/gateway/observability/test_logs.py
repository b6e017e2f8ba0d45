"""Log lines: readable on a terminal, JSON otherwise or when asked."""

from __future__ import annotations

import io
import json
import logging

import pytest

from gateway.observability import logs
from topology.client_log import RepeatLimit


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


def _librdkafka_line(port: int, after_ms: int) -> logging.LogRecord:
    text = f"FAIL [rdkafka#consumer-8]: Connect to 127.0.0.1:{port} failed (after {after_ms}ms)"
    return logging.LogRecord("kqs.librdkafka", logging.ERROR, "", 0, text, None, None)


def test_repeated_librdkafka_lines_pass_once_per_window_with_the_count_held_back() -> None:
    # Given a broker that refuses connections, and a client logging each reconnect
    now = [0.0]
    limit = RepeatLimit(window_s=10.0, clock=lambda: now[0])
    passed = []
    for i in range(25):
        now[0] = i * 0.5  # 20 lines in the first 10 s, 5 after
        record = _librdkafka_line(40000 + i % 2, i % 3)
        if limit.filter(record):
            passed.append(record)
    # Then the first line passes, the next one after the window carries the count held back
    assert len(passed) == 2
    assert not hasattr(passed[0], "suppressed")
    assert passed[1].suppressed == 19  # type: ignore[attr-defined]
    # And a line of another kind is never held back by them
    other = logging.LogRecord("kqs.librdkafka", logging.ERROR, "", 0, "GETPID failed", None, None)
    assert limit.filter(other)
