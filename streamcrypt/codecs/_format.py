"""One descriptor per segmented format: what the layers above need to know about it.

Each codec module exports ``FORMAT``, a :class:`SegmentedFormat`; ``streamcrypt.codecs``
registers them in :data:`~streamcrypt.codecs.FORMATS` (one line per format). The
descriptor speaks one vocabulary, :class:`FormatOptions` (``key``, ``aad``,
``segment_size``, ``suite``, ``recipients``, ``identities``, ``passphrase``,
``work_factor``, ``max_work_factor``, ``armor``; the README's "Vocabulary"), and
translates it into the codec's own keywords in one place. Every layer above (the async
``streamcrypt.formats``, the one-shot calls, ``streamcrypt.open``, the CLI) builds its
transforms with :meth:`SegmentedFormat.encryptors` / :meth:`SegmentedFormat.decryptors`,
so adding a format is one codec module and one registration line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar

from ..abc import Buffer, Transform
from ..errors import InvalidParameterError, UnsupportedFormatError
from ._segmented import SegmentLayout

__all__ = [
    "FormatOptions",
    "ReadAt",
    "SegmentedFormat",
    "TextArmor",
    "or_default",
    "refuse_foreign",
    "registry",
]

#: Reads ``length`` bytes of a stream at ``offset`` (fewer only at its end).
ReadAt = Callable[[int, int], bytes]


@dataclass(frozen=True, slots=True)
class FormatOptions:
    """The shared keyword vocabulary every format descriptor takes.

    ``key`` is what the format keys with (32 bytes, a ``SecretKey``, a ``KeyRing``, a
    Tink keyset, rclone keys, an AWS keyring); ``aad`` the associated data (cobblestone's
    context); ``segment_size`` the plaintext bytes of a full segment (RFC 8188's record
    size less its overhead, secretstream's chunk size, the AWS frame length);
    ``recipients`` / ``identities`` / ``passphrase`` for the formats with stanzas;
    ``password`` / ``password2`` for rclone crypt (the remote's password and salt, in
    clear, as ``rclone.conf`` holds them once revealed); ``encryption_context`` for the
    AWS format (written into a message; on reading, entries the message must carry);
    ``work_factor`` the passphrase KDF's cost when writing, ``max_work_factor`` the
    reader's cap on it; ``armor`` writes the format's text armor (age). ``extra``
    holds the keywords only one format's codec has (ece's ``salt=``, the AWS
    ``allow_legacy=``, ...), handed to its codec as given.
    ``None`` (and empty) means the format's default.
    """

    key: Any = None
    suite: str | None = None
    segment_size: int | None = None
    aad: Buffer = b""
    recipients: tuple[Any, ...] = ()
    identities: tuple[Any, ...] = ()
    passphrase: str | Buffer | None = None
    password: str | None = None
    password2: str = ""
    encryption_context: Mapping[str, str] | None = None
    work_factor: Any = None
    max_work_factor: Any = None
    armor: bool = False
    extra: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def __repr__(self) -> str:  # never show keys, passphrases or passwords
        return f"FormatOptions(suite={self.suite!r}, segment_size={self.segment_size!r})"


_T = TypeVar("_T")


def or_default(value: _T | None, default: _T) -> _T:
    """``value``, or ``default`` when it is ``None`` (an option left to the format)."""
    return default if value is None else value


def refuse_foreign(options: FormatOptions, name: str) -> None:
    """Raise InvalidParameterError for a keyword only another format than ``name`` takes:
    ``password=``/``password2=`` (rclone's), ``encryption_context=`` (AWS's)."""
    if name != "rclone" and (options.password is not None or options.password2):
        raise InvalidParameterError(
            f'password= and password2= belong to format="rclone", not "{name}"'
        )
    if name != "aws" and options.encryption_context:
        raise InvalidParameterError(f'encryption_context= belongs to format="aws", not "{name}"')


def _no_check(options: FormatOptions, mode: str) -> None:
    return None


@dataclass(frozen=True, slots=True)
class TextArmor:
    """A text wrapping a format may put around its bytes (age's ASCII armor).

    ``encoder`` / ``decoder`` make its transforms; ``sniff`` tells from a stream's first
    bytes whether to read it as armored (``None``: not yet known, give more bytes;
    ``at_end``: no more bytes will come); ``begin`` is the line armored data starts with
    (after whitespace), which identifies the format.
    """

    encoder: Callable[[], Transform]
    decoder: Callable[[], Transform]
    sniff: Callable[[Buffer, bool], bool | None]
    begin: bytes


@dataclass(frozen=True, slots=True)
class SegmentedFormat:
    """What the layers above need to know about one segmented format.

    ``encryptor`` / ``decryptor`` build the sans-I/O transforms from
    :class:`FormatOptions` (they may be slow: a password KDF runs in the first
    ``feed``); ``check`` validates options for mode ``"wb"`` or ``"rb"`` (raises
    :class:`~streamcrypt.errors.InvalidParameterError`). ``detect`` tells the format by
    the first bytes of a stream (``None``: nothing on the wire says so).
    ``header_size`` gives the bytes the header takes at the start of ``head`` (``None``
    while ``head`` is too short), up to ``max_header_size``; ``layout`` authenticates the
    header and maps a stream of the given size for random access (``None``: no random
    access). ``opens_files``: :func:`streamcrypt.open` speaks it.
    ``detects_truncation_at_boundary`` is False for a format without an end marker.
    ``armor``: the format's text armor, if it has one.
    """

    name: str
    encryptor: Callable[[FormatOptions], Transform]
    decryptor: Callable[[FormatOptions], Transform]
    check: Callable[[FormatOptions, str], None] = _no_check
    detect: Callable[[bytes], bool] | None = None
    header_size: Callable[[bytes], int | None] | None = None
    max_header_size: int = 0
    layout: Callable[[FormatOptions, ReadAt, int], SegmentLayout] | None = None
    opens_files: bool = False
    detects_truncation_at_boundary: bool = True
    armor: TextArmor | None = None

    def encryptors(self, options: FormatOptions) -> list[Transform]:
        """The stages that write this format: its encryptor, then its armor when
        ``options.armor``. Raises :class:`~streamcrypt.errors.InvalidParameterError` for
        options the format does not take, else as its encryptor."""
        self.check(options, "wb")
        stages = [self.encryptor(options)]
        if options.armor:
            if self.armor is None:
                raise InvalidParameterError(f'format="{self.name}" has no armor: drop armor=')
            stages.append(self.armor.encoder())
        return stages

    def decryptors(
        self, options: FormatOptions, head: Buffer, at_end: bool = True
    ) -> list[Transform]:
        """The stages that read this format, given the stream's first bytes ``head``
        (``at_end``: they are all of it): the armor decoder when ``head`` is armored,
        then the decryptor. Raises as :meth:`encryptors`."""
        self.check(options, "rb")
        if options.armor:
            raise InvalidParameterError("armor is detected when reading: drop armor=")
        decryptor = self.decryptor(options)
        if self.armor is not None and self.armor.sniff(head, at_end):
            return [self.armor.decoder(), decryptor]
        return [decryptor]

    def identifies(self, head: bytes) -> bool:
        """Whether a stream starting with ``head`` is in this format, armored or not
        (``False`` when nothing on the wire says so)."""
        if self.detect is not None and self.detect(head):
            return True
        return self.armor is not None and head.lstrip().startswith(self.armor.begin)

    def read_range(
        self, options: FormatOptions, read_at: ReadAt, stream_size: int, start: int, stop: int
    ) -> bytes:
        """Plaintext ``[start, stop)``, opening only the segments covering it. Raises
        :class:`~streamcrypt.errors.UnsupportedFormatError` without random access, else
        as the format's decryptor."""
        if self.layout is None:
            raise UnsupportedFormatError(f"{self.name} cannot be read by random access")
        return self.layout(options, read_at, stream_size).read(read_at, start, stop)


def registry(formats: Iterable[SegmentedFormat]) -> Mapping[str, SegmentedFormat]:
    """The formats by name; a name registered twice raises InvalidParameterError."""
    out: dict[str, SegmentedFormat] = {}
    for fmt in formats:
        if fmt.name in out:
            raise InvalidParameterError(f"format {fmt.name!r} is registered twice")
        out[fmt.name] = fmt
    return out
