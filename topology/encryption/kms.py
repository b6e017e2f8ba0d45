"""Master keys in AWS KMS: data keys made by `GenerateDataKey` and unwrapped by `Decrypt`.

Chosen by `KQS_KMS_KEY_ID` (a key id, key ARN, alias name or alias ARN): the key SQS-managed
encryption uses when the gateway has no master key file, and the one `alias/aws/sqs` (SQS's
own AWS-managed key, which only SQS itself may use in AWS) stands for. A queue's
`KmsMasterKeyId` names the KMS key its data keys are made under, as in SQS's SSE-KMS.

The AWS client takes the usual AWS settings (botocore's credential and configuration chain):
`AWS_REGION` / `AWS_DEFAULT_REGION` or the profile's region, credentials from the environment,
the shared files, a web identity or the instance's role, and `AWS_ENDPOINT_URL_KMS` /
`AWS_ENDPOINT_URL` for another endpoint (a VPC endpoint, LocalStack, moto). Nothing here logs
a key or a ciphertext; errors carry KMS's code and message, which name the key, never its bytes.

KMS is asked once per queue and `KmsDataKeyReusePeriodSeconds` for a new data key, and once per
data key and opening period to unwrap one (`data_keys.py`); each call is synchronous, bounded by
the timeouts below: the gateway makes the calls of sends and receives in a thread
(`gateway/sqs/encryption.py` `ready_to_seal`, `ready_to_open`).

The envelope's master key id is `kms:` + the key's ARN as KMS answers it; the wrapped data key
is KMS's `CiphertextBlob`, decrypted with the same encryption context it was made with.
"""

from __future__ import annotations

import os
from typing import Any

from topology.encryption.envelope import DATA_KEY_BYTES, UnknownMasterKey
from topology.encryption.keys import FileKeyProvider, NewDataKey

KMS_PREFIX = "kms:"
# SQS's AWS-managed key: what a queue created with the console's default names.
SQS_MANAGED_ALIAS = "alias/aws/sqs"
# Bound into every data key (KMS checks it at Decrypt and records it in CloudTrail), so a
# KQS data key cannot be decrypted as something else's.
ENCRYPTION_CONTEXT = {"kqs:purpose": "message data key"}
CONNECT_TIMEOUT_S = 2.0
READ_TIMEOUT_S = 5.0
ATTEMPTS = 3  # botocore's standard retry mode: throttling and 5xx retried with backoff


class KmsError(Exception):
    """KMS refused or failed a call: `code` is KMS's error code (`NotFoundException`,
    `DisabledException`, `AccessDeniedException`, ...; `Unreachable` when no answer came)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class KmsKeyProvider:
    """A `KeyProvider` whose master keys are AWS KMS keys."""

    def __init__(self, default_key_id: str, client: Any) -> None:
        self._default_key_id = default_key_id
        self._client = client

    @classmethod
    def from_environment(cls, default_key_id: str) -> KmsKeyProvider:
        """A provider with a KMS client made from the usual AWS settings (see the header)."""
        try:
            import botocore.session
            from botocore.config import Config
        except ImportError:
            raise RuntimeError(
                "KQS_KMS_KEY_ID needs the AWS client library: pip install 'kqs[kms]'"
            ) from None

        session = botocore.session.get_session()
        # AWS_REGION as the other AWS SDKs read it (botocore's own chain reads
        # AWS_DEFAULT_REGION and the profile's region).
        region = os.environ.get("AWS_REGION") or None
        config = Config(
            connect_timeout=CONNECT_TIMEOUT_S,
            read_timeout=READ_TIMEOUT_S,
            retries={"total_max_attempts": ATTEMPTS, "mode": "standard"},
        )
        return cls(default_key_id, session.create_client("kms", region_name=region, config=config))

    def key_for(self, key_ref: str | None) -> str:
        """The KMS key a queue's data keys are made under."""
        if key_ref is None or key_ref == SQS_MANAGED_ALIAS:
            return self._default_key_id
        return key_ref

    def new_data_key(self, key_ref: str | None) -> NewDataKey:
        answer = self._call(
            self._client.generate_data_key,
            "GenerateDataKey",
            KeyId=self.key_for(key_ref),
            KeySpec="AES_256",
            EncryptionContext=ENCRYPTION_CONTEXT,
        )
        plaintext: bytes = answer["Plaintext"]
        if len(plaintext) != DATA_KEY_BYTES:
            raise KmsError("InvalidKeyUsage", f"a data key of {len(plaintext)} bytes")
        return NewDataKey(plaintext, KMS_PREFIX + str(answer["KeyId"]), answer["CiphertextBlob"])

    def unwrap(self, key_id: str, wrapped: bytes) -> bytes:
        if not key_id.startswith(KMS_PREFIX):
            raise UnknownMasterKey(key_id)
        answer = self._call(
            self._client.decrypt,
            "Decrypt",
            CiphertextBlob=wrapped,
            KeyId=key_id[len(KMS_PREFIX) :],
            EncryptionContext=ENCRYPTION_CONTEXT,
        )
        plaintext: bytes = answer["Plaintext"]
        return plaintext

    @staticmethod
    def _call(method: Any, operation: str, **request: Any) -> dict[str, Any]:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            answer: dict[str, Any] = method(**request)
        except ClientError as error:
            details = error.response.get("Error", {})
            code = str(details.get("Code", "KMSInternalException"))
            raise KmsError(code, str(details.get("Message", ""))) from None
        except BotoCoreError as error:
            # No answer (unreachable, timed out, no credentials): botocore's text names the
            # endpoint or the missing setting, not a secret.
            raise KmsError("Unreachable", f"{operation}: {error}") from None
        return answer


class KmsWithFileKeys:
    """A `KeyProvider` for a gateway with both: SQS-managed encryption under the master key
    file (KQS's own key, as SQS-managed encryption is under SQS's), every `KmsMasterKeyId`
    under that KMS key; each unwraps the data keys it made."""

    def __init__(self, kms: KmsKeyProvider, file: FileKeyProvider) -> None:
        self._kms = kms
        self._file = file

    def new_data_key(self, key_ref: str | None) -> NewDataKey:
        if key_ref is None:
            return self._file.new_data_key(None)
        return self._kms.new_data_key(key_ref)

    def unwrap(self, key_id: str, wrapped: bytes) -> bytes:
        if key_id.startswith(KMS_PREFIX):
            return self._kms.unwrap(key_id, wrapped)
        return self._file.unwrap(key_id, wrapped)
