"""One descriptor per segmented format: what the layers above need to know about it.

Each codec module exports ``FORMAT``, a :class:`SegmentedFormat`; ``streamcrypt.codecs``
registers them in :data:`~streamcrypt.codecs.FORMATS` (one line per format). The
descriptor speaks one vocabulary, :class:`FormatOptions` (the README's "Vocabulary"),
names the options it takes when writing and when reading (``writes`` / ``reads``), and
translates them into the codec's own keywords in one place. Every layer above (the
one-shot and async calls of ``streamcrypt``, ``streamcrypt.open``, the CLI) builds its
transforms with :meth:`SegmentedFormat.encryptors` / :meth:`SegmentedFormat.decryptors`,
which refuse, in one place, an option the format does not take; adding a format is one
codec module and one registration line.
"""

from __future__ import annotations

import operator
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ForwardRef, NamedTuple, TypeAlias, TypeVar, Union

from .._lazy import LazyModule
from ..abc import Buffer, Transform
from ..errors import InvalidParameterError, UnsupportedFormatError
from ..keys import HoldsSecrets
from ._segmented import SegmentLayout

if TYPE_CHECKING:
    from .. import keys, primitives
    from . import age, aws, ece, envelope, rclone, tink_keyset
else:  # what the annotations name, imported only when typing.get_type_hints reads them
    keys = LazyModule("streamcrypt.keys")
    primitives = LazyModule("streamcrypt.primitives")
    age, aws, ece, envelope, rclone, tink_keyset = (
        LazyModule(f"streamcrypt.codecs.{name}")
        for name in ("age", "aws", "ece", "envelope", "rclone", "tink_keyset")
    )

#: Reads ``length`` bytes of a stream at ``offset`` (fewer only at its end).
ReadAt = Callable[[int, int], bytes]

if TYPE_CHECKING:
    #: What ``key=`` takes, by format: bytes or a :class:`~streamcrypt.keys.SecretKey`
    #: (native, tink raw, cobblestone, ece, secretstream), a
    #: :class:`~streamcrypt.keys.KeyRing` (native, ece), a token-held
    #: :class:`~streamcrypt.keys.Pkcs11Key` (native; in a raw AES keyring for aws), a Tink keyset or streaming key,
    #: :class:`~streamcrypt.codecs.rclone.RcloneKeys`, an AWS keyring or a list of them,
    #: and for reading RFC 8188 a key id lookup (mapping or callable).
    KeyLike: TypeAlias = (
        Buffer
        | keys.SecretKey
        | keys.KeyRing
        | keys.Pkcs11Key
        | tink_keyset.TinkKeyLike
        | Sequence[tink_keyset.TinkStreamingKey]
        | rclone.RcloneKeys
        | aws.KeyringLike
        | ece.EceKeySource
    )
    #: A recipient of a format with stanzas (age, envelope): a public key's text or object.
    RecipientLike: TypeAlias = age.RecipientLike | envelope.RecipientLike
    #: An identity of a format with stanzas (age, envelope): a secret key's text or object.
    IdentityLike: TypeAlias = age.IdentityLike | envelope.IdentityLike
else:  # the same unions, resolved by typing.get_type_hints only (no import at start-up)

    def _union(*names: str) -> object:
        return Union[tuple(ForwardRef(n, module=__name__) for n in names)]  # noqa: UP007

    KeyLike = _union(
        "Buffer",
        "keys.SecretKey",
        "keys.KeyRing",
        "keys.Pkcs11Key",
        "tink_keyset.TinkKeyLike",
        "Sequence[tink_keyset.TinkStreamingKey]",
        "rclone.RcloneKeys",
        "aws.KeyringLike",
        "ece.EceKeySource",
    )
    RecipientLike = _union("age.RecipientLike", "envelope.RecipientLike")
    IdentityLike = _union("age.IdentityLike", "envelope.IdentityLike")


class FormatOptions(NamedTuple):
    """The one keyword vocabulary of every format: each keyword of ``streamcrypt.encrypt``
    / ``decrypt`` / ``encrypt_bytes`` / ``decrypt_bytes`` / ``open`` is a field here, by
    the name the format's codec uses. A format names the fields it takes
    (:attr:`SegmentedFormat.writes` / :attr:`SegmentedFormat.reads`); any other field
    left off its default raises :class:`~streamcrypt.errors.InvalidParameterError`.
    ``None`` (and empty) means the format's default. Immutable (a named tuple: built
    in 0.5 us, where a frozen dataclass of these 24 fields took 9 us a message).

    Every format: ``key`` (symmetric keys and key rings: :data:`KeyLike`), ``aad`` (the
    associated data; cobblestone's context), ``suite``, ``segment_size`` (plaintext
    bytes of a full segment: RFC 8188's record size less 17, secretstream's message,
    the AWS frame length). Formats with stanzas (age, envelope): ``recipients`` /
    ``identities`` / ``passphrase``, ``work_factor`` (the passphrase KDF's cost when
    writing: age's log2 scrypt N, the envelope's parameters), ``max_work_factor`` (the
    reader's cap), ``armor`` (age's ASCII armor, written on request, detected when
    reading); the envelope's ``sign_with`` / ``verify_with`` (Ed25519). rclone crypt:
    ``password`` / ``password2`` (the remote's password and salt in clear, as
    ``rclone.conf`` holds them once revealed), ``expected_size`` (the plaintext size,
    which catches a file cut at a block boundary). RFC 8188 (ece): ``salt``, ``keyid``,
    ``padding`` when writing, ``max_record_size``, ``allow_no_records`` when reading.
    AWS: ``encryption_context`` (written into a message; on reading, entries it must
    carry), ``allow_legacy``, ``max_encrypted_data_keys``. Signed formats (envelope,
    AWS): ``allow_unverified`` releases plaintext whose signature is not (yet) checked;
    without it a signed message gives nothing before its signature verified.
    """

    key: KeyLike | None = None
    suite: str | None = None
    segment_size: int | None = None
    aad: Buffer = b""
    recipients: tuple[RecipientLike, ...] = ()
    identities: tuple[IdentityLike, ...] = ()
    passphrase: str | Buffer | None = None
    work_factor: int | keys.PasswordParams | None = None
    max_work_factor: int | keys.Argon2Params | None = None
    armor: bool = False
    sign_with: primitives.Ed25519PrivateKey | None = None
    verify_with: primitives.Ed25519PublicKey | Buffer | None = None
    password: str | None = None
    password2: str = ""
    expected_size: int | None = None
    salt: bytes | None = None
    keyid: bytes | str = b""
    padding: int = 0
    max_record_size: int | None = None
    allow_no_records: bool = False
    encryption_context: Mapping[str, str] | None = None
    allow_legacy: bool = False
    allow_unverified: bool = False
    max_encrypted_data_keys: int | None = None

    def __repr__(self) -> str:  # never show keys, passphrases or passwords
        return f"FormatOptions(suite={self.suite!r}, segment_size={self.segment_size!r})"

    def given(self) -> list[str]:
        """The names of the options set off their defaults, in field order."""
        pairs = zip(_NAMES, self, _VALUES, strict=True)
        return [n for n, v, d in pairs if v is not d and v != d]


# Never pickled or copied: the options may hold keys, passphrases and passwords. The one
# rule of :class:`~streamcrypt.keys.HoldsSecrets`, set after the class is made (a named
# tuple takes no base class and no methods named like these in its body).
setattr(FormatOptions, "_pickle_advice", "pass the options where the call runs")  # noqa: B010
setattr(FormatOptions, "__reduce_ex__", HoldsSecrets.__reduce_ex__)  # noqa: B010

#: Each option's name and default, in field order.
_NAMES = FormatOptions._fields
_VALUES = tuple(FormatOptions._field_defaults[name] for name in _NAMES)
_DEFAULTS: tuple[tuple[str, object], ...] = tuple(zip(_NAMES, _VALUES, strict=True))

_T = TypeVar("_T")


def one_or_many(value: Iterable[_T] | _T) -> tuple[_T, ...]:
    """``recipients=`` / ``identities=`` as a tuple: one key (an object, its text or a
    key file's path) or an iterable of them, as the codecs take them. A value that is not
    iterable (``None``, an identity given as a recipient) and bytes of any kind are one
    item, for the codec to refuse by its type."""
    if type(value) is tuple:  # the common case, () included, without the ABC checks
        return value
    if isinstance(value, str | Buffer | os.PathLike) or not isinstance(value, Iterable):
        return (value,)
    return tuple(value)


def or_default(value: _T | None, default: _T) -> _T:
    """``value``, or ``default`` when it is ``None`` (an option left to the format)."""
    return default if value is None else value


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
    ``feed``); ``writes`` / ``reads`` name the options each direction takes (the
    :class:`FormatOptions` fields); ``check`` validates their values for mode ``"wb"``
    or ``"rb"`` (raises :class:`~streamcrypt.errors.InvalidParameterError`; ``None``:
    nothing to check beyond what ``check_options`` checks); ``derive``
    turns options keyed by a password into options keyed by its derived key (slow: the
    async calls run it off the event loop; ``None``: nothing to derive). ``detect``
    tells the format by the first bytes of a stream (``None``: nothing on the wire says
    so). ``header_size`` gives the bytes the header takes at the start of ``head``
    (``None`` while ``head`` is too short), up to ``max_header_size``; ``layout``
    authenticates the header and maps a stream of the given size for random access
    (``None``: no random access). ``opens_files``: :func:`streamcrypt.open` speaks it.
    ``detects_truncation_at_boundary`` is False for a format without an end marker.
    ``armor``: the format's text armor, if it has one. ``seal_message`` /
    ``open_message`` (a format without armor) run a whole message that fits one segment
    at once, by the same segment rule as the batch path, the options already checked;
    they return ``None`` for any other message, which then takes the engine's path.
    ``rekey`` (a format with recipient stanzas) rewrites the header at the start of
    ``head`` with the read options' identities, recipients added and removed (or the
    options' ``recipients``, the whole new list): the new header, the new header made
    as long as the old one modulo the given block size where the format can pad (else
    the first again), and the length of the old one (``streamcrypt.rekey``).
    """

    name: str
    encryptor: Callable[[FormatOptions], Transform]
    decryptor: Callable[[FormatOptions], Transform]
    writes: frozenset[str]
    reads: frozenset[str]
    check: Callable[[FormatOptions, str], None] | None = None
    derive: Callable[[FormatOptions], FormatOptions] | None = None
    detect: Callable[[bytes], bool] | None = None
    header_size: Callable[[bytes], int | None] | None = None
    max_header_size: int = 0
    layout: Callable[[FormatOptions, ReadAt, int], SegmentLayout] | None = None
    opens_files: bool = False
    detects_truncation_at_boundary: bool = True
    armor: TextArmor | None = None
    seal_message: Callable[[FormatOptions, Buffer], bytes | None] | None = None
    open_message: Callable[[FormatOptions, Buffer], bytes | None] | None = None
    rekey: (
        Callable[
            [FormatOptions, bytes, tuple[RecipientLike, ...], tuple[RecipientLike, ...], int],
            tuple[bytes, bytes, int],
        ]
        | None
    ) = None
    #: For writing and for reading: a getter of the options not taken, and what it gets
    #: from the defaults (made with the descriptor, so that a call checks in one
    #: comparison).
    _untaken_wb: tuple[Callable[[FormatOptions], object], object] = field(
        init=False, repr=False, compare=False
    )
    _untaken_rb: tuple[Callable[[FormatOptions], object], object] = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        unknown = (self.writes | self.reads) - {name for name, _ in _DEFAULTS}
        if unknown:
            raise InvalidParameterError(f"{self.name}: no such option {sorted(unknown)}")
        object.__setattr__(self, "_untaken_wb", _untaken(self.writes))
        object.__setattr__(self, "_untaken_rb", _untaken(self.reads))

    def check_options(self, options: FormatOptions, mode: str) -> None:
        """Raise :class:`~streamcrypt.errors.InvalidParameterError` for an option this
        format does not take in ``mode`` (``"wb"`` or ``"rb"``), naming the format, the
        keyword and the ones it takes, an ``aad=`` that is not bytes-like or a
        ``segment_size=`` that is not an ``int`` (a ``bool`` neither); then as
        :attr:`check` for their values."""
        if not isinstance(options.aad, _BYTES_LIKE):
            raise InvalidParameterError(
                f"aad= must be bytes-like, not {type(options.aad).__name__}"
            )
        size = options.segment_size
        if size is not None and type(size) is not int:
            raise InvalidParameterError(f"segment_size= must be an int, not {type(size).__name__}")
        untaken, defaults = self._untaken_wb if mode == "wb" else self._untaken_rb
        # One native comparison in the common case; the rare other one names the option.
        for name in options.given() if untaken(options) != defaults else ():
            takes = self.writes if mode == "wb" else self.reads
            if name not in takes:
                raise InvalidParameterError(
                    f'format="{self.name}" does not take {name}= when '
                    f"{'writing' if mode == 'wb' else 'reading'}; it takes "
                    f"{', '.join(f'{n}=' for n in _in_order(takes))}{_owners(name, mode)}"
                )
        if self.check is not None:
            self.check(options, mode)

    def encryptors(self, options: FormatOptions) -> list[Transform]:
        """The stages that write this format: its encryptor, then its armor when
        ``options.armor``. Raises :class:`~streamcrypt.errors.InvalidParameterError` for
        options the format does not take, else as its encryptor."""
        self.check_options(options, "wb")
        stages = [self.encryptor(options)]
        if options.armor:
            assert self.armor is not None  # writes names armor only with an armor
            stages.append(self.armor.encoder())
        return stages

    def decryptors(
        self, options: FormatOptions, head: Buffer, at_end: bool = True
    ) -> list[Transform]:
        """The stages that read this format, given the stream's first bytes ``head``
        (``at_end``: they are all of it): the armor decoder when ``head`` is armored,
        then the decryptor. Raises as :meth:`encryptors`."""
        self.check_options(options, "rb")
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


#: What ``aad=`` may be (a tuple: ``isinstance`` checks it faster than the union).
_BYTES_LIKE = (bytes, bytearray, memoryview)


def _untaken(takes: frozenset[str]) -> tuple[Callable[[FormatOptions], object], object]:
    """A getter of the options not in ``takes``, and what it gets from the defaults."""
    # the other options as slices, one a run of consecutive fields (a tuple's slice is a
    # copy in C; the native format's writes: one slice, 0.35 -> 0.2 us a check)
    runs: list[slice] = []
    for i, name in enumerate(_NAMES):
        if name in takes:
            continue
        if runs and runs[-1].stop == i:
            runs[-1] = slice(runs[-1].start, i + 1)
        else:
            runs.append(slice(i, i + 1))
    getter: Callable[[FormatOptions], object] = (
        operator.itemgetter(*runs) if runs else lambda options: ()
    )
    return getter, getter(FormatOptions())


def _owners(option: str, mode: str) -> str:
    """Which formats take ``option`` in ``mode``, as the end of a message."""
    from . import FORMATS  # the registry, one layer of this package up

    owners = [
        f'"{f.name}"' for f in FORMATS.values() if option in (f.writes if mode == "wb" else f.reads)
    ]
    return f" ({option}= is for format={' or '.join(owners)})" if owners else ""


def _in_order(names: Iterable[str]) -> list[str]:
    """``names`` in :class:`FormatOptions` field order."""
    chosen = set(names)
    return [name for name, _ in _DEFAULTS if name in chosen]
