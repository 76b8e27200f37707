"""rclone crypt file contents as async streams; the codec is :mod:`streamcrypt.codecs.rclone`.

Keys come as :class:`~streamcrypt.codecs.rclone.RcloneKeys` or as ``password`` (and
``password2``) in clear; their scrypt runs on a worker thread (inline only with
``policy=None``), never on the event loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from functools import partial

from ..abc import Transform
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


def _check_choice(key: RcloneKeys | None, password: str | None, password2: str) -> None:
    """Raise at the call for arguments that could only fail once iteration starts."""
    if (key is None) == (password is None):
        raise InvalidParameterError("rclone crypt takes keys= or password= (not both)")
    if password is not None and not (
        isinstance(password, str) and password and isinstance(password2, str)
    ):
        raise InvalidParameterError(
            "rclone crypt's password= must be a non-empty str (and password2= a str)"
        )


def encrypt(
    source: Source,
    key: RcloneKeys | None = None,
    *,
    password: str | None = None,
    password2: str = "",
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> AsyncIterator[bytes]:
    """Encrypt an async source as rclone crypt file contents, blocks sealed in parallel.

    The arguments are checked at the call; a password's scrypt runs when iteration starts.
    """
    _check_choice(key, password, password2)
    if key is not None:
        return stream(source, RcloneEncryptor(key), policy=policy)
    return _derived(source, RcloneEncryptor, password or "", password2, policy)


def decrypt(
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
    a file cut at a block boundary into :class:`TruncatedStreamError`. The arguments are
    checked at the call; a password's scrypt runs when iteration starts.
    """
    _check_choice(key, password, password2)
    make = partial(RcloneDecryptor, expected_size=expected_size)
    if key is not None:
        return stream(source, make(key), policy=policy)
    make(RcloneKeys.from_material(bytes(80)))  # checks expected_size now
    return _derived(source, make, password or "", password2, policy)


async def _derived(
    source: Source,
    make: Callable[[RcloneKeys], Transform],
    password: str,
    password2: str,
    policy: OffloadPolicy | None,
) -> AsyncIterator[bytes]:
    """``make``'s transform over ``source`` once the password's keys are derived."""
    derived = await keys(password, password2, policy=policy)
    async for piece in stream(source, make(derived), policy=policy):
        yield piece
