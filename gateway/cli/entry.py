"""The `kqs` command: `kqs replay` and `kqs peek` are clients of a running gateway and start
from `replay.py` alone; every other command (and `kqs --help`) loads `main.py`, which imports
the whole gateway (aiohttp, the app, the Kafka clients: about 1 s of CPU) to build its parser.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

LIGHT_COMMANDS = ("replay", "peek")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in LIGHT_COMMANDS:
        from gateway.cli import replay

        return replay.main(args)
    from gateway.cli import main as full

    return full.main(args)


if __name__ == "__main__":
    sys.exit(main())
