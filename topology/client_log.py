"""The logger librdkafka's own messages go to, instead of raw `%4|...` lines on stderr.

Every Kafka client KQS creates passes it as its `logger` setting; confluent-kafka then logs
each librdkafka message through it at the level its syslog severity maps to (3 error,
4 warning, 5-6 info, 7 debug), served from the client's `poll()`.

While a broker is down, every client logs each failed reconnect: measured in the broker
crash test, about 20 identical "Connection refused" lines a second per gateway, 1,000+ per
minute of outage, burying everything else. `RepeatLimit` lets the first of a kind through
and then one per window, with the number it held back.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable

LIBRDKAFKA = logging.getLogger("kqs.librdkafka")

# Numbers vary between repeats of one message (ports, "after 0ms", counters): not its kind.
_NUMBERS = re.compile(r"\d+")


class RepeatLimit(logging.Filter):
    """Passes a message the first time, then at most once per `window_s` for repeats of the
    same kind (same logger, level and text up to numbers); a passed repeat carries
    `suppressed`, how many were held back since the last one passed."""

    def __init__(self, window_s: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._window_s = window_s
        self._clock = clock
        self._seen: dict[tuple[str, int, str], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        kind = (record.name, record.levelno, _NUMBERS.sub("#", record.getMessage()))
        now = self._clock()
        passed_at, held = self._seen.get(kind, (None, 0))
        if passed_at is not None and now - passed_at < self._window_s:
            self._seen[kind] = (passed_at, held + 1)
            return False
        if len(self._seen) >= 1000:  # kinds are few; the bound only guards against odd ones
            self._seen.clear()
        self._seen[kind] = (now, 0)
        if held:
            record.suppressed = held
        return True


LIBRDKAFKA.addFilter(RepeatLimit())
