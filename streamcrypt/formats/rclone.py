"""rclone crypt file contents as async streams; the codec is :mod:`streamcrypt.codecs.rclone`.

Keys come as :class:`~streamcrypt.codecs.rclone.RcloneKeys` or as ``password`` (and
``password2``) in clear; in the async calls their scrypt runs on a worker thread (inline
only with ``policy=None``), never on the event loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from functools import partial

from ..codecs import FormatOptions, SegmentedFormat
from ..codecs.rclone import FORMAT, RcloneKeys
from ..engine import DEFAULT_POLICY, OffloadPolicy, Source, wait_future
from ..errors import InvalidParameterError
from . import run as _run

__all__ = ["decrypt", "decrypt_bytes", "encrypt", "encrypt_bytes", "keys"]


async def keys(
    password: str, password2: str = "", *, policy: OffloadPolicy | None = DEFAULT_POLICY
) -> RcloneKeys:
    """:meth:`RcloneKeys.from_password` off the event loop (scrypt costs ~16 MiB, ~50 ms)."""
    derive = partial(RcloneKeys.from_password, password, password2)
    return derive() if policy is None else await wait_future(policy.submit(derive))


def _writing(
    name: str,
    key: RcloneKeys | None = None,
    *,
    password: str | None = None,
    password2: str = "",
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> _run.Call:
    """The crypt remote's keys, or its ``password`` (and ``password2``) in clear."""
    return _options(key, password, password2, policy)


def _reading(
    name: str,
    key: RcloneKeys | None = None,
    *,
    password: str | None = None,
    password2: str = "",
    expected_size: int | None = None,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> _run.Call:
    """As when writing; rclone files have no end marker: ``expected_size`` (the plaintext
    size) turns a file cut at a block boundary into :class:`TruncatedStreamError`."""
    return _options(key, password, password2, policy, expected_size=expected_size)


def _options(
    key: RcloneKeys | None,
    password: str | None,
    password2: str,
    policy: OffloadPolicy | None,
    **extra: object,
) -> _run.Call:
    """The options, checked at the call for what could otherwise fail only once
    iteration starts."""
    if (key is None) == (password is None):
        raise InvalidParameterError("rclone crypt takes key= (RcloneKeys) or password= (not both)")
    if password is not None and not (
        isinstance(password, str) and password and isinstance(password2, str)
    ):
        raise InvalidParameterError(
            "rclone crypt's password= must be a non-empty str (and password2= a str)"
        )
    options = FormatOptions(key=key, password=password, password2=password2, extra=extra)
    return _run.Call(options, policy)


def _keyed(run: _run.Runner) -> _run.Runner:
    """``run``, at once with keys, else once the password's keys are derived off the
    event loop (the other options are checked at the call, on stand-in keys)."""

    def keyed(
        fmt: SegmentedFormat, source: Source, options: FormatOptions, policy: OffloadPolicy | None
    ) -> AsyncIterator[bytes]:
        if options.key is not None:
            return run(fmt, source, options, policy)
        stand_in = replace(options, key=RcloneKeys.from_material(bytes(80)), password=None)
        run(fmt, b"", stand_in, None)  # raises for bad options now; never iterated
        return _derived(run, fmt, source, options, policy)

    return keyed


async def _derived(
    run: _run.Runner,
    fmt: SegmentedFormat,
    source: Source,
    options: FormatOptions,
    policy: OffloadPolicy | None,
) -> AsyncIterator[bytes]:
    derived = await keys(options.password or "", options.password2, policy=policy)
    keyed = replace(options, key=derived, password=None, password2="")
    async for piece in run(fmt, source, keyed, policy):
        yield piece


encrypt = _run.streaming(
    FORMAT,
    _writing,
    "encrypt",
    "Encrypt an async source as rclone crypt file contents, blocks sealed in parallel.\n\n"
    "The arguments are checked at the call; a password's scrypt runs when iteration starts.",
    _keyed(_run.encrypt),
)
decrypt = _run.streaming(
    FORMAT,
    _reading,
    "decrypt",
    "Decrypt rclone crypt contents, yielding only verified blocks.\n\n"
    "rclone files have no end marker: pass ``expected_size`` (the plaintext size) to turn\n"
    "a file cut at a block boundary into :class:`TruncatedStreamError`. The arguments are\n"
    "checked at the call; a password's scrypt runs when iteration starts.",
    _keyed(_run.decrypt),
)
encrypt_bytes = _run.one_shot(
    FORMAT,
    _writing,
    "encrypt_bytes",
    "Encrypt whole file contents for a crypt remote, blocks sealed on all cores (a\n"
    "password's scrypt runs in the call).",
)
decrypt_bytes = _run.one_shot(
    FORMAT,
    _reading,
    "decrypt_bytes",
    "Decrypt whole crypt file contents, blocks opened on all cores; all or nothing.",
)
