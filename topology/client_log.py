"""The logger librdkafka's own messages go to, instead of raw `%4|...` lines on stderr.

Every Kafka client KQS creates passes it as its `logger` setting; confluent-kafka then logs
each librdkafka message through it at the level its syslog severity maps to (3 error,
4 warning, 5-6 info, 7 debug), served from the client's `poll()`.
"""

from __future__ import annotations

import logging

LIBRDKAFKA = logging.getLogger("kqs.librdkafka")
