"""The high-level calls: encrypt/decrypt bytes and async streams, in any registered format.

``format=`` names a descriptor of :data:`streamcrypt.codecs.FORMATS` (writing: default the
native container; reading: default detected from the data's first bytes). Every keyword
is a field of :class:`~streamcrypt.codecs.FormatOptions`, the one vocabulary, by the name
the format's codec uses; a keyword the format does not take raises
:class:`~streamcrypt.errors.InvalidParameterError` at the call.

This module is also the one runner of a format descriptor: :func:`encrypt` /
:func:`decrypt` stream on the engine, :func:`encrypt_bytes` / :func:`decrypt_bytes` run a
whole message at once, segmented stages on all cores. A format's armor is written on
request and detected when reading, however the source is cut; a password's key
derivation (``SegmentedFormat.derive``) runs off the event loop in the async calls.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Mapping, Sequence
from typing import TypeGuard

from .abc import Buffer, Chain, Transform, as_buffer
from .codecs import (
    DETECT_BYTES,
    FORMATS,
    FormatOptions,
    IdentityLike,
    KeyLike,
    RecipientLike,
    SegmentedFormat,
    SegmentedTransform,
    check_detectable,
    detect_format,
    one_or_many,
)
from .engine import DEFAULT_POLICY, OffloadPolicy, Source, pipeline, run_segmented
from .errors import InvalidParameterError, StreamCryptError
from .keys import Argon2Params, PasswordParams
from .primitives import Ed25519PrivateKey, Ed25519PublicKey


def encrypt_bytes(
    plaintext: Buffer,
    key: KeyLike | None = None,
    *,
    format: str = "native",
    suite: str | None = None,
    segment_size: int | None = None,
    aad: Buffer = b"",
    recipients: Iterable[RecipientLike] | RecipientLike = (),
    passphrase: str | Buffer | None = None,
    work_factor: int | PasswordParams | None = None,
    armor: bool = False,
    sign_with: Ed25519PrivateKey | None = None,
    password: str | None = None,
    password2: str = "",
    salt: bytes | None = None,
    keyid: bytes | str = b"",
    padding: int = 0,
    encryption_context: Mapping[str, str] | None = None,
    allow_legacy: bool = False,
    max_encrypted_data_keys: int | None = None,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> bytes:
    """Encrypt ``plaintext`` into ``format`` (default a native container, docs/FORMAT.md),
    segments sealed on all cores.

    The keywords are :class:`~streamcrypt.codecs.FormatOptions`' (the README's
    "Vocabulary"); ``None`` leaves an option to the format. Raises
    :class:`~streamcrypt.errors.InvalidParameterError` for an unknown format or an option
    it does not take, or a ``plaintext`` that is not bytes-like, else as the format's
    encryptor.
    """
    if type(plaintext) is not bytes:  # bytes as they are (as_buffer's first case, a call less)
        plaintext = as_buffer(plaintext, "plaintext")  # an int or a str refused
    options = _writing(
        key, suite, segment_size, aad, recipients, passphrase, work_factor, armor, sign_with,
        password, password2, salt, keyid, padding, encryption_context, allow_legacy,
        max_encrypted_data_keys,
    )  # fmt: skip
    fmt = _format(format)
    if fmt.seal_message is not None:  # a message of one segment: no engine, no transform
        fmt.check_options(options, "wb")
        sealed = fmt.seal_message(options, plaintext)
        if sealed is not None:
            return sealed
    return _run(fmt.encryptors(options), plaintext, policy)


def decrypt_bytes(
    ciphertext: Buffer,
    key: KeyLike | None = None,
    *,
    format: str | None = None,
    segment_size: int | None = None,
    aad: Buffer = b"",
    identities: Iterable[IdentityLike] | IdentityLike = (),
    passphrase: str | Buffer | None = None,
    max_work_factor: int | Argon2Params | None = None,
    verify_with: Ed25519PublicKey | Buffer | None = None,
    password: str | None = None,
    password2: str = "",
    expected_size: int | None = None,
    max_record_size: int | None = None,
    allow_no_records: bool = False,
    encryption_context: Mapping[str, str] | None = None,
    allow_legacy: bool = False,
    allow_unverified: bool = False,
    max_encrypted_data_keys: int | None = None,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> bytes:
    """Decrypt a whole message, segments opened on all cores; all or nothing.

    ``format=None`` detects the format from the first bytes (native, envelope, age,
    rclone crypt, AWS; name the others). Raises
    :class:`~streamcrypt.errors.InvalidParameterError` (an option the format does not
    take: the message names the format and the keywords it takes),
    :class:`~streamcrypt.errors.AuthenticationError`,
    :class:`~streamcrypt.errors.TruncatedStreamError`,
    :class:`~streamcrypt.errors.FormatError`,
    :class:`~streamcrypt.errors.UnsupportedFormatError`,
    :class:`~streamcrypt.errors.UnknownKeyError`; returns nothing on failure.
    """
    if type(ciphertext) is not bytes:  # as encrypt_bytes' plaintext
        ciphertext = as_buffer(ciphertext, "ciphertext")
    options = _reading(
        key, segment_size, aad, identities, passphrase, max_work_factor, verify_with, password,
        password2, expected_size, max_record_size, allow_no_records, encryption_context,
        allow_legacy, allow_unverified, max_encrypted_data_keys,
    )  # fmt: skip
    if format is not None:
        fmt = _format(format)
        fmt.check_options(options, "rb")
    else:
        fmt = detect_format(bytes(ciphertext[:DETECT_BYTES]), options)  # checks them too
    if fmt.open_message is not None:  # a message of one segment: no engine, no transform
        opened = fmt.open_message(options, ciphertext)
        if opened is not None:
            return opened
    return _run(fmt.decryptors(options, ciphertext), ciphertext, policy)


def encrypt(
    source: Source,
    key: KeyLike | None = None,
    *,
    format: str = "native",
    suite: str | None = None,
    segment_size: int | None = None,
    aad: Buffer = b"",
    recipients: Iterable[RecipientLike] | RecipientLike = (),
    passphrase: str | Buffer | None = None,
    work_factor: int | PasswordParams | None = None,
    armor: bool = False,
    sign_with: Ed25519PrivateKey | None = None,
    password: str | None = None,
    password2: str = "",
    salt: bytes | None = None,
    keyid: bytes | str = b"",
    padding: int = 0,
    encryption_context: Mapping[str, str] | None = None,
    allow_legacy: bool = False,
    max_encrypted_data_keys: int | None = None,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> AsyncIterator[bytes]:
    """Encrypt an async source (iterable of bytes, anyio byte stream) as it streams,
    keywords as :func:`encrypt_bytes`.

    Key and parameter errors are raised here, at the call; the result is an async
    iterator of ciphertext chunks.
    """
    options = _writing(
        key, suite, segment_size, aad, recipients, passphrase, work_factor, armor, sign_with,
        password, password2, salt, keyid, padding, encryption_context, allow_legacy,
        max_encrypted_data_keys,
    )  # fmt: skip
    fmt = _format(format)
    if fmt.derive is None:
        return _stream(source, fmt.encryptors(options), policy)
    fmt.check_options(options, "wb")  # at the call; the key derivation when iterated
    return _encrypting(fmt, source, options, policy)


def decrypt(
    source: Source,
    key: KeyLike | None = None,
    *,
    format: str | None = None,
    segment_size: int | None = None,
    aad: Buffer = b"",
    identities: Iterable[IdentityLike] | IdentityLike = (),
    passphrase: str | Buffer | None = None,
    max_work_factor: int | Argon2Params | None = None,
    verify_with: Ed25519PublicKey | Buffer | None = None,
    password: str | None = None,
    password2: str = "",
    expected_size: int | None = None,
    max_record_size: int | None = None,
    allow_no_records: bool = False,
    encryption_context: Mapping[str, str] | None = None,
    allow_legacy: bool = False,
    allow_unverified: bool = False,
    max_encrypted_data_keys: int | None = None,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> AsyncIterator[bytes]:
    """Decrypt an async source, yielding only verified plaintext; keywords as
    :func:`decrypt_bytes`.

    With ``format`` named, its options are checked here, at the call; with
    ``format=None`` once the first bytes told the format. Raises (while iterating)
    AuthenticationError, TruncatedStreamError, FormatError, UnsupportedFormatError,
    UnknownKeyError.
    """
    options = _reading(
        key, segment_size, aad, identities, passphrase, max_work_factor, verify_with, password,
        password2, expected_size, max_record_size, allow_no_records, encryption_context,
        allow_legacy, allow_unverified, max_encrypted_data_keys,
    )  # fmt: skip
    if format is None and isinstance(source, bytes | bytearray | memoryview):
        # All of the data is here: tell its format now.
        found = detect_format(bytes(source[:DETECT_BYTES]), options)
        if found.derive is None:  # else its key is derived off the event loop, below
            return _stream(source, found.decryptors(options, source), policy)
    if format is None:
        check_detectable(options)  # at the call, what can be checked before the data
        return _decrypting(None, source, options, policy)
    fmt = _format(format)
    if fmt.armor is None and fmt.derive is None:
        return _stream(source, fmt.decryptors(options, b"", at_end=False), policy)
    fmt.check_options(options, "rb")  # at the call; armor and keys once iterated
    return _decrypting(fmt, source, options, policy)


#: Makes a tuple of a class: the options, positionally.
_options = tuple.__new__


# The options of a write and of a read: the one place each call's keywords become them.
def _writing(
    key: KeyLike | None,
    suite: str | None,
    segment_size: int | None,
    aad: Buffer,
    recipients: Iterable[RecipientLike] | RecipientLike,
    passphrase: str | Buffer | None,
    work_factor: int | PasswordParams | None,
    armor: bool,
    sign_with: Ed25519PrivateKey | None,
    password: str | None,
    password2: str,
    salt: bytes | None,
    keyid: bytes | str,
    padding: int,
    encryption_context: Mapping[str, str] | None,
    allow_legacy: bool,
    max_encrypted_data_keys: int | None,
) -> FormatOptions:
    # Field by field, in FormatOptions' order (tests/test_formats.py checks each lands in
    # the field of its name): a tuple made with tuple.__new__ takes 0.4 us, where the
    # named tuple's own __new__ takes 1.5-2 us of keyword matching a call. recipients= /
    # identities=: one_or_many's common case (a tuple, the default) inline, a call less.
    return _options(
        FormatOptions,
        (
            key, suite, segment_size, aad,
            recipients if type(recipients) is tuple else one_or_many(recipients),
            (),  # identities
            passphrase, work_factor,
            None,  # max_work_factor
            armor, sign_with,
            None,  # verify_with
            password, password2,
            None,  # expected_size
            salt, keyid, padding,
            None, False,  # max_record_size, allow_no_records
            encryption_context, allow_legacy,
            False,  # allow_unverified
            max_encrypted_data_keys,
        ),
    )  # fmt: skip


def _reading(
    key: KeyLike | None,
    segment_size: int | None,
    aad: Buffer,
    identities: Iterable[IdentityLike] | IdentityLike,
    passphrase: str | Buffer | None,
    max_work_factor: int | Argon2Params | None,
    verify_with: Ed25519PublicKey | Buffer | None,
    password: str | None,
    password2: str,
    expected_size: int | None,
    max_record_size: int | None,
    allow_no_records: bool,
    encryption_context: Mapping[str, str] | None,
    allow_legacy: bool,
    allow_unverified: bool,
    max_encrypted_data_keys: int | None,
) -> FormatOptions:
    return _options(  # as _writing makes them
        FormatOptions,
        (
            key,
            None,  # suite
            segment_size, aad,
            (),  # recipients
            identities if type(identities) is tuple else one_or_many(identities),
            passphrase,
            None,  # work_factor
            max_work_factor,
            False, None,  # armor, sign_with
            verify_with, password, password2, expected_size,
            None, b"", 0,  # salt, keyid, padding
            max_record_size, allow_no_records, encryption_context, allow_legacy,
            allow_unverified, max_encrypted_data_keys,
        ),
    )  # fmt: skip


def _format(name: str) -> SegmentedFormat:
    try:
        return FORMATS[name]
    except (KeyError, TypeError):  # not a name of one (TypeError: not even hashable)
        raise InvalidParameterError(
            f"unknown format {name!r}; streamcrypt speaks {', '.join(FORMATS)}"
        ) from None


def _stream(
    source: Source, stages: Sequence[Transform], policy: OffloadPolicy | None
) -> AsyncIterator[bytes]:
    return pipeline(*stages, policy=policy).stream(source)


async def _derived(
    fmt: SegmentedFormat, options: FormatOptions, policy: OffloadPolicy | None
) -> FormatOptions:
    """``options`` with the key ``fmt.derive`` makes of a password, derived on a worker
    thread (inline with ``policy=None``)."""
    if fmt.derive is None:
        return options
    return fmt.derive(options) if policy is None else await policy.run(fmt.derive, options)


async def _encrypting(
    fmt: SegmentedFormat, source: Source, options: FormatOptions, policy: OffloadPolicy | None
) -> AsyncIterator[bytes]:
    stages = fmt.encryptors(await _derived(fmt, options, policy))
    pieces = _stream(source, stages, policy)
    while True:  # no piece kept here (see _decrypting)
        try:
            yield await anext(pieces)
        except StopAsyncIteration:
            return


async def _decrypting(
    fmt: SegmentedFormat | None,
    source: Source,
    options: FormatOptions,
    policy: OffloadPolicy | None,
) -> AsyncIterator[bytes]:
    """``source`` decrypted once its first bytes told the format (``fmt=None``) and
    whether it is armored."""
    head, rest = await _head(fmt, source)
    at_end = rest is None
    try:
        if fmt is None:
            fmt = detect_format(head[:DETECT_BYTES], options)
        stages = fmt.decryptors(await _derived(fmt, options, policy), head, at_end)
        pieces = _stream(_prepend(head, rest), stages, policy)
        while True:
            # Each piece handed on with no reference kept here (``async for``'s would
            # hold it while the next chunk's output objects are made, so their memory
            # could not be the freed one's: 1 MiB chunks decrypted slower).
            try:
                yield await anext(pieces)
            except StopAsyncIteration:
                break
    finally:
        if isinstance(rest, AsyncGenerator):  # a generator read in part is closed; a
            await rest.aclose()  # stream (a socket's) is the caller's to close


async def _head(
    fmt: SegmentedFormat | None, source: Source
) -> tuple[bytes, AsyncIterator[Buffer] | None]:
    """The leading bytes read (enough to tell the format, and whether it is armored)
    and an iterator of the rest (``None``: the source ended)."""
    if isinstance(source, bytes | bytearray | memoryview):
        return bytes(source), None
    it = aiter(source)
    head = bytearray()
    while not _known(fmt, head):
        try:
            head += await anext(it)
        except StopAsyncIteration:
            return bytes(head), None
    return bytes(head), it


def _known(fmt: SegmentedFormat | None, head: bytearray) -> bool:
    if fmt is None:
        if len(head) < DETECT_BYTES:
            return False
        fmt = next((f for f in FORMATS.values() if f.identifies(bytes(head))), None)
    return fmt is None or fmt.armor is None or fmt.armor.sniff(bytes(head), False) is not None


async def _prepend(head: bytes, rest: AsyncIterator[Buffer] | None) -> AsyncIterator[Buffer]:
    if head:
        yield head
    if rest is not None:
        async for chunk in rest:
            yield chunk


#: Whether transforms of a class are segmented: the Protocol check costs microseconds a
#: call, and a class's answer does not change.
_SEGMENTED: dict[type, bool] = {}


def _segmented(stage: Transform) -> TypeGuard[SegmentedTransform]:
    known = _SEGMENTED.get(type(stage))
    if known is None:
        known = _SEGMENTED[type(stage)] = isinstance(stage, SegmentedTransform)
    return known


def _run(stages: Sequence[Transform], data: Buffer, policy: OffloadPolicy | None) -> bytes:
    """``data`` through ``stages`` at once: segmented ones on all cores, others inline.

    Errors come out as a stream meets them: when a stage fails at its end, what it
    produced before goes on through the later stages first, so a fault there wins.
    """
    out: Buffer = data
    stages = Chain(*stages).stages  # as the engine runs them: a chain's segmented stage too
    for n, stage in enumerate(stages):
        if _segmented(stage):
            out = run_segmented(stage, out, policy)
            continue
        out = stage.update(out)
        try:
            out += stage.finalize()
        except StreamCryptError:
            for later in stages[n + 1 :]:
                out = later.update(out)
            raise
    return bytes(out)
