"""Master keys: who makes and unwraps the data keys that encrypt messages.

A `KeyProvider` makes a fresh data key for a queue (its plaintext, to encrypt with, and its
wrapped form, which travels in every envelope) and unwraps the wrapped form again. The master
key never leaves the provider. `FileKeyProvider` keeps its master keys in a local file; a
provider backed by an external KMS (AWS KMS's GenerateDataKey / Decrypt, Vault's transit
engine) implements the same two methods, with the queue's `KmsMasterKeyId` as its `key_ref`.

The master key file holds one or more keys, one per line, each 32 random bytes in base64;
blank lines and lines starting with `#` are ignored. The first key wraps new data keys; the
others still unwrap the data keys of records written before a master key rotation (add a new
first line, keep the old ones until the records they wrapped are gone).
"""

from __future__ import annotations

import base64
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from topology.encryption.envelope import DATA_KEY_BYTES, NONCE_BYTES, UnknownMasterKey

MASTER_KEY_BYTES = 32
# The master key `kqs serve` makes in its data directory with the embedded broker.
MASTER_KEY_FILE = "master.key"
# The associated data of a data key wrapped by a file master key: this prefix, then the
# master key's id (so a wrapped key cannot pass for one of another master key).
WRAP_CONTEXT = b"kqs data key:"


@dataclass(frozen=True, slots=True)
class NewDataKey:
    plaintext: bytes  # DATA_KEY_BYTES
    key_id: str  # the master key that wrapped it
    wrapped: bytes


class KeyProvider(Protocol):
    """Makes and unwraps data keys; the master keys stay inside."""

    def new_data_key(self, key_ref: str | None) -> NewDataKey:
        """A fresh data key wrapped by the master key `key_ref` names (a queue's
        KmsMasterKeyId), or by the provider's own key for `None` (SQS-managed encryption).
        Raises `UnknownMasterKey` when `key_ref` names no key the provider has."""
        ...

    def unwrap(self, key_id: str, wrapped: bytes) -> bytes:
        """The plaintext of a data key that master key `key_id` wrapped. Raises
        `UnknownMasterKey` for a key the provider does not hold, `ValueError` for a wrapped
        key that does not open."""
        ...


def key_id_of(master_key: bytes) -> str:
    """A master key's id: a fingerprint that names it in envelopes without revealing it."""
    return "file:" + hashlib.sha256(b"kqs master key id:" + master_key).hexdigest()[:16]


class FileKeyProvider:
    """Master keys from a local file (see the module header). Every `key_ref` is served by the
    file's current key: a file holds one deployment's keys, not one per KmsMasterKeyId."""

    def __init__(self, master_keys: list[bytes]) -> None:
        if not master_keys:
            raise ValueError("a master key file holds at least one key")
        for key in master_keys:
            if len(key) != MASTER_KEY_BYTES:
                raise ValueError(f"a master key is {MASTER_KEY_BYTES} bytes, not {len(key)}")
        self._current_id = key_id_of(master_keys[0])
        self._ciphers = {key_id_of(key): AESGCM(key) for key in master_keys}

    @classmethod
    def from_file(cls, path: Path) -> FileKeyProvider:
        return cls(read_master_keys(path))

    @property
    def current_key_id(self) -> str:
        return self._current_id

    def new_data_key(self, key_ref: str | None) -> NewDataKey:
        plaintext = os.urandom(DATA_KEY_BYTES)
        nonce = os.urandom(NONCE_BYTES)
        context = WRAP_CONTEXT + self._current_id.encode()
        wrapped = nonce + self._ciphers[self._current_id].encrypt(nonce, plaintext, context)
        return NewDataKey(plaintext, self._current_id, wrapped)

    def unwrap(self, key_id: str, wrapped: bytes) -> bytes:
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise UnknownMasterKey(key_id)
        nonce, sealed = wrapped[:NONCE_BYTES], wrapped[NONCE_BYTES:]
        try:
            return cipher.decrypt(nonce, sealed, WRAP_CONTEXT + key_id.encode())
        except InvalidTag as error:
            raise ValueError(f"a data key wrapped by {key_id} does not open") from error


def read_master_keys(path: Path) -> list[bytes]:
    keys = []
    for line in path.read_text().splitlines():
        text = line.strip()
        if text and not text.startswith("#"):
            keys.append(base64.b64decode(text, validate=True))
    return keys


def create_master_key_file(path: Path) -> bool:
    """Write a new master key file at `path` (mode 0600) unless one is there; True if it
    wrote one. Exclusive creation: of two processes starting at once, one writes it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    key = base64.b64encode(os.urandom(MASTER_KEY_BYTES)).decode("ascii")
    with os.fdopen(fd, "w") as out:
        out.write(
            "# KQS master key: it opens every encrypted message of this deployment. Keep a\n"
            "# copy apart from the data; without it the messages cannot be read.\n"
            f"{key}\n"
        )
        out.flush()
        os.fsync(out.fileno())
    return True
