"""rclone crypt file contents as async streams; the codec is :mod:`streamcrypt.codecs.rclone`.

Keys come as :class:`~streamcrypt.codecs.rclone.RcloneKeys` or as ``password`` (and
``password2``) in clear; their scrypt runs on a worker thread (inline only with
``policy=None``), never on the event loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from functools import partial

from ..abc import Buffer
from ..codecs import FormatOptions, SegmentedFormat
from ..codecs.rclone import FORMAT, RcloneKeys
from ..engine import DEFAULT_POLICY, OffloadPolicy, Source, wait_future
from ..errors import InvalidParameterError
from . import run as _run

__all__ = ["decrypt", "decrypt_bytes", "encrypt", "encrypt_bytes", "keys"]

_Runner = Callable[
    [SegmentedFormat, Source, FormatOptions, OffloadPolicy | None], AsyncIterator[bytes]
]


async def keys(
    password: str, password2: str = "", *, policy: OffloadPolicy | None = DEFAULT_POLICY
) -> RcloneKeys:
    """:meth:`RcloneKeys.from_password` off the event loop (scrypt costs ~16 MiB, ~50 ms)."""
    derive = partial(RcloneKeys.from_password, password, password2)
    return derive() if policy is None else await wait_future(policy.submit(derive))


def _options(
    key: RcloneKeys | None, password: str | None, password2: str, **extra: object
) -> FormatOptions:
    """The options, checked at the call for what could otherwise fail only once
    iteration starts."""
    if (key is None) == (password is None):
        raise InvalidParameterError("rclone crypt takes keys= or password= (not both)")
    if password is not None and not (
        isinstance(password, str) and password and isinstance(password2, str)
    ):
        raise InvalidParameterError(
            "rclone crypt's password= must be a non-empty str (and password2= a str)"
        )
    return FormatOptions(key=key, password=password, password2=password2, extra=extra)


def _run_keyed(
    run: _Runner, source: Source, options: FormatOptions, policy: OffloadPolicy | None
) -> AsyncIterator[bytes]:
    """``run`` over ``source``: at once with keys, else once the password's keys are
    derived off the event loop (the other options are checked now, on stand-in keys)."""
    if options.key is not None:
        return run(FORMAT, source, options, policy)
    stand_in = replace(options, key=RcloneKeys.from_material(bytes(80)), password=None)
    run(FORMAT, b"", stand_in, None)  # raises for bad options now; never iterated
    return _derived(run, source, options, policy)


async def _derived(
    run: _Runner, source: Source, options: FormatOptions, policy: OffloadPolicy | None
) -> AsyncIterator[bytes]:
    derived = await keys(options.password or "", options.password2, policy=policy)
    keyed = replace(options, key=derived, password=None, password2="")
    async for piece in run(FORMAT, source, keyed, policy):
        yield piece


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
    return _run_keyed(_run.encrypt, source, _options(key, password, password2), policy)


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
    options = _options(key, password, password2, expected_size=expected_size)
    return _run_keyed(_run.decrypt, source, options, policy)


def encrypt_bytes(
    plaintext: Buffer,
    key: RcloneKeys,
    *,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> bytes:
    """Encrypt whole file contents for a crypt remote, blocks sealed on all cores."""
    return _run.encrypt_bytes(FORMAT, plaintext, _options(key, None, ""), policy)


def decrypt_bytes(
    ciphertext: Buffer,
    key: RcloneKeys,
    *,
    expected_size: int | None = None,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> bytes:
    """Decrypt whole crypt file contents, blocks opened on all cores; all or nothing."""
    options = _options(key, None, "", expected_size=expected_size)
    return _run.decrypt_bytes(FORMAT, ciphertext, options, policy)
