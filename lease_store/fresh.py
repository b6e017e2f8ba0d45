"""The messages ingested last, kept as objects for the receive that usually follows soon.

A message's stored copy (`M` key) is written once at ingest and never changes, so the object
ingested is what reading and decoding that copy would give. With consumers keeping up, a
message is received within milliseconds of its send; finding it here spares the receive a
RocksDB read and a decode per message. A message leaves when it is removed from the store,
or oldest first past a bound on the bodies' bytes; a miss (a backlog older than the bound,
a restart) reads the stored copy as before. A partition dropped whole (`drop_partition`)
leaves its entries to age out: an offset of it gets a fact again only when the partition is
restored from the same log, whose record at that offset is the same message.
"""

from __future__ import annotations

from collections import OrderedDict

from lease_store.records import StoredMessage

DEFAULT_MAX_BYTES = 16 * 1024 * 1024
_OVERHEAD_BYTES = 512  # what a kept message costs besides its body (objects, the entry)


class FreshMessages:
    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self._max_bytes = max_bytes
        self._bytes = 0
        # Keyed by the message's `M` key (partition prefix and offset): unique per message.
        self._messages: OrderedDict[bytes, StoredMessage] = OrderedDict()

    def add(self, key: bytes, message: StoredMessage) -> None:
        if key in self._messages:
            return
        self._messages[key] = message
        self._bytes += len(message.body) + _OVERHEAD_BYTES  # `_cost`, without a call
        while self._bytes > self._max_bytes:
            _, oldest = self._messages.popitem(last=False)
            self._bytes -= _cost(oldest)

    def get(self, key: bytes) -> StoredMessage | None:
        return self._messages.get(key)

    def discard(self, key: bytes) -> None:
        """Forget the message (it is being removed from the store)."""
        message = self._messages.pop(key, None)
        if message is not None:
            self._bytes -= len(message.body) + _OVERHEAD_BYTES  # `_cost`

    def __len__(self) -> int:
        return len(self._messages)


def _cost(message: StoredMessage) -> int:
    return len(message.body) + _OVERHEAD_BYTES
