"""Encrypt the secrets llmgate keeps in Redis, with keys from the environment that can rotate.

Anything secret a worker stores in Redis (an installation token shared between workers, a
per-installation secret) goes through `EncryptedStore`, so a Redis dump, a replica or a
``MONITOR`` session shows only ciphertext. Cipher: cryptography's Fernet (AES-128-CBC with
PKCS7 padding, authenticated by HMAC-SHA256, with a creation timestamp; spec:
github.com/fernet/spec), so a tampered or truncated value is refused, never half-decrypted.

Keys: ``LLMGATE_ENCRYPTION_KEYS``, one or more Fernet keys (32 random bytes, URL-safe base64,
44 characters) separated by commas. The first encrypts; all of them decrypt (``MultiFernet``).
Rotation: put a new key first, keep the old ones after it, restart the workers, run
`EncryptedStore.rotate_all` (re-encrypts every stored value under the first key), then drop
the old keys. A value no configured key can open is treated as absent and deleted, so a lost
key costs a fresh token mint, not an outage. Make a key with
``python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from redis.asyncio import Redis

log = logging.getLogger(__name__)

#: The environment variable holding the comma-separated Fernet keys, newest first.
KEYS_VARIABLE = "LLMGATE_ENCRYPTION_KEYS"
#: Redis key prefix of `EncryptedStore` values.
STORE_PREFIX = "llmgate:secret:"
#: Keys fetched per ``SCAN`` step by `EncryptedStore.rotate_all`.
SCAN_COUNT = 200


class SecretBoxError(ValueError):
    """Keys are missing or malformed, or a value cannot be decrypted; never shows a key."""


class SecretBox:
    """Fernet encryption under a list of keys: the first encrypts, every one decrypts."""

    def __init__(self, keys: Sequence[str | bytes]) -> None:
        """Check and load ``keys`` (newest first).

        Raises:
            SecretBoxError: no key, or a key that is not 32 bytes of URL-safe base64; the
                message names the key's position, never its value.
        """
        if not keys:
            raise SecretBoxError(f"{KEYS_VARIABLE} holds no key; make one with "
                                 "Fernet.generate_key() (see worker/security/secretbox.py)")
        fernets = []
        for position, key in enumerate(keys, start=1):
            try:
                fernets.append(Fernet(key.strip()))
            except (ValueError, TypeError):
                raise SecretBoxError(
                    f"key {position} of {KEYS_VARIABLE} is not a Fernet key (32 bytes of "
                    "URL-safe base64, 44 characters)") from None
        self._multi = MultiFernet(fernets)
        self.key_count = len(fernets)

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> SecretBox | None:
        """Return a box for ``LLMGATE_ENCRYPTION_KEYS``, or None when it is unset or empty.

        Raises:
            SecretBoxError: the variable is set but a key in it is malformed.
        """
        raw = environ.get(KEYS_VARIABLE, "").strip()
        if not raw:
            return None
        return cls([part for part in raw.split(",") if part.strip()])

    @staticmethod
    def generate_key() -> str:
        """Return a fresh random Fernet key as text."""
        return Fernet.generate_key().decode("ascii")

    def __repr__(self) -> str:
        """Show how many keys there are, never the keys."""
        return f"SecretBox({self.key_count} key(s))"

    def encrypt(self, plaintext: str | bytes) -> bytes:
        """Return the Fernet token of ``plaintext`` (UTF-8 for text) under the first key."""
        data = plaintext.encode("utf-8") if isinstance(plaintext, str) else plaintext
        return self._multi.encrypt(data)

    def decrypt(self, token: bytes, *, ttl_s: int | None = None) -> bytes:
        """Return the plaintext of ``token``.

        Args:
            token: a Fernet token made by any configured key.
            ttl_s: refuse tokens older than this many seconds (None: any age).

        Raises:
            SecretBoxError: no configured key opens it, it was tampered with, or it is too old.
        """
        try:
            return self._multi.decrypt(token, ttl=ttl_s)
        except InvalidToken:
            raise SecretBoxError("cannot decrypt: tampered, too old, or made with a key that is "
                                 f"no longer in {KEYS_VARIABLE}") from None

    def rotate(self, token: bytes) -> bytes:
        """Re-encrypt ``token`` under the first key, keeping its original timestamp.

        Raises:
            SecretBoxError: as for `decrypt`.
        """
        try:
            return self._multi.rotate(token)
        except InvalidToken:
            raise SecretBoxError("cannot rotate: no configured key opens this value") from None


class EncryptedStore:
    """Secret strings in Redis under ``STORE_PREFIX``, encrypted with a `SecretBox`."""

    def __init__(self, redis: Redis, box: SecretBox, prefix: str = STORE_PREFIX) -> None:
        """Store under ``prefix + name`` in ``redis``."""
        self._redis = redis
        self._box = box
        self._prefix = prefix

    async def put(self, name: str, value: str, ttl_s: float) -> None:
        """Store ``value`` encrypted for ``ttl_s`` seconds (rounded up to whole ms).

        Raises:
            ValueError: ``ttl_s`` is not positive.
        """
        if not ttl_s > 0:
            raise ValueError(f"ttl_s must be > 0 seconds, got {ttl_s!r}")
        await self._redis.set(self._prefix + name, self._box.encrypt(value),
                              px=max(1, int(ttl_s * 1000 + 0.999)))

    async def get(self, name: str) -> str | None:
        """Return the decrypted value, or None when absent or no configured key opens it.

        A value that cannot be decrypted is deleted (and a warning logged without it).
        """
        token = await self._redis.get(self._prefix + name)
        if token is None:
            return None
        try:
            return self._box.decrypt(token).decode("utf-8")
        except (SecretBoxError, UnicodeDecodeError):
            log.warning("stored secret %r cannot be decrypted with the configured keys; "
                        "dropping it", name)
            await self._redis.delete(self._prefix + name)
            return None

    async def delete(self, name: str) -> None:
        """Remove a stored value (absent is fine)."""
        await self._redis.delete(self._prefix + name)

    async def rotate_all(self) -> int:
        """Re-encrypt every stored value under the first key, keeping each TTL.

        Values no key opens are deleted. Returns the number of values re-encrypted.
        """
        rotated = 0
        async for key in self._redis.scan_iter(match=self._prefix + "*", count=SCAN_COUNT):
            token, ttl_ms = await self._redis.get(key), await self._redis.pttl(key)
            if token is None or ttl_ms == -2:
                continue
            try:
                fresh = self._box.rotate(token)
            except SecretBoxError:
                await self._redis.delete(key)
                continue
            if ttl_ms > 0:
                await self._redis.set(key, fresh, px=ttl_ms, xx=True)
            else:
                await self._redis.set(key, fresh, keepttl=True, xx=True)
            rotated += 1
        return rotated
