"""Layer 2: wire formats as sans-I/O encoders and decoders on the layer-1 primitives.

One module per format (``age`` and ``envelope`` are packages, shaped like Go age's:
header, recipients, payload): ``container`` (the native format, docs/FORMAT.md), ``age``,
``tink`` (its keysets in ``tink_keyset``), ``cobblestone`` (C2SP chunked encryption),
``ece`` (RFC 8188), ``secretstream`` (libsodium), ``rclone`` (rclone crypt), ``aws`` (the
AWS Encryption SDK message format), ``envelope`` (the native container for passwords,
X25519/ECIES recipients and signatures), ``ecies`` (ECIES as eciespy speaks it), ``armor`` (age's ASCII armor), ``noise`` (the Noise
handshake). Async streaming for each lives one layer up in :mod:`streamcrypt.formats`.
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
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from . import (
        age,
        armor,
        aws,
        cobblestone,
        container,
        ece,
        ecies,
        envelope,
        noise,
        rclone,
        secretstream,
        tink,
        tink_keyset,
    )
    from ._format import FormatOptions as FormatOptions
    from ._format import ReadAt as ReadAt
    from ._format import SegmentedFormat as SegmentedFormat
    from ._format import TextArmor as TextArmor
    from ._format import registry as registry
    from ._segmented import SegmentCodec as SegmentCodec
    from ._segmented import SegmentedDecryptor as SegmentedDecryptor
    from ._segmented import SegmentedEncryptor as SegmentedEncryptor
    from ._segmented import SegmentedTransform as SegmentedTransform
    from ._segmented import SegmentJob as SegmentJob
    from ._segmented import SegmentLayout as SegmentLayout
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

    #: Every segmented format by name (built on first use; see :func:`__getattr__`).
    FORMATS: Mapping[str, SegmentedFormat]

__all__ = [
    "FORMATS",
    "AgeDecryptor",
    "AgeEncryptor",
    "AwsDecryptor",
    "AwsEncryptor",
    "CobblestoneDecryptor",
    "CobblestoneEncryptor",
    "EceDecryptor",
    "EceEncryptor",
    "EnvelopeDecryptor",
    "EnvelopeEncryptor",
    "FormatOptions",
    "NoiseHandshake",
    "RcloneDecryptor",
    "RcloneEncryptor",
    "ReadAt",
    "SecretStreamDecryptor",
    "SecretStreamEncryptor",
    "SegmentCodec",
    "SegmentJob",
    "SegmentLayout",
    "SegmentedDecryptor",
    "SegmentedEncryptor",
    "SegmentedFormat",
    "SegmentedTransform",
    "StreamDecryptor",
    "StreamEncryptor",
    "TextArmor",
    "TinkStreamDecryptor",
    "TinkStreamEncryptor",
    "X25519Identity",
    "X25519Recipient",
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
    "registry",
    "secretstream",
    "tink",
    "tink_keyset",
]

#: Each lazily loaded name: the module (relative to this package) it comes from.
_LAZY: dict[str, str] = {
    "FormatOptions": "._format",
    "ReadAt": "._format",
    "SegmentedFormat": "._format",
    "TextArmor": "._format",
    "registry": "._format",
    "SegmentCodec": "._segmented",
    "SegmentedDecryptor": "._segmented",
    "SegmentedEncryptor": "._segmented",
    "SegmentedTransform": "._segmented",
    "SegmentJob": "._segmented",
    "SegmentLayout": "._segmented",
    "X25519Identity": "._x25519",
    "X25519Recipient": "._x25519",
    "AgeDecryptor": ".age",
    "AgeEncryptor": ".age",
    "AwsDecryptor": ".aws",
    "AwsEncryptor": ".aws",
    "CobblestoneDecryptor": ".cobblestone",
    "CobblestoneEncryptor": ".cobblestone",
    "StreamDecryptor": ".container",
    "StreamEncryptor": ".container",
    "EceDecryptor": ".ece",
    "EceEncryptor": ".ece",
    "EnvelopeDecryptor": ".envelope",
    "EnvelopeEncryptor": ".envelope",
    "NoiseHandshake": ".noise",
    "RcloneDecryptor": ".rclone",
    "RcloneEncryptor": ".rclone",
    "SecretStreamDecryptor": ".secretstream",
    "SecretStreamEncryptor": ".secretstream",
    "TinkStreamDecryptor": ".tink",
    "TinkStreamEncryptor": ".tink",
}
_SUBMODULES = frozenset(
    {
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
    }
)
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


class _Formats(Mapping[str, "SegmentedFormat"]):
    """:data:`FORMATS`: every segmented format by name, its descriptor the codec module's
    ``FORMAT``. A lookup imports that format's module only (age, aws, ... take most of
    the package's import time, and a command needs one); iterating imports them all."""

    __slots__ = ()

    def __getitem__(self, name: str) -> SegmentedFormat:
        module = importlib.import_module(f".{_FORMAT_MODULES[name]}", __name__)
        fmt: SegmentedFormat = module.FORMAT
        return fmt

    def __iter__(self) -> Iterator[str]:
        return iter(_FORMAT_MODULES)

    def __len__(self) -> int:
        return len(_FORMAT_MODULES)

    def __repr__(self) -> str:
        return f"<streamcrypt formats: {', '.join(_FORMAT_MODULES)}>"


def __getattr__(name: str) -> Any:
    value: Any
    if name == "FORMATS":
        value = _Formats()
    elif name in _SUBMODULES:
        value = importlib.import_module(f".{name}", __name__)
    elif name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
