"""Random ids in UUID version 4 form: request ids and message ids.

`uuid.uuid4()` reads the kernel's random source and builds a `UUID` object for every id,
several µs per request on the hot path. These ids are unique, not secret (SQS's own are
random UUIDs too), so the module-level Mersenne Twister serves: Python seeds it from the
kernel and re-seeds it in a forked child, so processes never share a sequence.
"""

from __future__ import annotations

import random

# The version and variant bits cleared, then set (one AND and one OR of 128-bit integers).
_CLEAR = ((1 << 128) - 1) & ~(0xF << 76) & ~(0x3 << 62)
_VERSION_4_RFC4122 = (0x4 << 76) | (0x2 << 62)
_getrandbits = random.getrandbits


def new_uuid() -> str:
    """A random UUID (version 4, RFC 4122 variant) as 36 lower-case characters."""
    h = "%032x" % ((_getrandbits(128) & _CLEAR) | _VERSION_4_RFC4122)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
