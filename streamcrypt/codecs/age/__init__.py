"""age v1 (age-encryption.org/v1, c2sp.org/age), byte for byte and strict.

Theory of operation
-------------------
An age file is a textual header and a binary payload::

    age-encryption.org/v1
    -> X25519 <ephemeral share, base64>
    <wrapped file key, base64 wrapped at 64 columns, last line shorter than 64>
    --- <HMAC-SHA-256 of the header up to and including "---", base64>
    <16-byte payload nonce><chunk 0><chunk 1>...<final chunk>

A random 16-byte *file key* is wrapped once per recipient in a *stanza*: X25519
(HKDF-SHA-256 over the shared secret with salt ``share || recipient``, then
ChaCha20-Poly1305 with a zero nonce), scrypt (a passphrase; must be the only stanza) or
the hybrid post-quantum ``mlkem768x25519`` (HPKE with ML-KEM-768 + X25519); existing SSH
keys serve as ``ssh-ed25519`` (X25519 with a tweak) and ``ssh-rsa`` (RSA-OAEP); plugin
recipients and identities (``age1NAME1...``, ``AGE-PLUGIN-NAME-1...``) run the program
``age-plugin-NAME`` (c2sp.org/age-plugin: ``_plugin``, ``_plugin_process``). An identity
unwraps the file key from a stanza addressed to it; the header MAC, keyed with
``HKDF(file key, "", "header")``, then authenticates the whole header. The payload key
is ``HKDF(file key, salt = nonce, "payload")`` and the payload is a STREAM of 64 KiB
ChaCha20-Poly1305 chunks with nonce ``uint88_be(counter) || last_flag``. The final chunk
may be full; it is empty only when the whole payload is empty. So the payload is a
segmented stream (:class:`AgeCodec` on the shared segmented core) with one chunk of
read-ahead, and the chunks can be sealed and opened in parallel.

Parsing is strict as the spec demands: canonical unpadded base64 everywhere, stanza
arguments of visible ASCII separated by single spaces, 64-column body lines ending with
a shorter line, exact argument counts and lengths per stanza type, and the work-factor
cap for scrypt. Failures are typed: a header that does not parse raises
:class:`FormatError` (:class:`UnsupportedFormatError` for another age version), no
identity matching raises :class:`UnknownKeyError` (a wrong passphrase too: the scrypt
stanza simply does not open, exactly as an X25519 stanza for someone else does), a bad
header MAC or payload chunk raises :class:`AuthenticationError`, a stream that ends
before its final chunk raises :class:`TruncatedStreamError`, an scrypt work factor over
the cap raises :class:`LimitExceededError`.

Where things are (as in Go age): ``_header`` (the text form, strict parsing, the MAC),
one module per recipient family (``_scrypt``, ``_ssh``, ``_mlkem``; the X25519 pair
is shared with the envelope, ``codecs._x25519``), ``_recipients`` (their text forms
and finding the file key), ``_payload`` (the chunks and the transforms), ``_rekey``
(a header re-keyed, the payload kept); this module re-exports the public names and
holds :data:`FORMAT`, the one entry the layers above use (one-shot calls are
``streamcrypt.encrypt_bytes(..., format="age")``).
"""

from __future__ import annotations

from typing import cast

from ...errors import InvalidParameterError
from .._format import FormatOptions, ReadAt, SegmentedFormat, or_default
from .._segmented import SegmentLayout
from .._stanza import Identity, IdentityLike, Recipient, RecipientLike, Stanza
from .._x25519 import X25519Identity, X25519Recipient
from ..armor import ARMOR
from ._header import (
    CHUNK_SIZE,
    DEFAULT_MAX_HEADER_SIZE,
    FILE_KEY_SIZE,
    NONCE_SIZE,
    TAG_SIZE,
    VERSION_LINE,
    AgeHeader,
    parse_header,
)
from ._mlkem import MLKEM768X25519Identity, MLKEM768X25519Recipient
from ._payload import AgeCodec, AgeDecryptor, AgeEncryptor, layout
from ._plugin import PluginReply, PluginServer, PluginUI, UnwrapRequest, WrapRequest
from ._plugin_process import PluginIdentity, PluginRecipient, plugin_identity, plugin_recipient
from ._recipients import (
    AnyIdentity,
    AnyRecipient,
    parse_identities,
    parse_identity,
    parse_recipient,
)
from ._rekey import rekey_header, rekey_headers
from ._scrypt import DEFAULT_MAX_WORK_FACTOR, DEFAULT_WORK_FACTOR, ScryptIdentity, ScryptRecipient
from ._ssh import SshEd25519Identity, SshEd25519Recipient, SshRsaIdentity, SshRsaRecipient

__all__ = [
    "CHUNK_SIZE",
    "DEFAULT_MAX_HEADER_SIZE",
    "DEFAULT_MAX_WORK_FACTOR",
    "DEFAULT_WORK_FACTOR",
    "FILE_KEY_SIZE",
    "FORMAT",
    "NONCE_SIZE",
    "TAG_SIZE",
    "VERSION_LINE",
    "AgeCodec",
    "AgeDecryptor",
    "AgeEncryptor",
    "AgeHeader",
    "AnyIdentity",
    "AnyRecipient",
    "Identity",
    "IdentityLike",
    "MLKEM768X25519Identity",
    "MLKEM768X25519Recipient",
    "PluginIdentity",
    "PluginRecipient",
    "PluginReply",
    "PluginServer",
    "PluginUI",
    "Recipient",
    "RecipientLike",
    "ScryptIdentity",
    "ScryptRecipient",
    "SshEd25519Identity",
    "SshEd25519Recipient",
    "SshRsaIdentity",
    "SshRsaRecipient",
    "Stanza",
    "UnwrapRequest",
    "WrapRequest",
    "X25519Identity",
    "X25519Recipient",
    "layout",
    "parse_header",
    "parse_identities",
    "parse_identity",
    "parse_recipient",
    "plugin_identity",
    "plugin_recipient",
    "rekey_header",
]


def _check(options: FormatOptions, mode: str) -> None:
    """Refuse a call with no key at all (InvalidParameterError); the descriptor's
    ``writes`` / ``reads`` refuse the other direction's keys and every other keyword."""
    if mode == "wb" and not (options.recipients or options.passphrase):
        raise InvalidParameterError(
            "writing age takes at least one recipient (recipients=, public keys) or passphrase="
        )
    if mode == "rb" and not (options.identities or options.passphrase):
        raise InvalidParameterError("reading age takes identities= (secret keys) or passphrase=")


def _header_size(head: bytes) -> int | None:
    header = parse_header(head)
    return None if header is None else header.size + NONCE_SIZE


def _layout(options: FormatOptions, read_at: ReadAt, stream_size: int) -> SegmentLayout:
    head = read_at(0, min(stream_size, DEFAULT_MAX_HEADER_SIZE))
    return layout(
        head,
        stream_size,
        identities=options.identities,
        passphrase=options.passphrase,
        max_work_factor=cast(int, or_default(options.max_work_factor, DEFAULT_MAX_WORK_FACTOR)),
    )


def _rekey(
    options: FormatOptions,
    head: bytes,
    add: tuple[RecipientLike, ...],
    remove: tuple[RecipientLike, ...],
    align: int,
) -> tuple[bytes, bytes, int]:
    return rekey_headers(
        head,
        align,
        identities=options.identities,
        passphrase=options.passphrase,
        recipients=options.recipients,
        add=add,
        remove=remove,
        max_work_factor=cast(int, or_default(options.max_work_factor, DEFAULT_MAX_WORK_FACTOR)),
    )


#: age v1's format descriptor (binary; armor is a stage in front).
FORMAT = SegmentedFormat(
    "age",
    encryptor=lambda o: AgeEncryptor(
        recipients=o.recipients,
        passphrase=o.passphrase,
        work_factor=cast(int, or_default(o.work_factor, DEFAULT_WORK_FACTOR)),
    ),
    decryptor=lambda o: AgeDecryptor(
        identities=o.identities,
        passphrase=o.passphrase,
        max_work_factor=cast(int, or_default(o.max_work_factor, DEFAULT_MAX_WORK_FACTOR)),
    ),
    writes=frozenset({"recipients", "passphrase", "work_factor", "armor"}),
    reads=frozenset({"identities", "passphrase", "max_work_factor"}),
    check=_check,
    detect=lambda head: head.startswith(VERSION_LINE),
    header_size=_header_size,
    max_header_size=DEFAULT_MAX_HEADER_SIZE,
    layout=_layout,
    opens_files=True,
    armor=ARMOR,
    rekey=_rekey,
)
