"""Layer 2: wire formats as sans-I/O encoders and decoders on the layer-1 primitives.

One module per format (``age`` and ``envelope`` are packages, shaped like Go age's:
header, recipients, payload): ``container`` (the native format, docs/FORMAT.md), ``age``,
``tink`` (its keysets in ``tink_keyset``), ``cobblestone`` (C2SP chunked encryption),
``ece`` (RFC 8188), ``secretstream`` (libsodium), ``rclone`` (rclone crypt), ``aws`` (the
AWS Encryption SDK message format), ``envelope`` (the native container for passwords,
X25519/ECIES recipients and signatures), ``ecies`` (ECIES as eciespy speaks it), ``armor`` (age's ASCII armor), ``noise`` (the Noise
handshake). The one-shot and async calls for each are ``streamcrypt.encrypt_bytes`` /
``encrypt`` / ... with ``format=``, one layer up.
Each segmented format's module exports ``FORMAT``, its :class:`SegmentedFormat`
descriptor (detection, encryptor/decryptor factories from one :class:`FormatOptions`
vocabulary, header size, layout and range reads); :data:`FORMATS` registers them, one line
each. ``backup`` (the chunked-backup store's packs, index files and snapshots) needs the
``backup`` extra and is imported on its own: ``from streamcrypt.codecs import backup``.
:class:`X25519Recipient` / :class:`X25519Identity` are the one X25519 key pair age and
the envelope share (each format writes its own stanza for it).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from .._lazy import lazy_exports
from ..errors import FormatError, InvalidParameterError, TruncatedStreamError
from ._format import FormatOptions as FormatOptions
from ._format import SegmentedFormat as SegmentedFormat
from ._format import one_or_many as one_or_many

if TYPE_CHECKING:
    from . import age as age
    from . import armor as armor
    from . import aws as aws
    from . import cobblestone as cobblestone
    from . import container as container
    from . import ece as ece
    from . import ecies as ecies
    from . import envelope as envelope
    from . import noise as noise
    from . import rclone as rclone
    from . import secretstream as secretstream
    from . import tink as tink
    from . import tink_keyset as tink_keyset
    from ._format import IdentityLike as IdentityLike
    from ._format import KeyLike as KeyLike
    from ._format import ReadAt as ReadAt
    from ._format import RecipientLike as RecipientLike
    from ._format import TextArmor as TextArmor
    from ._segmented import SegmentCodec as SegmentCodec
    from ._segmented import SegmentedDecryptor as SegmentedDecryptor
    from ._segmented import SegmentedEncryptor as SegmentedEncryptor
    from ._segmented import SegmentedTransform as SegmentedTransform
    from ._segmented import SegmentJob as SegmentJob
    from ._segmented import SegmentLayout as SegmentLayout
    from ._stanza import Identity as Identity
    from ._stanza import Recipient as Recipient
    from ._stanza import Stanza as Stanza
    from ._x25519 import X25519Identity as X25519Identity
    from ._x25519 import X25519Recipient as X25519Recipient
    from .age import AgeDecryptor as AgeDecryptor
    from .age import AgeEncryptor as AgeEncryptor
    from .aws import AwsDecryptor as AwsDecryptor
    from .aws import AwsEncryptor as AwsEncryptor
    from .cobblestone import CobblestoneDecryptor as CobblestoneDecryptor
    from .cobblestone import CobblestoneEncryptor as CobblestoneEncryptor
    from .container import StreamDecryptor as StreamDecryptor
    from .container import StreamEncryptor as StreamEncryptor
    from .ece import EceDecryptor as EceDecryptor
    from .ece import EceEncryptor as EceEncryptor
    from .envelope import EnvelopeDecryptor as EnvelopeDecryptor
    from .envelope import EnvelopeEncryptor as EnvelopeEncryptor
    from .noise import NoiseHandshake as NoiseHandshake
    from .rclone import RcloneDecryptor as RcloneDecryptor
    from .rclone import RcloneEncryptor as RcloneEncryptor
    from .secretstream import SecretStreamDecryptor as SecretStreamDecryptor
    from .secretstream import SecretStreamEncryptor as SecretStreamEncryptor
    from .tink import TinkStreamDecryptor as TinkStreamDecryptor
    from .tink import TinkStreamEncryptor as TinkStreamEncryptor


#: Each format's name and the codec module whose ``FORMAT`` descriptor it is: the one
#: registration line a format adds.
_FORMAT_MODULES = {
    "native": "container",
    "envelope": "envelope",
    "age": "age",
    "tink": "tink",
    "cobblestone": "cobblestone",
    "ece": "ece",
    "rclone": "rclone",
    "aws": "aws",
    "secretstream": "secretstream",
}


#: The descriptors looked up so far.
_LOADED: dict[str, SegmentedFormat] = {}


class _Formats(Mapping[str, "SegmentedFormat"]):
    """:data:`FORMATS`: every segmented format by name, its descriptor the codec module's
    ``FORMAT``. A lookup imports that format's module only (age, aws, ... take most of
    the package's import time, and a command needs one); iterating imports them all."""

    __slots__ = ()

    def __getitem__(self, name: str) -> SegmentedFormat:
        fmt = _LOADED.get(name)
        if fmt is None:
            module = importlib.import_module(f".{_FORMAT_MODULES[name]}", __name__)
            fmt = _LOADED[name] = module.FORMAT
        return fmt

    def __iter__(self) -> Iterator[str]:
        return iter(_FORMAT_MODULES)

    def __len__(self) -> int:
        return len(_FORMAT_MODULES)

    def __repr__(self) -> str:
        return f"<streamcrypt formats: {', '.join(_FORMAT_MODULES)}>"


#: Every segmented format by name, in the order reads try to detect them.
FORMATS: Mapping[str, SegmentedFormat] = _Formats()

#: Bytes of a stream's start that tell its format (the longest marker, and age's armor
#: line after some whitespace).
DETECT_BYTES = 64


def check_detectable(options: FormatOptions) -> None:
    """Raise :class:`~streamcrypt.errors.InvalidParameterError` when no format that is
    told by its first bytes reads with all of ``options``: what a read that detects its
    format can check at the call."""
    given = set(options.given())
    if not any(given <= f.reads for f in FORMATS.values() if f.detect or f.armor):
        raise InvalidParameterError(
            f"no format told by its first bytes reads with {', '.join(f'{n}=' for n in sorted(given))}"
            " together: drop the ones the data's format does not take, or name it with format="
        )


def detect_format(head: bytes, options: FormatOptions) -> SegmentedFormat:
    """The format of data starting with ``head`` (its first :data:`DETECT_BYTES`), told
    by the first registered descriptor that identifies it, with ``options`` checked for
    reading it. Raises :class:`~streamcrypt.errors.TruncatedStreamError` for no data,
    :class:`~streamcrypt.errors.FormatError` when no format says so
    (a ``key=`` no format takes, or none at all, is named first, as the native format
    names it), :class:`~streamcrypt.errors.InvalidParameterError` for an option the
    format found does not take: the message names it ("this is an age file ...")."""
    blind = []
    # FORMATS' order, its loaded descriptors taken without its Python __iter__ and
    # __getitem__ (0.2 us a message; FORMATS.values()' generator cost 1.5)
    for name in _FORMAT_MODULES:
        fmt = _LOADED.get(name) or FORMATS[name]
        if fmt.identifies(head):
            try:
                fmt.check_options(options, "rb")
            except InvalidParameterError as exc:
                article = "an" if fmt.name[0] in "aeiou" else "a"
                raise InvalidParameterError(
                    f"this is {article} {fmt.name} file (detected from its first bytes; name "
                    f"format= if it is not): {exc}"
                ) from None
            return fmt
        if fmt.detect is None and fmt.armor is None:
            blind.append(fmt.name)
    if options.given() in ([], ["key"]) and isinstance(options.key, str | int | None):
        FORMATS["native"].decryptor(options)  # names what a key must be
    if not head:
        raise TruncatedStreamError("the data is empty: nothing was written, or all was cut")
    raise FormatError(
        "the data does not start like any format streamcrypt tells by its first bytes: "
        f"name it with format= ({', '.join(blind)} carry no marker)"
    )


#: Where each name is defined: imported from there on first use.
_TABLE = {
    "._format": (
        "FormatOptions",
        "IdentityLike",
        "KeyLike",
        "ReadAt",
        "RecipientLike",
        "SegmentedFormat",
        "TextArmor",
    ),
    "._segmented": (
        "SegmentCodec",
        "SegmentedDecryptor",
        "SegmentedEncryptor",
        "SegmentedTransform",
        "SegmentJob",
        "SegmentLayout",
    ),
    "._stanza": ("Identity", "Recipient", "Stanza"),
    "._x25519": ("X25519Identity", "X25519Recipient"),
    ".age": ("AgeDecryptor", "AgeEncryptor"),
    ".aws": ("AwsDecryptor", "AwsEncryptor"),
    ".cobblestone": ("CobblestoneDecryptor", "CobblestoneEncryptor"),
    ".container": ("StreamDecryptor", "StreamEncryptor"),
    ".ece": ("EceDecryptor", "EceEncryptor"),
    ".envelope": ("EnvelopeDecryptor", "EnvelopeEncryptor"),
    ".noise": ("NoiseHandshake",),
    ".rclone": ("RcloneDecryptor", "RcloneEncryptor"),
    ".secretstream": ("SecretStreamDecryptor", "SecretStreamEncryptor"),
    ".tink": ("TinkStreamDecryptor", "TinkStreamEncryptor"),
}
#: The modules of this package, imported when first read as attributes.
_SUBMODULES = (
    "age",
    "armor",
    "aws",
    "cobblestone",
    "container",
    "ece",
    "ecies",
    "envelope",
    "noise",
    "rclone",
    "secretstream",
    "tink",
    "tink_keyset",
)

__all__ = [
    "DETECT_BYTES",
    "FORMATS",
    "check_detectable",
    "detect_format",
    "one_or_many",
    *(name for names in _TABLE.values() for name in names),
    *_SUBMODULES,
]
__getattr__, __dir__ = lazy_exports(__name__, _TABLE, _SUBMODULES)
