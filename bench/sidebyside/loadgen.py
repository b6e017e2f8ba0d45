"""The load generator: an asyncio SQS client speaking AWS JSON 1.0 over one aiohttp connection
pool, every request signed with AWS Signature Version 4 (access key `test`, secret `test`,
us-east-1), plus per-action latency recording.

The signer is the SigV4 algorithm written out (`sign_headers`), with the daily signing key
cached; `check_signer()` compares it with botocore's SigV4Auth on the same request so the two
cannot drift apart.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import json
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import aiohttp

ACCESS_KEY = "test"
SECRET_KEY = "test"
REGION = "us-east-1"
SERVICE = "sqs"
CONTENT_TYPE = "application/x-amz-json-1.0"
_SIGNED = "content-type;host;x-amz-date;x-amz-target"


class Signer:
    def __init__(self, access_key: str = ACCESS_KEY, secret_key: str = SECRET_KEY) -> None:
        self.access_key = access_key
        self.secret_key = secret_key
        self._keys: dict[str, bytes] = {}

    def _key(self, day: str) -> bytes:
        key = self._keys.get(day)
        if key is None:
            k = hmac.new(("AWS4" + self.secret_key).encode(), day.encode(), hashlib.sha256).digest()
            for part in (REGION, SERVICE, "aws4_request"):
                k = hmac.new(k, part.encode(), hashlib.sha256).digest()
            self._keys[day] = key = k
        return key

    def sign_headers(
        self, host: str, target: str, payload: bytes, now: datetime.datetime | None = None
    ) -> dict[str, str]:
        now = now or datetime.datetime.now(datetime.UTC)
        amz_date = now.strftime("%Y%m%dT%H%M%SZ")
        day = amz_date[:8]
        canonical = (
            f"POST\n/\n\ncontent-type:{CONTENT_TYPE}\nhost:{host}\nx-amz-date:{amz_date}\n"
            f"x-amz-target:{target}\n\n{_SIGNED}\n{hashlib.sha256(payload).hexdigest()}"
        )
        scope = f"{day}/{REGION}/{SERVICE}/aws4_request"
        to_sign = (
            f"AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n"
            f"{hashlib.sha256(canonical.encode()).hexdigest()}"
        )
        signature = hmac.new(self._key(day), to_sign.encode(), hashlib.sha256).hexdigest()
        return {
            "Content-Type": CONTENT_TYPE,
            "Host": host,
            "X-Amz-Date": amz_date,
            "X-Amz-Target": target,
            "Authorization": (
                f"AWS4-HMAC-SHA256 Credential={self.access_key}/{scope}, "
                f"SignedHeaders={_SIGNED}, Signature={signature}"
            ),
        }


def check_signer() -> None:
    """Raise if our signature differs from botocore's for the same request."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    payload = b'{"QueueName":"x"}'
    request = AWSRequest(
        method="POST",
        url="http://127.0.0.1:9324/",
        data=payload,
        headers={"Content-Type": CONTENT_TYPE, "X-Amz-Target": "AmazonSQS.CreateQueue"},
    )
    SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), SERVICE, REGION).add_auth(request)
    when = datetime.datetime.strptime(request.headers["X-Amz-Date"] + "+0000", "%Y%m%dT%H%M%SZ%z")
    ours = Signer().sign_headers("127.0.0.1:9324", "AmazonSQS.CreateQueue", payload, when)
    theirs = request.headers["Authorization"]
    if theirs.split("Signature=")[1] != ours["Authorization"].split("Signature=")[1]:
        raise AssertionError(f"SigV4 mismatch:\n ours   {ours['Authorization']}\n boto {theirs}")


@dataclass
class Stats:
    """Latencies (ms) and error counts per action, shared by all tasks of one run."""

    latencies_ms: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    error_samples: list[str] = field(default_factory=list)


class SqsError(Exception):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body[:300]}")
        self.status = status


class Client:
    """One pool of HTTP connections; `call` signs, posts, times and decodes one SQS action."""

    def __init__(self, endpoint: str, pool: int, stats: Stats | None = None) -> None:
        self.endpoint = endpoint.rstrip("/") + "/"
        self.host = endpoint.split("://", 1)[1].rstrip("/")
        self.stats = stats or Stats()
        self.signer = Signer()
        self._pool = pool
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Client:
        connector = aiohttp.TCPConnector(limit=self._pool, limit_per_host=self._pool)
        self._session = aiohttp.ClientSession(
            connector=connector, timeout=aiohttp.ClientTimeout(total=60)
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    async def call(self, action: str, body: dict[str, Any], record: bool = True) -> dict[str, Any]:
        assert self._session is not None
        payload = json.dumps(body, separators=(",", ":")).encode()
        headers = self.signer.sign_headers(self.host, "AmazonSQS." + action, payload)
        began = time.perf_counter()
        try:
            async with self._session.post(self.endpoint, data=payload, headers=headers) as resp:
                raw = await resp.read()
                status = resp.status
        except (TimeoutError, aiohttp.ClientError) as exc:
            self.stats.errors[action] += 1
            if len(self.stats.error_samples) < 5:
                self.stats.error_samples.append(f"{action}: {exc!r}")
            raise
        elapsed_ms = (time.perf_counter() - began) * 1000
        if status != 200:
            self.stats.errors[action] += 1
            text = raw.decode(errors="replace")
            if len(self.stats.error_samples) < 5:
                self.stats.error_samples.append(f"{action}: HTTP {status} {text[:200]}")
            raise SqsError(status, text)
        if record:
            self.stats.latencies_ms[action].append(elapsed_ms)
        result: dict[str, Any] = json.loads(raw) if raw else {}
        return result

    async def create_queue(self, name: str, attributes: dict[str, str] | None = None) -> str:
        body: dict[str, Any] = {"QueueName": name}
        if attributes:
            body["Attributes"] = attributes
        result = await self.call("CreateQueue", body, record=False)
        return str(result["QueueUrl"])

    async def count(self, url: str) -> tuple[int, int]:
        """ApproximateNumberOfMessages and ...NotVisible."""
        result = await self.call(
            "GetQueueAttributes",
            {
                "QueueUrl": url,
                "AttributeNames": [
                    "ApproximateNumberOfMessages",
                    "ApproximateNumberOfMessagesNotVisible",
                ],
            },
            record=False,
        )
        attrs = result.get("Attributes", {})
        return int(attrs.get("ApproximateNumberOfMessages", 0)), int(
            attrs.get("ApproximateNumberOfMessagesNotVisible", 0)
        )


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]
