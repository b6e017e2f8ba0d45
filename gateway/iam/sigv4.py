"""AWS Signature Version 4 verification, for the Authorization header and presigned URLs.

Pure: the caller hands in the request as received (method, raw path, raw query string,
headers, body bytes), the time now, and a lookup from access key id to secret. `verify`
returns the access key id and the credential scope's region, or raises one of the errors
AWS answers with:

* `IncompleteSignature` (400): an Authorization header or presigned query that lacks a part;
* `InvalidClientTokenId` (403): an access key id nobody has;
* `SignatureDoesNotMatch` (403): a wrong signature, or a scope for another service/date;
* `RequestExpired` (400): a signature date more than 15 minutes from now, or a presigned
  URL past its X-Amz-Expires.

The canonical request is rebuilt from what was sent: the path URI-encoded once more (as
every AWS service but S3 expects), query parameters decoded, re-encoded (RFC 3986) and
sorted, the signed headers with their whitespace collapsed, and the payload hash from
`x-amz-content-sha256` when sent, else SHA-256 of the body (for a presigned URL, either
that, as botocore signs, or `UNSIGNED-PAYLOAD`). Signatures compare with `hmac.compare_digest`; derived signing keys are
cached per (secret, date, region, service).
"""

from __future__ import annotations

import hashlib
import hmac
import posixpath
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from functools import lru_cache
from urllib.parse import quote, unquote

from gateway.common.errors import (
    IncompleteSignature,
    InvalidClientTokenId,
    RequestExpired,
    SignatureDoesNotMatch,
)
from lease_store.value_class import value_class

ALGORITHM = "AWS4-HMAC-SHA256"
SERVICE = "sqs"
MAX_SKEW = timedelta(minutes=15)
MAX_PRESIGNED_EXPIRES_S = 7 * 24 * 3600
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
_AMZ_DATE = "%Y%m%dT%H%M%SZ"
_PARAM = re.compile(r"(\w+)=([^,\s]*)")
# Canonical header lines whose values need no trimming: printable ASCII words joined by single
# spaces, or nothing (`_is_trimmed`'s test, for a whole block at once).
_TRIMMED_BLOCK = re.compile(r"(?:[^:\n]*:(?:[!-~]+(?: [!-~]+)*)?\n)*")
_PARAM_VALUE = re.compile(r"[^,\s]*")

SecretOf = Callable[[str], str | None]


@value_class
class Verified:
    access_key: str
    region: str
    service: str = SERVICE  # of the credential scope: one of `verify`'s `services`


@value_class
class _Scope:
    """A signature's credential scope and signed headers: every request of a client names the
    same ones all day, so the header's are parsed once (`_header_scope`)."""

    access_key: str
    date: str  # YYYYMMDD of the scope
    region: str
    service: str
    signed_headers: tuple[str, ...]
    signed_header_list: str  # the names joined by ";", as in the canonical request
    credential_scope: str  # date/region/service/aws4_request


@value_class
class _Signed:
    """The parts of a signature, from the Authorization header or the presigned query."""

    scope: _Scope
    signature: str
    amz_date: datetime
    amz_date_text: str


def is_signed(headers: Mapping[str, str], query: Mapping[str, str]) -> bool:
    """Whether the request carries a signature to verify (else it is anonymous)."""
    return "Authorization" in headers or "X-Amz-Signature" in query or "X-Amz-Credential" in query


def access_key_of(headers: Mapping[str, str], query: Mapping[str, str]) -> str | None:
    """The access key id the request names, without checking anything."""
    credential = _header_params(headers.get("Authorization", "")).get("Credential")
    if credential is None:
        credential = query.get("X-Amz-Credential")
    return credential.split("/", 1)[0] if credential else None


def verify(
    method: str,
    raw_path: str,
    headers: Mapping[str, str],
    body: bytes,
    now: datetime,
    secret_of: SecretOf,
    services: tuple[str, ...] = (SERVICE,),
) -> Verified:
    """Check the signature of a request; `raw_path` includes the query string as sent.

    `services`: the credential scopes' services the endpoint answers for (SQS, and the
    CloudFormation and STS endpoints the gateway serves beside it)."""
    path, _, raw_query = raw_path.partition("?")
    pairs = _query_pairs(raw_query)
    presigned = "Authorization" not in headers and any(
        k in ("X-Amz-Signature", "X-Amz-Credential") for k, _ in pairs
    )
    signed = _from_query(pairs) if presigned else _from_header(headers)
    scope = signed.scope
    if scope.service not in services:
        raise SignatureDoesNotMatch(f"Credential should be scoped to correct service: '{SERVICE}'.")
    day = signed.amz_date_text[:8]  # YYYYMMDD of the request's own (ISO-8601 basic) date
    if day != scope.date:
        raise SignatureDoesNotMatch(
            "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date "
            f"from HTTP: '{scope.date}' != '{day}', from '{signed.amz_date_text}'."
        )
    secret = secret_of(scope.access_key)
    if secret is None:
        raise InvalidClientTokenId("The security token included in the request is invalid.")
    _check_time(signed, pairs, presigned, now)
    body_hash = hashlib.sha256(body).hexdigest()
    if presigned:
        pairs = [(k, v) for k, v in pairs if k != "X-Amz-Signature"]
        # botocore signs the (empty) body of a presigned URL; the S3 habit is UNSIGNED-PAYLOAD.
        payload_hashes = [body_hash, UNSIGNED_PAYLOAD]
    else:
        payload_hashes = [headers.get("x-amz-content-sha256") or body_hash]
    # Keyed by the secret too: a changed secret, or a scope of another day, region or
    # service, derives its own key.
    key = signing_key(secret, scope.date, scope.region, scope.service)
    canonical_head = "\n".join(
        [
            method.upper(),
            _canonical_path(path),
            _canonical_query(pairs) if pairs else "",
            _canonical_headers(headers, scope.signed_headers),
            scope.signed_header_list,
        ]
    )
    sign_head = f"{ALGORITHM}\n{signed.amz_date_text}\n{scope.credential_scope}\n"
    signature = signed.signature.encode()
    matched = False
    for payload_hash in payload_hashes:
        canonical = f"{canonical_head}\n{payload_hash}"
        string_to_sign = sign_head + hashlib.sha256(canonical.encode()).hexdigest()
        expected = key.sign(string_to_sign.encode())
        matched |= hmac.compare_digest(expected, signature)
    if not matched:
        raise SignatureDoesNotMatch(
            "The request signature we calculated does not match the signature you provided. "
            "Check your AWS Secret Access Key and signing method. Consult the service "
            "documentation for details."
        )
    return Verified(scope.access_key, scope.region, scope.service)


class SigningKey:
    """A derived SigV4 signing key, ready to sign: HMAC-SHA256 with its two padded-key
    hashes computed once.

    `hmac.digest` costs 2.4 µs a call here (OpenSSL 3 looks the digest up on every call);
    copying the two prepared SHA-256 states costs 1.0 µs, for the same HMAC (RFC 2104).
    """

    __slots__ = ("key", "_inner", "_outer")

    def __init__(self, key: bytes) -> None:
        self.key = key
        block = key.ljust(_SHA256_BLOCK, b"\0")  # a derived key is 32 bytes: never hashed first
        self._inner = hashlib.sha256(block.translate(_IPAD))
        self._outer = hashlib.sha256(block.translate(_OPAD))

    def sign(self, message: bytes) -> bytes:
        """HMAC-SHA256 of `message`, in lower-case hex (ASCII bytes)."""
        inner = self._inner.copy()
        inner.update(message)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.hexdigest().encode()


_SHA256_BLOCK = 64
_IPAD = bytes(b ^ 0x36 for b in range(256))
_OPAD = bytes(b ^ 0x5C for b in range(256))


@lru_cache(maxsize=256)
def signing_key(secret: str, date: str, region: str, service: str) -> SigningKey:
    key = ("AWS4" + secret).encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return SigningKey(key)


# -- the parts of a signature --------------------------------------------------------------


def _header_params(authorization: str) -> dict[str, str]:
    head, separator, signature = authorization.rpartition(", Signature=")
    if separator and signature and _PARAM_VALUE.fullmatch(signature):
        return {**_head_params(head), "Signature": signature}
    _, _, rest = authorization.partition(" ")
    return dict(_PARAM.findall(rest))


@lru_cache(maxsize=256)
def _head_params(head: str) -> dict[str, str]:
    _, _, rest = head.partition(" ")
    return dict(_PARAM.findall(rest))


@lru_cache(maxsize=256)
def _header_scope(head: str) -> _Scope | None:
    """The scope an Authorization header names before `, Signature=`, or None when it lacks
    a part or has a malformed one (`_from_header` then says which, as before).

    Only the signature changes from one request of a client to the next: the rest is parsed
    once per client and day.
    """
    if head.split(" ", 1)[0] != ALGORITHM:
        return None
    params = _head_params(head)
    credential, signed_headers = params.get("Credential"), params.get("SignedHeaders")
    if credential is None or signed_headers is None:
        return None
    try:
        return _scope(credential, signed_headers)
    except IncompleteSignature:
        return None


def _from_header(headers: Mapping[str, str]) -> _Signed:
    authorization = headers.get("Authorization", "")
    amz_date_text = headers.get("X-Amz-Date")
    head, separator, signature = authorization.rpartition(", Signature=")
    if separator and signature and amz_date_text is not None and _PARAM_VALUE.fullmatch(signature):
        scope = _header_scope(head)
        if scope is not None:  # else the checks below find what is wrong
            return _Signed(scope, signature, _parse_amz_date(amz_date_text), amz_date_text)
    algorithm = authorization.split(" ", 1)[0]
    if algorithm != ALGORITHM:
        raise IncompleteSignature(f"Unsupported AWS 'algorithm': '{algorithm}'.")
    params = _header_params(authorization)
    missing = [
        f"Authorization header requires '{name}' parameter."
        for name in ("Credential", "Signature", "SignedHeaders")
        if name not in params
    ]
    if amz_date_text is None and "Date" not in headers:
        missing.append(
            "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header."
        )
    if missing:
        raise IncompleteSignature(" ".join(missing) + f" Authorization={authorization}")
    if amz_date_text is not None:
        amz_date = _parse_amz_date(amz_date_text)
    else:
        amz_date_text = headers["Date"]
        try:
            amz_date = parsedate_to_datetime(amz_date_text).astimezone(UTC)
        except (TypeError, ValueError):
            raise IncompleteSignature(
                f"Date must be in ISO-8601 'basic format'. Got '{amz_date_text}'."
            ) from None
        amz_date_text = amz_date.strftime(_AMZ_DATE)
    scope = _scope(params["Credential"], params["SignedHeaders"])
    return _Signed(scope, params["Signature"], amz_date, amz_date_text)


def _from_query(pairs: list[tuple[str, str]]) -> _Signed:
    query = dict(pairs)
    missing = [
        f"AWS query-string parameters must include '{name}'."
        for name in (
            "X-Amz-Algorithm",
            "X-Amz-Credential",
            "X-Amz-Signature",
            "X-Amz-SignedHeaders",
            "X-Amz-Date",
        )
        if name not in query
    ]
    if missing:
        raise IncompleteSignature(" ".join(missing) + " Re-examine the query-string parameters.")
    if query["X-Amz-Algorithm"] != ALGORITHM:
        raise IncompleteSignature(f"Unsupported AWS 'algorithm': '{query['X-Amz-Algorithm']}'.")
    amz_date = _parse_amz_date(query["X-Amz-Date"])
    scope = _scope(query["X-Amz-Credential"], query["X-Amz-SignedHeaders"])
    return _Signed(scope, query["X-Amz-Signature"], amz_date, query["X-Amz-Date"])


def _scope(credential: str, signed_headers: str) -> _Scope:
    parts = credential.split("/")
    if len(parts) != 5 or parts[4] != "aws4_request" or not parts[0]:
        raise IncompleteSignature(
            f"Credential must have exactly 5 slash-delimited elements, e.g. "
            f"keyid/date/region/service/term, got '{credential}'"
        )
    names = _signed_header_names(signed_headers)
    return _Scope(
        access_key=parts[0],
        date=parts[1],
        region=parts[2],
        service=parts[3],
        signed_headers=names,
        signed_header_list=";".join(names),
        credential_scope=f"{parts[1]}/{parts[2]}/{parts[3]}/aws4_request",
    )


@lru_cache(maxsize=64)
def _signed_header_names(signed_headers: str) -> tuple[str, ...]:
    # The same few lists on every request of a client: parsed once.
    return tuple(h.strip().lower() for h in signed_headers.split(";") if h.strip())


@lru_cache(maxsize=64)
def _parse_amz_date(text: str) -> datetime:
    # By hand: strptime took a seventh of the whole verification (every request has a date).
    try:
        shape_ok = len(text) == 16 and text.isascii() and text[8] == "T" and text[15] == "Z"
        if not shape_ok or not text[:8].isdigit():
            raise ValueError(text)
        clock = text[9:15]
        if not clock.isdigit():
            raise ValueError(text)
        return datetime(
            int(text[0:4]),
            int(text[4:6]),
            int(text[6:8]),
            int(clock[0:2]),
            int(clock[2:4]),
            int(clock[4:6]),
            tzinfo=UTC,
        )
    except ValueError:
        raise IncompleteSignature(
            f"Date must be in ISO-8601 'basic format'. Got '{text}'. See "
            "http://en.wikipedia.org/wiki/ISO_8601"
        ) from None


def _check_time(
    signed: _Signed, pairs: list[tuple[str, str]], presigned: bool, now: datetime
) -> None:
    stamp = signed.amz_date_text  # as the client sent it, as in AWS's messages
    if signed.amz_date - now > MAX_SKEW:
        raise RequestExpired(
            f"Signature not yet current: {stamp} is still later than "
            f"{(now + MAX_SKEW).strftime(_AMZ_DATE)} ({now.strftime(_AMZ_DATE)} + 15 min.)"
        )
    if presigned:
        raw_expires = dict(pairs).get("X-Amz-Expires", "")
        if not raw_expires.isdigit() or not 1 <= int(raw_expires) <= MAX_PRESIGNED_EXPIRES_S:
            raise IncompleteSignature(
                "X-Amz-Expires must be an integer number of seconds from 1 to 604800."
            )
        if now > signed.amz_date + timedelta(seconds=int(raw_expires)):
            raise RequestExpired("Request has expired.")
    elif now - signed.amz_date > MAX_SKEW:
        raise RequestExpired(
            f"Signature expired: {stamp} is now earlier than "
            f"{(now - MAX_SKEW).strftime(_AMZ_DATE)} ({now.strftime(_AMZ_DATE)} - 15 min.)"
        )


# -- canonical request ---------------------------------------------------------------------


def _query_pairs(raw_query: str) -> list[tuple[str, str]]:
    pairs = []
    for part in raw_query.split("&"):
        if part:
            key, _, value = part.partition("=")
            pairs.append((unquote(key), unquote(value)))
    return pairs


def _canonical_query(pairs: list[tuple[str, str]]) -> str:
    encoded = sorted((quote(k, safe="-_.~"), quote(v, safe="-_.~")) for k, v in pairs)
    return "&".join(f"{k}={v}" for k, v in encoded)


@lru_cache(maxsize=1024)
def _canonical_path(path: str) -> str:
    if not path:
        return "/"
    normalized = posixpath.normpath(path)
    if path.endswith("/") and normalized != "/":
        normalized += "/"
    if normalized.startswith("//"):
        normalized = normalized[1:]
    return quote(normalized, safe="/~")


def _canonical_headers(headers: Mapping[str, str], names: tuple[str, ...]) -> str:
    """The canonical headers block: `name:value\n` for each signed header, in order."""
    getall = getattr(headers, "getall", None)
    if getall is None:
        return "".join([f"{name}:{_header_value(headers, name)}\n" for name in names])
    lines = []
    for name in names:
        values = getall(name, ())
        if len(values) != 1:
            break
        lines.append(f"{name}:{values[0]}\n")
    else:
        block = "".join(lines)
        # Nearly every request: each signed header sent once, its value already trimmed.
        # One match over the block instead of a check per header; a value holding a line
        # break would add a line, hence the count.
        if _TRIMMED_BLOCK.fullmatch(block) and block.count("\n") == len(names):
            return block
    return "".join([f"{name}:{_header_value(headers, name)}\n" for name in names])


def _header_value(headers: Mapping[str, str], name: str) -> str:
    getall = getattr(headers, "getall", None)
    values = getall(name, ()) if getall is not None else (headers.get(name, ""),)
    if len(values) == 1:
        return _trimmed(str(values[0]))
    return ",".join([_trimmed(str(v)) for v in values])


def _trimmed(value: str) -> str:
    """The value with its outer whitespace removed and inner runs collapsed to one space."""
    if _is_trimmed(value):
        return value  # nearly every header: nothing to collapse
    return " ".join(value.split())


def _is_trimmed(value: str) -> bool:
    """True when `_trimmed` would return `value` unchanged, by checks cheaper than a regex:
    printable ASCII has no whitespace but the space, so only runs of spaces and outer
    spaces are left to look for."""
    return (
        value.isascii()
        and value.isprintable()
        and "  " not in value
        and not value.startswith(" ")
        and not value.endswith(" ")
    )
