"""Logs for people and for machines, with the `extra=` fields of each call.

* `text`: one readable line, `12:03:04.512 INFO  kqs.serve  listening  endpoint=http://...`;
  what a terminal gets by default.
* `json`: one JSON object per line (`ts`, `level`, `logger`, `msg`, the fields); what a file,
  a pipe or a log collector gets by default.
* `auto` (the default of `--log-format` / `KQS_LOG_FORMAT`): `text` when stderr is a
  terminal, else `json`.

librdkafka's own log lines (`%4|...|FAIL|...` on stderr otherwise) come through the
`kqs.librdkafka` logger (`LIBRDKAFKA`, given to clients as their `logger` setting), at the
level their syslog severity maps to.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from datetime import UTC, datetime
from typing import TextIO

from topology.client_log import LIBRDKAFKA

__all__ = ["LIBRDKAFKA", "add_log_format_argument", "configure", "resolve"]

FORMATS = ("auto", "text", "json")


_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


def _fields(record: logging.LogRecord) -> dict[str, object]:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update(_fields(record))
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class TextFormatter(logging.Formatter):
    """`HH:MM:SS.mmm LEVEL logger  message  key=value ...` in local time; values with spaces
    are quoted."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = datetime.fromtimestamp(record.created).strftime("%H:%M:%S.%f")[:-3]  # noqa: DTZ006 - local time for people
        fields = " ".join(f"{key}={_text_value(value)}" for key, value in _fields(record).items())
        line = f"{stamp} {record.levelname:<5} {record.name}  {record.getMessage()}"
        if fields:
            line = f"{line}  {fields}"
        if record.exc_info:
            line = f"{line}\n{self.formatException(record.exc_info)}"
        return line


def _text_value(value: object) -> str:
    text = str(value)
    return json.dumps(text) if not text or any(c.isspace() for c in text) else text


def add_log_format_argument(parser: argparse.ArgumentParser, default: str) -> None:
    parser.add_argument(
        "--log-format",
        choices=FORMATS,
        default=default,
        help="text (readable), json (one object per line), or auto: text on a terminal, "
        "else json ($KQS_LOG_FORMAT, default %(default)s)",
    )


def resolve(log_format: str, stream: TextIO | None = None) -> str:
    """`text` or `json`: `auto` picks `text` for a terminal."""
    if log_format not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, not {log_format!r}")
    if log_format != "auto":
        return log_format
    stream = stream or sys.stderr
    isatty = getattr(stream, "isatty", None)
    return "text" if isatty is not None and isatty() else "json"


class _Context(logging.Filter):
    """Adds the same fields to every record, e.g. which worker of a pool wrote it."""

    def __init__(self, fields: dict[str, object]) -> None:
        super().__init__()
        self._fields = fields

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in self._fields.items():
            setattr(record, key, value)
        return True


def configure(
    log_format: str = "auto", level: int = logging.INFO, context: dict[str, object] | None = None
) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if context:
        handler.addFilter(_Context(context))
    if resolve(log_format, sys.stderr) == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # One line per request (and per dashboard poll) would drown everything else.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
