"""AWS KMS for the tests: moto's server on 127.0.0.1 (a thread of the test process, speaking
KMS's real HTTP API), its keys, and the AWS settings a gateway process reaches it with."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3

from tests.support.harness import REGION, free_port


@dataclass
class MotoKms:
    endpoint: str
    # The gateway's own AWS credentials for KMS (moto accepts any): a value to look for in logs.
    access_key: str = "kms-test-key"
    secret_key: str = field(default_factory=lambda: secrets.token_urlsafe(24))

    def client(self) -> Any:
        return boto3.session.Session().client(
            "kms",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
        )

    def new_key(self) -> str:
        """A new symmetric key's ARN."""
        arn: str = self.client().create_key(Description="kqs test")["KeyMetadata"]["Arn"]
        return arn

    def environment(self, key_id: str) -> dict[str, str]:
        """What a gateway configured for KMS is given: its key and the usual AWS settings."""
        return {
            "KQS_KMS_KEY_ID": key_id,
            "AWS_ENDPOINT_URL_KMS": self.endpoint,
            "AWS_REGION": REGION,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
        }


@contextlib.contextmanager
def moto_kms() -> Iterator[MotoKms]:
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield MotoKms(f"http://127.0.0.1:{port}")
    finally:
        server.stop()
