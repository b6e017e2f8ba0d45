"""Data keys: one current key per queue, rotated on its reuse period, and the keys of the
envelopes read, unwrapped once each per `OPEN_CACHE_S`.

As in SQS, a queue's data key is reused for `KmsDataKeyReusePeriodSeconds` (60 s to 24 h,
300 s by default), so the key provider (an external KMS is a network call) is asked once per
period and queue rather than per message. A key is also retired after `MAX_USES_PER_KEY`
envelopes: random 96-bit nonces stay safe under one AES-GCM key for 2^32 uses (NIST SP
800-38D), and a busy queue with a day-long period could come near that.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from lease_store.clock import Clock
from topology.encryption import envelope
from topology.encryption.keys import KeyProvider, NewDataKey

DEFAULT_REUSE_S = 300
MAX_USES_PER_KEY = 1 << 30
# Unwrapped keys kept for opening: one per queue and reuse period in the retained messages of
# the busiest queues; each costs ~1 KB. A miss costs one unwrap (a KMS call for KMS keys).
OPEN_CACHE_KEYS = 4096
# ... and for this long at most, as SQS keeps a data key it decrypted for the reuse period: a
# master key disabled or revoked in the KMS stops opening messages within this time.
OPEN_CACHE_S = DEFAULT_REUSE_S


@dataclass(slots=True)
class DataKey:
    """A data key in use for sealing: its cipher, and the envelope headers made with it."""

    cipher: AESGCM
    body_head: bytes
    attributes_head: bytes
    created_ms: int
    uses: int = 0


class DataKeys:
    """The data keys of one process (the gateway, or a Kafka-native reader's deserializer)."""

    def __init__(self, provider: KeyProvider, clock: Clock) -> None:
        self._provider = provider
        self._clock = clock
        self._current: dict[tuple[str, str | None], DataKey] = {}
        # (master key id, wrapped key) -> (its cipher, when it was unwrapped or made, in ms)
        self._opened: OrderedDict[tuple[str, bytes], tuple[AESGCM, int]] = OrderedDict()

    @property
    def provider(self) -> KeyProvider:
        return self._provider

    def for_sealing(self, scope: str, key_ref: str | None, reuse_s: int) -> DataKey:
        """The data key a queue (`scope`) seals with now: a new one once the current is
        `reuse_s` old or used up. `key_ref`: the queue's KmsMasterKeyId, None for SQS-managed."""
        key = self._current.get((scope, key_ref))
        if key is None or self.sealing_due(scope, key_ref, reuse_s):
            key = self.install(scope, key_ref, self._provider.new_data_key(key_ref))
        return key

    def sealing_due(self, scope: str, key_ref: str | None, reuse_s: int) -> bool:
        """Whether `for_sealing` would ask the provider for a new data key now."""
        key = self._current.get((scope, key_ref))
        return (
            key is None
            or self._clock.now_ms() - key.created_ms >= reuse_s * 1000
            or key.uses >= MAX_USES_PER_KEY
        )

    def install(self, scope: str, key_ref: str | None, new: NewDataKey) -> DataKey:
        """Make `new` (from the provider, asked by the caller: a KMS call may be made off the
        event loop) the queue's current data key."""
        cipher = AESGCM(new.plaintext)
        key = DataKey(
            cipher,
            envelope.header(envelope.PURPOSE_BODY, new.key_id, new.wrapped),
            envelope.header(envelope.PURPOSE_ATTRIBUTES, new.key_id, new.wrapped),
            self._clock.now_ms(),
        )
        self._current[(scope, key_ref)] = key
        self._remember((new.key_id, new.wrapped), cipher)  # its own envelopes open at once
        return key

    def opening_due(self, sealed: bytes) -> tuple[str, bytes] | None:
        """(master key id, wrapped key) of an envelope whose data key `open` would unwrap
        now (not held, or held longer than `OPEN_CACHE_S`); None when held, or no envelope."""
        try:
            _, key_id, wrapped, _ = envelope.parse(sealed)
        except envelope.EnvelopeError:
            return None  # `open` says what is wrong with it
        cached = self._opened.get((key_id, wrapped))
        if cached is not None and self._clock.now_ms() - cached[1] < OPEN_CACHE_S * 1000:
            return None
        return key_id, wrapped

    def remember_unwrapped(self, key_id: str, wrapped: bytes, plaintext: bytes) -> None:
        """Hold a data key the caller unwrapped with the provider (off the event loop)."""
        self._remember((key_id, wrapped), AESGCM(plaintext))

    def seal(self, key: DataKey, purpose: bytes, plaintext: bytes) -> bytes:
        key.uses += 1
        head = key.body_head if purpose == envelope.PURPOSE_BODY else key.attributes_head
        return envelope.seal(head, key.cipher, plaintext)

    def open(self, sealed: bytes, purpose: bytes) -> bytes:
        """The plaintext of an envelope; raises `EnvelopeError` (`UnknownMasterKey` for a
        master key the provider does not hold)."""
        found, key_id, wrapped, nonce_at = envelope.parse(sealed)
        if found != purpose:
            raise envelope.EnvelopeError(f"an envelope of purpose {found!r}, not {purpose!r}")
        cached = self._opened.get((key_id, wrapped))
        if cached is not None and self._clock.now_ms() - cached[1] < OPEN_CACHE_S * 1000:
            self._opened.move_to_end((key_id, wrapped))
            cipher = cached[0]
        else:
            try:
                plaintext = self._provider.unwrap(key_id, wrapped)
            except envelope.UnknownMasterKey:
                raise
            except ValueError as error:
                raise envelope.EnvelopeError(str(error)) from error
            cipher = AESGCM(plaintext)
            self._remember((key_id, wrapped), cipher)
        return envelope.open_with(sealed, nonce_at, cipher)

    def _remember(self, wrapped: tuple[str, bytes], cipher: AESGCM) -> None:
        self._opened[wrapped] = (cipher, self._clock.now_ms())
        self._opened.move_to_end(wrapped)
        if len(self._opened) > OPEN_CACHE_KEYS:
            self._opened.popitem(last=False)
