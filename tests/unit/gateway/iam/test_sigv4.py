"""SigV4 verification against signatures botocore makes (header and presigned query)."""

from __future__ import annotations

import hmac
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import botocore.auth
import pytest
from botocore.auth import SigV4Auth, SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from multidict import CIMultiDict

from gateway.common.errors import (
    IncompleteSignature,
    InvalidClientTokenId,
    RequestExpired,
    SignatureDoesNotMatch,
    SqsError,
)
from gateway.iam import sigv4

SECRETS = {"AKIDEXAMPLE": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "test": "test"}
FORM = b"Action=SendMessage&MessageBody=hello%20world&Version=2012-11-05"


def secret_of(access_key: str) -> str | None:
    return SECRETS.get(access_key)


def signed(
    url: str = "http://127.0.0.1:9324/000000000000/orders",
    body: bytes = FORM,
    secret: str = SECRETS["AKIDEXAMPLE"],
    key: str = "AKIDEXAMPLE",
    service: str = "sqs",
    region: str = "eu-west-1",
    method: str = "POST",
    headers: dict[str, str] | None = None,
) -> tuple[str, str, CIMultiDict[str], bytes]:
    """(method, raw path with query, headers as received, body) of a botocore-signed request."""
    request = AWSRequest(
        method=method,
        url=url,
        data=body,
        headers=headers or {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"},
    )
    SigV4Auth(Credentials(key, secret), service, region).add_auth(request)
    return received(request)


def presigned(
    url: str, expires: int = 60, secret: str = SECRETS["test"]
) -> tuple[str, str, CIMultiDict[str], bytes]:
    request = AWSRequest(method="GET", url=url)
    SigV4QueryAuth(Credentials("test", secret), "sqs", "us-east-1", expires=expires).add_auth(
        request
    )
    return received(request)


def received(request: AWSRequest) -> tuple[str, str, CIMultiDict[str], bytes]:
    prepared = request.prepare()
    parts = urlsplit(prepared.url)
    headers: CIMultiDict[str] = CIMultiDict(prepared.headers)
    headers["Host"] = parts.netloc
    raw_path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    body = prepared.body if isinstance(prepared.body, bytes) else (prepared.body or "").encode()
    return prepared.method, raw_path, headers, body


def verify(
    request: tuple[str, str, CIMultiDict[str], bytes], now: datetime | None = None
) -> sigv4.Verified:
    method, raw_path, headers, body = request
    return sigv4.verify(method, raw_path, headers, body, now or datetime.now(UTC), secret_of)


def test_a_header_signature_of_the_right_secret_verifies_with_the_scope_region() -> None:
    assert verify(signed()) == sigv4.Verified("AKIDEXAMPLE", "eu-west-1")


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9324/",
        "http://127.0.0.1:9324",
        "http://localhost:9324/000000000000/orders?Action=ListQueues&QueueNamePrefix=a%2Fb%20c",
        "http://127.0.0.1:9324/000000000000/with%20space",
    ],
)
def test_paths_and_query_strings_canonicalize_as_botocore_signs_them(url: str) -> None:
    assert verify(signed(url)).access_key == "AKIDEXAMPLE"


def test_a_json_request_verifies() -> None:
    request = signed(
        "http://127.0.0.1:9324/",
        body=b'{"QueueName": "orders"}',
        headers={
            "Content-Type": "application/x-amz-json-1.0",
            "X-Amz-Target": "AmazonSQS.CreateQueue",
        },
    )
    assert verify(request).access_key == "AKIDEXAMPLE"


@pytest.mark.parametrize(
    "value",
    ["plain", "", "  padded  ", "inner   runs  of spaces", "tab\tinside", "ünicode"],
)
def test_a_signed_header_verifies_whatever_trimming_its_value_needs(value: str) -> None:
    # SigV4 signs each header value trimmed, runs of spaces collapsed: the block of header
    # lines is taken as received only when no value needs that.
    request = signed(
        headers={
            "Content-Type": "application/x-www-form-urlencoded; charset=utf-8",
            "X-Custom": value,
        }
    )
    assert "x-custom" in request[2]["Authorization"]

    assert verify(request).access_key == "AKIDEXAMPLE"


def test_a_header_sent_twice_verifies_with_its_values_joined() -> None:
    method, raw_path, headers, body = signed(
        headers={
            "Content-Type": "application/x-www-form-urlencoded; charset=utf-8",
            "X-Custom": "one,two",
        }
    )
    # As received when the client sends the header twice: botocore signed the values joined.
    del headers["X-Custom"]
    headers.add("X-Custom", "one")
    headers.add("X-Custom", "two")

    assert verify((method, raw_path, headers, body)).access_key == "AKIDEXAMPLE"


def test_a_wrong_secret_does_not_match() -> None:
    with pytest.raises(SignatureDoesNotMatch) as excinfo:
        verify(signed(secret="not-the-secret"))
    assert excinfo.value.message.startswith(
        "The request signature we calculated does not match the signature you provided."
    )
    assert (excinfo.value.code, excinfo.value.http_status) == ("SignatureDoesNotMatch", 403)


def test_a_changed_body_does_not_match() -> None:
    method, raw_path, headers, _ = signed()
    with pytest.raises(SignatureDoesNotMatch):
        verify((method, raw_path, headers, FORM.replace(b"hello", b"HELLO")))


def test_an_unknown_access_key_is_an_invalid_client_token_id() -> None:
    with pytest.raises(InvalidClientTokenId) as excinfo:
        verify(signed(key="AKIDNOBODY"))
    assert excinfo.value.message == "The security token included in the request is invalid."
    assert excinfo.value.http_status == 403


def test_a_scope_for_another_service_does_not_match() -> None:
    with pytest.raises(SignatureDoesNotMatch, match="scoped to correct service: 'sqs'"):
        verify(signed(service="sns"))


@pytest.mark.parametrize("skew", [timedelta(minutes=16), timedelta(minutes=-16)])
def test_a_signature_more_than_15_minutes_off_is_expired(skew: timedelta) -> None:
    request = signed()
    with pytest.raises(RequestExpired) as excinfo:
        verify(request, now=datetime.now(UTC) + skew)
    assert (excinfo.value.code, excinfo.value.http_status) == ("RequestExpired", 400)


def test_a_signature_14_minutes_old_still_verifies() -> None:
    assert verify(signed(), now=datetime.now(UTC) + timedelta(minutes=14)).region == "eu-west-1"


@pytest.mark.parametrize(
    ("authorization", "complaint"),
    [
        (
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20240101/us-east-1/sqs/aws4_request, SignedHeaders=host",
            "requires 'Signature'",
        ),
        ("AWS4-HMAC-SHA256 SignedHeaders=host, Signature=abc", "requires 'Credential'"),
        ("AWS AKIDEXAMPLE:c2lnbmF0dXJl", "Unsupported AWS 'algorithm'"),
        (
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20240101/sqs/aws4_request, SignedHeaders=host, Signature=abc",
            "5 slash-delimited",
        ),
    ],
)
def test_an_incomplete_authorization_header(authorization: str, complaint: str) -> None:
    headers: CIMultiDict[str] = CIMultiDict(
        {
            "Host": "127.0.0.1",
            "X-Amz-Date": datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ"),
            "Authorization": authorization,
        }
    )
    with pytest.raises(IncompleteSignature, match=complaint) as excinfo:
        verify(("POST", "/", headers, b""))
    assert excinfo.value.http_status == 400


def test_a_signature_without_a_date_header_is_incomplete() -> None:
    method, raw_path, headers, body = signed()
    del headers["X-Amz-Date"]
    with pytest.raises(IncompleteSignature, match="'X-Amz-Date' or a 'Date'"):
        verify((method, raw_path, headers, body))


def test_a_presigned_url_verifies() -> None:
    url = "http://127.0.0.1:9324/000000000000/orders?Action=ReceiveMessage&Version=2012-11-05"
    assert verify(presigned(url)).access_key == "test"


def test_a_presigned_url_with_a_wrong_secret_does_not_match() -> None:
    with pytest.raises(SignatureDoesNotMatch):
        verify(presigned("http://127.0.0.1:9324/?Action=ListQueues", secret="wrong"))


def test_a_presigned_url_with_a_changed_parameter_does_not_match() -> None:
    method, raw_path, headers, body = presigned(
        "http://127.0.0.1:9324/?Action=ListQueues&QueueNamePrefix=a"
    )
    with pytest.raises(SignatureDoesNotMatch):
        verify((method, raw_path.replace("QueueNamePrefix=a", "QueueNamePrefix=b"), headers, body))


def test_a_presigned_url_past_its_expiry_is_expired() -> None:
    request = presigned("http://127.0.0.1:9324/?Action=ListQueues", expires=30)
    assert verify(request, now=datetime.now(UTC) + timedelta(seconds=20)).access_key == "test"
    with pytest.raises(RequestExpired, match="Request has expired"):
        verify(request, now=datetime.now(UTC) + timedelta(seconds=40))


def test_a_presigned_url_without_its_signature_parts_is_incomplete() -> None:
    method, raw_path, headers, body = presigned("http://127.0.0.1:9324/?Action=ListQueues")
    without_date = "&".join(p for p in raw_path.split("&") if not p.startswith("X-Amz-Date"))
    with pytest.raises(IncompleteSignature, match="X-Amz-Date"):
        verify((method, without_date, headers, body))


def test_signing_keys_are_derived_once_per_scope() -> None:
    sigv4.signing_key.cache_clear()
    request = signed()
    verify(request)
    verify(request)
    info = sigv4.signing_key.cache_info()
    assert (info.misses, info.hits) == (1, 1)


def test_errors_are_sqs_errors_with_sender_fault() -> None:
    for error in (
        IncompleteSignature("x"),
        InvalidClientTokenId("x"),
        RequestExpired("x"),
        SignatureDoesNotMatch("x"),
    ):
        assert isinstance(error, SqsError) and error.sender_fault


def test_a_presigned_url_without_its_signature_is_incomplete() -> None:
    method, raw_path, headers, body = presigned("http://127.0.0.1:9324/?Action=ListQueues")
    unsigned = "&".join(p for p in raw_path.split("&") if not p.startswith("X-Amz-Signature"))
    with pytest.raises(IncompleteSignature, match="X-Amz-Signature"):
        verify((method, unsigned, headers, body))


@pytest.mark.parametrize(
    "amz_date",
    [
        "2024-01-01T00:00:00Z",
        "20240101T000000",
        "20241301T000000Z",
        "20240101T2500000",
        "2024０101T000000Z",
        "",
    ],
)
def test_an_x_amz_date_not_in_basic_format_is_incomplete(amz_date: str) -> None:
    method, raw_path, headers, body = signed()
    headers["X-Amz-Date"] = amz_date
    with pytest.raises(IncompleteSignature, match="ISO-8601 'basic format'"):
        verify((method, raw_path, headers, body))


def test_an_x_amz_date_in_basic_format_is_read_as_utc() -> None:
    assert sigv4._parse_amz_date("20241122T093015Z") == datetime(
        2024, 11, 22, 9, 30, 15, tzinfo=UTC
    )


def test_a_cached_signing_key_does_not_verify_a_request_signed_with_another_secret() -> None:
    # Given a scope whose key is cached for the current secret
    request = signed()
    method, raw_path, headers, body = request
    verify(request)
    rotated = {"AKIDEXAMPLE": "the-rotated-secret"}.get
    # When the secret changes, or a request comes signed with another one
    # Then neither verifies
    with pytest.raises(SignatureDoesNotMatch):
        sigv4.verify(method, raw_path, headers, body, datetime.now(UTC), rotated)
    with pytest.raises(SignatureDoesNotMatch):
        verify(signed(secret="not-the-secret"))
    assert verify(request).access_key == "AKIDEXAMPLE"


class _SignsWithTodaysKey(SigV4Auth):  # type: ignore[misc]  # botocore is untyped
    """Signs with the key derived for the day the test runs, whatever the request's date:
    a request that only a key cached for the wrong day would accept."""

    def signature(self, string_to_sign: str, request: AWSRequest) -> str:
        today = datetime.now(UTC).strftime("%Y%m%d")
        key = sigv4.signing_key(SECRETS["test"], today, "us-east-1", "sqs").key
        return hmac.new(key, string_to_sign.encode(), "sha256").hexdigest()


def test_a_cached_signing_key_does_not_verify_a_signature_for_another_day(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given today's key, cached by a request of today
    verify(signed(key="test", secret=SECRETS["test"], region="us-east-1"))
    # When a request dated tomorrow is signed with today's key
    tomorrow = datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: tomorrow)
    request = AWSRequest(
        method="POST",
        url="http://127.0.0.1:9324/",
        data=FORM,
        headers={"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"},
    )
    _SignsWithTodaysKey(Credentials("test", SECRETS["test"]), "sqs", "us-east-1").add_auth(request)
    # Then it does not verify: tomorrow's scope derives tomorrow's key
    with pytest.raises(SignatureDoesNotMatch, match="does not match the signature you provided"):
        verify(received(request), now=tomorrow)


@pytest.mark.parametrize("secret", ["test", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"])
def test_a_prepared_signing_key_signs_as_hmac_sha256(secret: str) -> None:
    key = sigv4.signing_key(secret, "20261126", "us-east-1", "sqs")
    for message in (b"", b"x", b"AWS4-HMAC-SHA256\n" * 40):
        assert key.sign(message) == hmac.digest(key.key, message, "sha256").hex().encode()
