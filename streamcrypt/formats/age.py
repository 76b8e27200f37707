"""age v1 (age-encryption.org/v1) as async streams; the codec is :mod:`streamcrypt.codecs.age`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable

from ..abc import Buffer
from ..codecs.age import (
    DEFAULT_MAX_WORK_FACTOR,
    DEFAULT_WORK_FACTOR,
    AgeDecryptor,
    AgeEncryptor,
    IdentityLike,
    RecipientLike,
)
from ..codecs.armor import ArmorDecoder, ArmorEncoder, is_armored, sniff_armor
from ..codecs.armor import armor as _armor
from ..engine import DEFAULT_POLICY, OffloadPolicy, Source, run_segmented
from ..errors import FormatError
from ._run import stream

__all__ = ["decrypt", "decrypt_bytes", "encrypt", "encrypt_bytes"]


def encrypt(
    source: Source,
    recipients: Iterable[RecipientLike] = (),
    passphrase: str | Buffer | None = None,
    *,
    armor: bool = False,
    work_factor: int = DEFAULT_WORK_FACTOR,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> AsyncIterator[bytes]:
    """Encrypt an async source to age recipients (or a passphrase), optionally armored.

    The arguments are checked here, at the call; a passphrase's scrypt runs on a worker
    thread (inline only with ``policy=None``), never on the event loop.
    """
    enc = AgeEncryptor(recipients=list(recipients), passphrase=passphrase, work_factor=work_factor)
    return stream(source, enc, *([ArmorEncoder()] if armor else []), policy=policy)


def decrypt(
    source: Source,
    identities: Iterable[IdentityLike] = (),
    passphrase: str | Buffer | None = None,
    *,
    max_work_factor: int = DEFAULT_MAX_WORK_FACTOR,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> AsyncIterator[bytes]:
    """Decrypt an age stream (armor detected by itself), yielding only verified chunks.

    The arguments are checked here, at the call. Armor is detected as
    :func:`decrypt_bytes` detects it, however the source is cut (leading whitespace
    included): reading goes on until the verdict is known.
    """
    dec = AgeDecryptor(
        identities=identities, passphrase=passphrase, max_work_factor=max_work_factor
    )
    return _decrypt(source, dec, policy)


async def _decrypt(
    source: Source, dec: AgeDecryptor, policy: OffloadPolicy | None
) -> AsyncIterator[bytes]:
    first, rest, armored = await _sniff(source)
    stages = [ArmorDecoder(), dec] if armored else [dec]
    async for piece in stream(_prepend(first, rest), *stages, policy=policy):
        yield piece


async def _sniff(source: Source) -> tuple[bytes, AsyncIterator[Buffer] | None, bool]:
    """The leading bytes read, an iterator of the rest, and whether the data is armored."""
    if isinstance(source, bytes | bytearray | memoryview):
        return bytes(source), None, is_armored(source)
    it = aiter(source)
    head = bytearray()
    while (armored := sniff_armor(head)) is None:
        try:
            head += await anext(it)
        except StopAsyncIteration:
            return bytes(head), it, is_armored(head)
    return bytes(head), it, armored


async def _prepend(head: bytes, rest: AsyncIterator[Buffer] | None) -> AsyncIterator[Buffer]:
    if head:
        yield head
    if rest is not None:
        async for chunk in rest:
            yield chunk


def encrypt_bytes(
    plaintext: Buffer,
    recipients: Iterable[RecipientLike] = (),
    passphrase: str | Buffer | None = None,
    armor: bool = False,
    *,
    work_factor: int = DEFAULT_WORK_FACTOR,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> bytes:
    """Encrypt ``plaintext`` to an age v1 file (ASCII-armored when ``armor``), its
    chunks sealed on all cores. Raises as :class:`AgeEncryptor`."""
    enc = AgeEncryptor(recipients=recipients, passphrase=passphrase, work_factor=work_factor)
    out = run_segmented(enc, plaintext, policy)
    return _armor(out) if armor else out


def decrypt_bytes(
    ciphertext: Buffer,
    identities: Iterable[IdentityLike] = (),
    passphrase: str | Buffer | None = None,
    *,
    max_work_factor: int = DEFAULT_MAX_WORK_FACTOR,
    policy: OffloadPolicy | None = DEFAULT_POLICY,
) -> bytes:
    """Decrypt an age v1 file, binary or ASCII-armored, its chunks opened on all cores.

    Raises as :class:`AgeDecryptor`; bad armor raises :class:`FormatError`.
    """
    data: Buffer = ciphertext
    if is_armored(ciphertext):
        armored = ArmorDecoder()
        data = armored.update(ciphertext)
        try:
            armored.finalize()
        except FormatError:
            # As a stream meets them: a fault in the bytes before the bad armor wins.
            AgeDecryptor(
                identities=identities, passphrase=passphrase, max_work_factor=max_work_factor
            ).update(data)
            raise
    dec = AgeDecryptor(
        identities=identities, passphrase=passphrase, max_work_factor=max_work_factor
    )
    return run_segmented(dec, data, policy)
