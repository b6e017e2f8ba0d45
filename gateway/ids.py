"""Random ids in UUID version 4 form: request ids and message ids.

`uuid.uuid4()` reads the kernel's random source and builds a `UUID` object for every id,
several µs per request on the hot path. These ids are unique, not secret (SQS's own are
random UUIDs too), so the module-level Mersenne Twister serves: Python seeds it from the
kernel and re-seeds it in a forked child, so processes never share a sequence.
"""

from __future__ import annotations

import random

_VERSION_MASK = ~(0xF << 76)
_VERSION_4 = 0x4 << 76
_VARIANT_MASK = ~(0x3 << 62)
_VARIANT_RFC4122 = 0x2 << 62


def new_uuid() -> str:
    """A random UUID (version 4, RFC 4122 variant) as 36 lower-case characters."""
    n = (random.getrandbits(128) & _VERSION_MASK & _VARIANT_MASK) | _VERSION_4 | _VARIANT_RFC4122
    h = f"{n:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
