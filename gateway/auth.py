"""Who is calling: the access key and credential scope of a SigV4-signed request.

Only the scope is read here (the region for ARNs, the key for SenderId); signature
verification and access policies are a separate layer, not yet enforced.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from aiohttp import web

_CREDENTIAL = re.compile(r"Credential=([^/\s,]+)/(\d{8})/([^/\s,]+)/([^/\s,]+)/aws4_request")


@dataclass(frozen=True, slots=True)
class Caller:
    access_key: str | None
    region: str | None


def caller_of(request: web.Request) -> Caller:
    header = request.headers.get("Authorization", "")
    match = _CREDENTIAL.search(header)
    if match is None:
        credential = request.query.get("X-Amz-Credential", "")
        match = _CREDENTIAL.search("Credential=" + credential)
    if match is None:
        return Caller(None, None)
    return Caller(match.group(1), match.group(3))
