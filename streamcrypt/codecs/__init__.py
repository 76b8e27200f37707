"""Layer 2: wire formats as sans-I/O encoders and decoders on the layer-1 primitives.

One module per format: ``container`` (the native format, docs/FORMAT.md), ``age``,
``tink`` (its keysets in ``tink_keyset``), ``cobblestone`` (C2SP chunked encryption),
``ece`` (RFC 8188), ``secretstream`` (libsodium), ``rclone`` (rclone crypt), ``aws`` (the
AWS Encryption SDK message format), ``envelope`` (the native container for passwords,
X25519/ECIES recipients and signatures), ``armor`` (age's ASCII armor), ``noise`` (the Noise
handshake). Async streaming for each lives one layer up in :mod:`streamcrypt.formats`.
Each segmented format's module exports ``FORMAT``, its :class:`SegmentedFormat`
descriptor (detection, encryptor/decryptor factories from one :class:`FormatOptions`
vocabulary, header size, layout and range reads); :data:`FORMATS` registers them, one line
each. ``backup`` (the chunked-backup store's packs, index files and snapshots) needs the
``backup`` extra and is imported on its own: ``from streamcrypt.codecs import backup``.
:class:`X25519PublicText` / :class:`X25519SecretText` are the Bech32-texted X25519 key
pairs that age's and the envelope's recipients and identities subclass.
"""

from __future__ import annotations

from . import (
    age,
    armor,
    aws,
    cobblestone,
    container,
    ece,
    envelope,
    noise,
    rclone,
    secretstream,
    tink,
    tink_keyset,
)
from ._format import FormatOptions, ReadAt, SegmentedFormat, registry
from ._segmented import (
    SegmentCodec,
    SegmentedDecryptor,
    SegmentedEncryptor,
    SegmentedTransform,
    SegmentJob,
    SegmentLayout,
)
from ._x25519 import X25519PublicText, X25519SecretText
from .age import AgeDecryptor, AgeEncryptor
from .aws import AwsDecryptor, AwsEncryptor
from .cobblestone import CobblestoneDecryptor, CobblestoneEncryptor
from .container import StreamDecryptor, StreamEncryptor
from .ece import EceDecryptor, EceEncryptor
from .envelope import EnvelopeDecryptor, EnvelopeEncryptor
from .noise import NoiseHandshake
from .rclone import RcloneDecryptor, RcloneEncryptor
from .secretstream import SecretStreamDecryptor, SecretStreamEncryptor
from .tink import TinkStreamDecryptor, TinkStreamEncryptor

#: Every segmented format by name: one registration line per format, its descriptor the
#: codec module's ``FORMAT``. ``streamcrypt.open`` and the conformance tests read it.
FORMATS = registry(
    (
        container.FORMAT,
        envelope.FORMAT,
        age.FORMAT,
        tink.FORMAT,
        cobblestone.FORMAT,
        ece.FORMAT,
        rclone.FORMAT,
        aws.FORMAT,
        secretstream.FORMAT,
    )
)

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
    "TinkStreamDecryptor",
    "TinkStreamEncryptor",
    "X25519PublicText",
    "X25519SecretText",
    "age",
    "armor",
    "aws",
    "cobblestone",
    "container",
    "ece",
    "envelope",
    "noise",
    "rclone",
    "registry",
    "secretstream",
    "tink",
    "tink_keyset",
]
