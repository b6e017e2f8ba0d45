"""An exclusive advisory lock on a file, held for a `with` block.

Used where two processes of this machine would otherwise race on the same directories: two
brokers started on one data directory, two fetches of the same jars into the cache.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def exclusive(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
