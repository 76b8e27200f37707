"""rclone crypt file contents as async streams; the codec is :mod:`streamcrypt.codecs.rclone`.

Keys come as :class:`~streamcrypt.codecs.rclone.RcloneKeys` or as ``password`` (and
``password2``) in clear; their scrypt runs on a worker thread (inline only with
``policy=None``), never on the event loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import partial

from ..codecs.rclone import (
    RcloneDecryptor,
    RcloneEncryptor,
    RcloneKeys,
    decrypt_bytes,
    encrypt_bytes,
)
from ..engine import DEFAULT_POLICY, OffloadPolicy, Source, wait_future
from ..errors import InvalidParameterError
from ._run import stream

__all__ = ["decrypt", "decrypt_bytes", "encrypt", "encrypt_bytes", "keys"]


async def keys(
    password: str, password2: str = "", *, policy: OffloadPolicy | None = DEFAULT_POLICY
) -> RcloneKeys:
    """:meth:`RcloneKeys.from_password` off the event loop (scrypt costs ~16 MiB, ~50 ms)."""
    derive = partial(RcloneKeys.from_password, password, password2)
    return derive() if policy is None else await wait_future(policy.submit(derive))


async def _keys_of(
    key: RcloneKeys | None, password: str | None, password2: str, policy: OffloadPolicy | None
) -> RcloneKeys:
    if (key is None) == (password is None):
        raise InvalidParameterError("rclone crypt takes keys= or password= (not both)")
    return key if key is not None else await keys(password or "", password2, policy=policy)


async def encrypt(
    source: Source,
    key: RcloneKeys | None = None,
    *,
    password: str | None = None,
    password2: str = "",
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> AsyncIterator[bytes]:
    """Encrypt an async source as rclone crypt file contents, blocks sealed in parallel."""
    enc = RcloneEncryptor(await _keys_of(key, password, password2, policy))
    async for piece in stream(source, enc, policy=policy):
        yield piece


async def decrypt(
    source: Source,
    key: RcloneKeys | None = None,
    *,
    password: str | None = None,
    password2: str = "",
    expected_size: int | None = None,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> AsyncIterator[bytes]:
    """Decrypt rclone crypt contents, yielding only verified blocks.

    rclone files have no end marker: pass ``expected_size`` (the plaintext size) to turn
    a file cut at a block boundary into :class:`TruncatedStreamError`.
    """
    dec = RcloneDecryptor(
        await _keys_of(key, password, password2, policy), expected_size=expected_size
    )
    async for piece in stream(source, dec, policy=policy):
        yield piece
