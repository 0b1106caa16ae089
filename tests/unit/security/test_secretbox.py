"""Tests of `worker.security.secretbox`: Fernet encryption of Redis-held secrets, with key
rotation."""

from __future__ import annotations

import pytest
import redis
from redis.asyncio import Redis

from worker.security.secretbox import KEYS_VARIABLE, EncryptedStore, SecretBox, SecretBoxError

TOKEN = "ghs_installationtoken1234567890abcdef"


def test_round_trip_and_ciphertext_hides_the_value() -> None:
    box = SecretBox([SecretBox.generate_key()])
    sealed = box.encrypt(TOKEN)
    assert TOKEN.encode() not in sealed and sealed != box.encrypt(TOKEN)  # random IV
    assert box.decrypt(sealed) == TOKEN.encode()


def test_tampering_is_refused() -> None:
    box = SecretBox([SecretBox.generate_key()])
    sealed = bytearray(box.encrypt(TOKEN))
    sealed[40] ^= 1
    with pytest.raises(SecretBoxError, match="cannot decrypt"):
        box.decrypt(bytes(sealed))


def test_rotation_old_key_still_decrypts_then_rotate_moves_to_new() -> None:
    old, new = SecretBox.generate_key(), SecretBox.generate_key()
    sealed_old = SecretBox([old]).encrypt(TOKEN)
    rotated_box = SecretBox([new, old])
    assert rotated_box.decrypt(sealed_old) == TOKEN.encode()
    moved = rotated_box.rotate(sealed_old)
    assert SecretBox([new]).decrypt(moved) == TOKEN.encode()
    with pytest.raises(SecretBoxError):
        SecretBox([new]).decrypt(sealed_old)  # once the old key is dropped


def test_from_env_and_errors_never_show_a_key() -> None:
    assert SecretBox.from_env({}) is None
    assert SecretBox.from_env({KEYS_VARIABLE: "  "}) is None
    key = SecretBox.generate_key()
    box = SecretBox.from_env({KEYS_VARIABLE: f"{key}, {SecretBox.generate_key()}"})
    assert box is not None and box.key_count == 2 and key not in repr(box)
    with pytest.raises(SecretBoxError, match=f"key 2 of {KEYS_VARIABLE} is not a Fernet key") \
            as info:
        SecretBox.from_env({KEYS_VARIABLE: f"{key},not-a-key-but-secret"})
    assert "not-a-key-but-secret" not in str(info.value) and key not in str(info.value)
    with pytest.raises(SecretBoxError, match="holds no key"):
        SecretBox([])


async def test_store_in_real_redis_is_encrypted_and_rotates(redis_url: str) -> None:
    old, new = SecretBox.generate_key(), SecretBox.generate_key()
    client = Redis.from_url(redis_url)
    raw = redis.Redis.from_url(redis_url)
    try:
        await EncryptedStore(client, SecretBox([old])).put("token:7", TOKEN, ttl_s=600)
        stored = raw.get("llmgate:secret:token:7")
        assert stored is not None and TOKEN.encode() not in stored
        assert 0 < raw.pttl("llmgate:secret:token:7") <= 600_000
        store = EncryptedStore(client, SecretBox([new, old]))
        assert await store.get("token:7") == TOKEN
        assert await store.rotate_all() == 1
        assert 0 < raw.pttl("llmgate:secret:token:7") <= 600_000  # the TTL survives rotation
        only_new = EncryptedStore(client, SecretBox([new]))
        assert await only_new.get("token:7") == TOKEN
        assert await EncryptedStore(client, SecretBox([old])).get("token:7") is None
        assert raw.exists("llmgate:secret:token:7") == 0  # undecryptable values are dropped
        assert await only_new.get("missing") is None
        with pytest.raises(ValueError, match="ttl_s"):
            await only_new.put("x", "y", ttl_s=0)
    finally:
        await client.aclose()
        raw.close()
