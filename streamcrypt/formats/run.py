"""The one runner every format goes through: a format descriptor's stages over a source.

:func:`encrypt` / :func:`decrypt` stream on the engine (async iterators of bytes);
:func:`encrypt_bytes` / :func:`decrypt_bytes` run a whole message at once, segmented
stages on all cores. All four build their transforms from a
:class:`~streamcrypt.codecs.SegmentedFormat` and :class:`~streamcrypt.codecs.FormatOptions`
at the call, so bad arguments raise there, before any iteration; a format's armor is
written on request and detected when reading, however the source is cut.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from ..abc import Buffer, Transform
from ..codecs import FormatOptions, SegmentedFormat, SegmentedTransform, TextArmor
from ..engine import OffloadPolicy, Source, pipeline, run_segmented
from ..errors import StreamCryptError

__all__ = ["decrypt", "decrypt_bytes", "encrypt", "encrypt_bytes", "run_stages", "stream"]


def stream(
    source: Source, *stages: Transform, policy: OffloadPolicy | None
) -> AsyncIterator[bytes]:
    """``stages`` applied to ``source`` as an async iterator of bytes."""
    return pipeline(*stages, policy=policy).stream(source)


def encrypt(
    fmt: SegmentedFormat, source: Source, options: FormatOptions, policy: OffloadPolicy | None
) -> AsyncIterator[bytes]:
    """``source`` encrypted into ``fmt`` (the options checked now)."""
    return stream(source, *fmt.encryptors(options), policy=policy)


def decrypt(
    fmt: SegmentedFormat, source: Source, options: FormatOptions, policy: OffloadPolicy | None
) -> AsyncIterator[bytes]:
    """``source`` in ``fmt`` decrypted, only verified plaintext yielded (the options
    checked now; armor detected from the first bytes)."""
    stages = fmt.decryptors(options, b"", at_end=False)
    if fmt.armor is None:
        return stream(source, *stages, policy=policy)
    return _dearmored(fmt.armor, source, stages, policy)


async def _dearmored(
    armor: TextArmor, source: Source, stages: list[Transform], policy: OffloadPolicy | None
) -> AsyncIterator[bytes]:
    first, rest, armored = await _sniff(armor, source)
    if armored:
        stages = [armor.decoder(), *stages]
    async for piece in stream(_prepend(first, rest), *stages, policy=policy):
        yield piece


async def _sniff(
    armor: TextArmor, source: Source
) -> tuple[bytes, AsyncIterator[Buffer] | None, bool]:
    """The leading bytes read, an iterator of the rest, and whether the data is armored
    (reading goes on until the verdict is known)."""
    if isinstance(source, bytes | bytearray | memoryview):
        return bytes(source), None, bool(armor.sniff(bytes(source), True))
    it = aiter(source)
    head = bytearray()
    while (armored := armor.sniff(bytes(head), False)) is None:
        try:
            head += await anext(it)
        except StopAsyncIteration:
            return bytes(head), it, bool(armor.sniff(bytes(head), True))
    return bytes(head), it, armored


async def _prepend(head: bytes, rest: AsyncIterator[Buffer] | None) -> AsyncIterator[Buffer]:
    if head:
        yield head
    if rest is not None:
        async for chunk in rest:
            yield chunk


def encrypt_bytes(
    fmt: SegmentedFormat, data: Buffer, options: FormatOptions, policy: OffloadPolicy | None
) -> bytes:
    """All of ``data`` encrypted into ``fmt``, segments sealed on all cores."""
    return run_stages(fmt.encryptors(options), data, policy)


def decrypt_bytes(
    fmt: SegmentedFormat, data: Buffer, options: FormatOptions, policy: OffloadPolicy | None
) -> bytes:
    """All of ``data`` in ``fmt`` decrypted (armor detected), segments opened on all
    cores; all or nothing."""
    return run_stages(fmt.decryptors(options, data), data, policy)


def run_stages(stages: Sequence[Transform], data: Buffer, policy: OffloadPolicy | None) -> bytes:
    """``data`` through ``stages`` at once: segmented ones on all cores, others inline.

    Errors come out as a stream meets them: when a stage fails at its end, what it
    produced before goes on through the later stages first, so a fault there wins.
    """
    out: Buffer = data
    for n, stage in enumerate(stages):
        if isinstance(stage, SegmentedTransform):
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
