"""The one runner every format goes through: a format descriptor's stages over a source.

:func:`encrypt` / :func:`decrypt` stream on the engine (async iterators of bytes);
:func:`encrypt_bytes` / :func:`decrypt_bytes` run a whole message at once, segmented
stages on all cores. All four build their transforms from a
:class:`~streamcrypt.codecs.SegmentedFormat` and :class:`~streamcrypt.codecs.FormatOptions`
at the call, so bad arguments raise there, before any iteration; a format's armor is
written on request and detected when reading, however the source is cut.

A format module states each direction's keywords once, in a builder returning a
:class:`Call`; :func:`streaming` and :func:`one_shot` make its public ``encrypt`` /
``decrypt`` / ``encrypt_bytes`` / ``decrypt_bytes`` from that builder, so the async and
the one-shot call can never take different keywords.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, TypeVar

from ..abc import Buffer, Transform
from ..codecs import FormatOptions, SegmentedFormat, SegmentedTransform, TextArmor
from ..engine import DEFAULT_POLICY, OffloadPolicy, Source, pipeline, run_segmented
from ..errors import StreamCryptError

__all__ = [
    "Call",
    "Runner",
    "decrypt",
    "decrypt_bytes",
    "encrypt",
    "encrypt_bytes",
    "one_shot",
    "run_stages",
    "stream",
    "streaming",
]

_P = ParamSpec("_P")
_F = TypeVar("_F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class Call:
    """What one call of a format's function asks for: its options and offload policy."""

    options: FormatOptions
    policy: OffloadPolicy | None = DEFAULT_POLICY


#: Runs a format over a source with options: :func:`encrypt`, :func:`decrypt` or a
#: format's own (one that derives a key off the event loop first).
Runner = Callable[
    [SegmentedFormat, Source, FormatOptions, OffloadPolicy | None], AsyncIterator[bytes]
]


def streaming(
    fmt: SegmentedFormat,
    build: Callable[Concatenate[str, _P], Call],
    name: str,
    doc: str,
    run: Runner | None = None,
) -> Callable[Concatenate[Source, _P], AsyncIterator[bytes]]:
    """The async ``name`` (``"encrypt"`` or ``"decrypt"``) of ``fmt``: ``name(source,
    ...)`` takes ``build``'s keywords (``build`` gets ``name`` first, for messages) and
    returns an async iterator; the arguments are checked at the call. ``run`` defaults to
    :func:`encrypt` / :func:`decrypt`."""
    if run is None:
        run = decrypt if name == "decrypt" else encrypt

    runner = run

    def call(source: Source, /, *args: _P.args, **kwargs: _P.kwargs) -> AsyncIterator[bytes]:
        made = build(name, *args, **kwargs)
        return runner(fmt, source, made.options, made.policy)

    return _named(call, build, name, doc, ("source", Source, AsyncIterator[bytes]))


def one_shot(
    fmt: SegmentedFormat, build: Callable[Concatenate[str, _P], Call], name: str, doc: str
) -> Callable[Concatenate[Buffer, _P], bytes]:
    """The one-shot ``name`` (``"encrypt_bytes"`` or ``"decrypt_bytes"``) of ``fmt``, as
    :func:`streaming` makes the async one: all of the data at once, on all cores."""
    run = decrypt_bytes if name == "decrypt_bytes" else encrypt_bytes
    first = "ciphertext" if name == "decrypt_bytes" else "plaintext"

    def call(data: Buffer, /, *args: _P.args, **kwargs: _P.kwargs) -> bytes:
        made = build(name, *args, **kwargs)
        return run(fmt, data, made.options, made.policy)

    return _named(call, build, name, doc, (first, Buffer, bytes))


def _named(call: _F, build: Callable[..., Call], name: str, doc: str, first: tuple[Any, ...]) -> _F:
    """``call`` named ``name`` in ``build``'s module, its signature ``build``'s keywords
    after the data parameter ``first`` (name, annotation, return annotation)."""
    fn: Any = call
    params = list(inspect.signature(build, eval_str=True).parameters.values())[1:]
    data = inspect.Parameter(first[0], inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=first[1])
    fn.__signature__ = inspect.Signature([data, *params], return_annotation=first[2])
    fn.__name__ = fn.__qualname__ = name
    fn.__module__ = build.__module__
    fn.__doc__ = doc
    return call


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
