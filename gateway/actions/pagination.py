"""NextToken pagination over name-sorted lists (ListQueues, ListDeadLetterSourceQueues).

The token is the last name of the previous page, encoded: stable while queues come and go,
because the next page starts after that name rather than at a position.
"""

from __future__ import annotations

import base64
import binascii

from gateway.common import limits
from gateway.common.errors import InvalidParameterValue


def _encode(name: str) -> str:
    return base64.urlsafe_b64encode(name.encode()).decode("ascii")


def _decode(token: str) -> str:
    try:
        return base64.urlsafe_b64decode(token.encode("ascii")).decode()
    except (binascii.Error, ValueError, UnicodeError):
        raise InvalidParameterValue("Invalid NextToken value.") from None


def paginate(
    names: list[str], max_results: int | None, next_token: str | None
) -> tuple[list[str], str | None]:
    """One page of `names` (sorted ascending) and the token for the next, if any."""
    if next_token:
        after = _decode(next_token)
        names = [n for n in names if n > after]
    if max_results is None:
        return names[: limits.MAX_LIST_RESULTS], None
    page = names[:max_results]
    more = len(names) > max_results
    return page, _encode(page[-1]) if more and page else None
