"""The streamcrypt envelope, version 1: the native container for passwords and public keys.

The wire format and its rules are specified once, in docs/FORMAT.md ("The streamcrypt
envelope"); this module implements it.

Theory of operation
-------------------
A random *file key* is wrapped once per recipient into a *stanza* whose check value lets
an identity find its own without telling anyone else whom it is for; the header's MAC
and the payload (a native container, the header as associated data) are keyed from the
file key, so no stanza can be swapped, dropped or added unnoticed. The recipient model
and the X25519 key pair are age's (``codecs._stanza``, ``codecs._x25519``). A signing
encryptor is the segmented encryptor, then a tap that hashes the ciphertext in order and
appends the signature; a verifying decryptor holds back the last 64 bytes and gives the
segments' jobs to the engine only once ``finish()`` checked the signature, so segments
still open in parallel and nothing comes out unchecked. ``_header`` holds the wire form,
``_recipients`` the stanza types, ``_stream`` the transforms; this module holds
:data:`FORMAT`.
"""

from __future__ import annotations

from typing import cast

from ...keys import MAX_READ_PARAMS, MODERATE, Argon2Params, PasswordParams
from .. import container
from .._format import FormatOptions, ReadAt, SegmentedFormat, or_default
from .._segmented import SegmentLayout
from .._stanza import Identity, IdentityLike, Recipient, RecipientLike, Stanza
from .._x25519 import X25519Identity, X25519Recipient
from ._header import (
    ARGON2ID,
    ECIES_SECP256K1,
    ECIES_X25519,
    MAGIC,
    MAX_HEADER_SIZE,
    MAX_STANZAS,
    SCRYPT,
    SIGNATURE_SIZE,
    VERSION,
    X25519,
    EnvelopeHeader,
    parse_header,
)
from ._recipients import (
    EciesIdentity,
    EciesRecipient,
    PassphraseIdentity,
    PassphraseRecipient,
    parse_identity,
    parse_recipient,
)
from ._rekey import rekey_header
from ._stream import DEFAULT_MAX_BUFFERED, EnvelopeDecryptor, EnvelopeEncryptor, layout

__all__ = [
    "ARGON2ID",
    "DEFAULT_MAX_BUFFERED",
    "ECIES_SECP256K1",
    "ECIES_X25519",
    "FORMAT",
    "MAGIC",
    "MAX_HEADER_SIZE",
    "MAX_STANZAS",
    "SCRYPT",
    "SIGNATURE_SIZE",
    "VERSION",
    "X25519",
    "EciesIdentity",
    "EciesRecipient",
    "EnvelopeDecryptor",
    "EnvelopeEncryptor",
    "EnvelopeHeader",
    "Identity",
    "IdentityLike",
    "PassphraseIdentity",
    "PassphraseRecipient",
    "Recipient",
    "RecipientLike",
    "Stanza",
    "X25519Identity",
    "X25519Recipient",
    "layout",
    "parse_header",
    "parse_identity",
    "parse_recipient",
    "rekey_header",
]


def _layout(options: FormatOptions, read_at: ReadAt, stream_size: int) -> SegmentLayout:
    head = read_at(0, min(stream_size, 65 << 10))
    return layout(
        head,
        stream_size,
        identities=options.identities,
        passphrase=options.passphrase,
        aad=options.aad,
        allow_unverified=options.allow_unverified,
        max_work_factor=cast("Argon2Params", or_default(options.max_work_factor, MAX_READ_PARAMS)),
    )


def _rekey(
    options: FormatOptions,
    head: bytes,
    add: tuple[RecipientLike, ...],
    remove: tuple[RecipientLike, ...],
    align: int,
) -> tuple[bytes, bytes, int]:
    """No padding in an envelope header: its one header serves both (``align`` unused)."""
    header, size = rekey_header(
        head,
        identities=options.identities,
        passphrase=options.passphrase,
        recipients=options.recipients,
        add=add,
        remove=remove,
        aad=options.aad,
        max_work_factor=cast("Argon2Params", or_default(options.max_work_factor, MAX_READ_PARAMS)),
    )
    return header, header, size


#: The envelope's format descriptor (unsigned; ``sign_with`` / ``verify_with`` are
#: the codec's own keywords).
FORMAT = SegmentedFormat(
    "envelope",
    encryptor=lambda o: EnvelopeEncryptor(
        recipients=o.recipients,
        passphrase=o.passphrase,
        suite=o.suite or "aes-256-gcm",
        segment_size=or_default(o.segment_size, container.DEFAULT_SEGMENT_SIZE),
        aad=o.aad,
        work_factor=cast("PasswordParams", or_default(o.work_factor, MODERATE)),
        sign_with=o.sign_with,
    ),
    decryptor=lambda o: EnvelopeDecryptor(
        identities=o.identities,
        passphrase=o.passphrase,
        aad=o.aad,
        max_work_factor=cast("Argon2Params", or_default(o.max_work_factor, MAX_READ_PARAMS)),
        verify_with=o.verify_with,
        allow_unverified=o.allow_unverified,
    ),
    writes=frozenset(
        {"recipients", "passphrase", "suite", "segment_size", "aad", "work_factor", "sign_with"}
    ),
    reads=frozenset(
        {"identities", "passphrase", "aad", "max_work_factor", "verify_with", "allow_unverified"}
    ),
    detect=lambda head: head.startswith(MAGIC),
    layout=_layout,
    rekey=_rekey,
)
