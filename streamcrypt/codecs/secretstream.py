"""libsodium secretstream (``crypto_secretstream_xchacha20poly1305``) through PyNaCl.

Theory of operation
-------------------
A secretstream is a 24-byte header (a random nonce that, with the 32-byte key, seeds the
state) followed by messages. Each message is ``17 + len(plaintext)`` bytes: an encrypted
one-byte tag plus the XChaCha20 ciphertext, then a 16-byte Poly1305 MAC. Every push or
pull advances the state (a 32-bit counter in the nonce, with a key ratchet when it wraps
or when a message carries the REKEY bit), so messages can only be opened in order, once:
reordering, dropping or duplicating a message fails authentication. That makes this a
plain sequential transform, not a :class:`SegmentCodec` (no segment can be opened apart
from the ones before it). The tag of each message is authenticated:

- ``Tag.MESSAGE`` (0): an ordinary message;
- ``Tag.PUSH`` (1): end of an application-level group (a boundary marker, no effect on
  the crypto);
- ``Tag.REKEY`` (2): both sides ratchet the key after this message (forward secrecy);
- ``Tag.FINAL`` (3): the last message; both sides ratchet, and nothing may follow.

Two APIs:

- message level, :class:`SecretStreamPusher` / :class:`SecretStreamPuller`: ``push(message,
  tag=...) -> bytes`` and ``pull(ciphertext) -> (message, tag)`` on caller-framed messages,
  plus ``rekey()`` (libsodium's explicit rekey, which both sides must call at the same
  point in the stream; nothing on the wire says so);
- byte stream, :class:`SecretStreamEncryptor` / :class:`SecretStreamDecryptor`: sans-I/O
  transforms (``update`` / ``finalize``) with the framing below.

Byte-stream framing (a choice of this module; libsodium defines messages, not a stream)::

    header (24) || message_0 || message_1 || ... || message_n

Fixed-size chunks: every message but the last carries exactly ``segment_size`` plaintext
bytes (``segment_size + 17`` on the wire); the last one carries the FINAL tag and
``0..segment_size`` bytes. The encryptor sends each full chunk as soon as it has it and
makes the final message out of what is left at ``finalize()``, so its final message is
always shorter than a chunk (empty when the plaintext is a multiple of ``segment_size``).
The decryptor also accepts a full-size FINAL message (what an encoder with read-ahead
writes), and accepts PUSH and REKEY tags on any message (libsodium ratchets for REKEY by
itself).

Why fixed-size chunks rather than length-prefixed messages: it is the layout of
libsodium's own file-encryption example (read ``CHUNK_SIZE`` bytes, push, tag the last
one FINAL), so a peer written from the libsodium documentation speaks it with nothing
added; it costs no bytes beyond libsodium's 17 per message; and no unauthenticated length
field exists for an attacker to alter (a length prefix would be read, and buffered up to,
before its message authenticates). The cost: both sides must agree on ``segment_size``,
which is not on the wire (default 64 KiB; libsodium's example uses 4096, pass that to
talk to it), and message boundaries carry no application meaning (use the message-level
API for that).

End of stream: ``finalize()`` of the decryptor raises :class:`TruncatedStreamError` unless
a FINAL message was opened. Bytes after the FINAL message raise :class:`FormatError` when
the FINAL message ends on a chunk boundary the decryptor can see (a full-size FINAL);
bytes appended to a short FINAL message cannot be told apart from a longer message and
fail its authentication (:class:`AuthenticationError`). A header shorter than 24 bytes at
the end of input is :class:`TruncatedStreamError`.
"""

from __future__ import annotations

import enum
from typing import cast

from nacl import bindings as _nacl
from nacl import exceptions as _nacl_exc

from ..abc import Buffer, Lifecycle, as_buffer, as_bytes
from ..errors import (
    AuthenticationError,
    FormatError,
    InvalidParameterError,
    LimitExceededError,
    TruncatedStreamError,
)
from ..keys import HoldsSecrets, SecretKey, as_secret_key
from ._format import SegmentedFormat, or_default

__all__ = [
    "ABYTES",
    "DEFAULT_CHUNK_SIZE",
    "FORMAT",
    "HEADER_SIZE",
    "KEY_SIZE",
    "MAX_CHUNK_SIZE",
    "MESSAGE_MAX",
    "SecretStreamDecryptor",
    "SecretStreamEncryptor",
    "SecretStreamPuller",
    "SecretStreamPusher",
    "Tag",
]

#: Bytes of the stream header (libsodium's ``HEADERBYTES``, 24).
HEADER_SIZE: int = _nacl.crypto_secretstream_xchacha20poly1305_HEADERBYTES  # 24
#: Bytes each message adds: a tag byte and a 16-byte MAC (``ABYTES``, 17).
ABYTES: int = _nacl.crypto_secretstream_xchacha20poly1305_ABYTES  # 17
#: Bytes of a secretstream key (``KEYBYTES``, 32).
KEY_SIZE: int = _nacl.crypto_secretstream_xchacha20poly1305_KEYBYTES  # 32
#: Most plaintext bytes in one message (libsodium's ``MESSAGEBYTES_MAX``).
MESSAGE_MAX: int = _nacl.crypto_secretstream_xchacha20poly1305_MESSAGEBYTES_MAX
#: Plaintext bytes per message of the streaming encryptor unless ``segment_size=`` says
#: otherwise.
DEFAULT_CHUNK_SIZE = 65536
#: Largest ``segment_size`` the streaming encryptor and decryptor take (16 MiB).
MAX_CHUNK_SIZE = 1 << 24

_State = _nacl.crypto_secretstream_xchacha20poly1305_state
_init_push = _nacl.crypto_secretstream_xchacha20poly1305_init_push
_init_pull = _nacl.crypto_secretstream_xchacha20poly1305_init_pull
_push = _nacl.crypto_secretstream_xchacha20poly1305_push
_pull = _nacl.crypto_secretstream_xchacha20poly1305_pull
_rekey = _nacl.crypto_secretstream_xchacha20poly1305_rekey


class Tag(enum.IntEnum):
    """The authenticated tag of a secretstream message (libsodium's values)."""

    MESSAGE = _nacl.crypto_secretstream_xchacha20poly1305_TAG_MESSAGE
    PUSH = _nacl.crypto_secretstream_xchacha20poly1305_TAG_PUSH
    REKEY = _nacl.crypto_secretstream_xchacha20poly1305_TAG_REKEY
    FINAL = _nacl.crypto_secretstream_xchacha20poly1305_TAG_FINAL


KeyLike = Buffer | SecretKey


def _key(key: KeyLike) -> bytes:
    return as_secret_key(key, KEY_SIZE, what="secretstream key").secret_bytes()


def _check_segment_size(segment_size: int) -> None:
    if not 1 <= segment_size <= MAX_CHUNK_SIZE:
        raise InvalidParameterError(
            f"secretstream segment_size must be 1..{MAX_CHUNK_SIZE} bytes, got {segment_size}"
        )


class SecretStreamPusher(Lifecycle, HoldsSecrets):
    """The sending side, message by message. ``header`` goes first on the wire.

    Raises :class:`InvalidKeySizeError`; ``push`` raises :class:`InvalidParameterError`
    (unknown tag), :class:`LimitExceededError` (message too long); after a FINAL push the
    pusher is finalized (:class:`AlreadyFinalizedError`).
    """

    __slots__ = ("_ss", "header")

    def __init__(self, key: KeyLike) -> None:
        self._init_lifecycle()
        self._ss = _State()
        self.header: bytes = _init_push(self._ss, _key(key))

    def push(self, message: Buffer, tag: Tag | int = Tag.MESSAGE, *, ad: Buffer = b"") -> bytes:
        """Encrypt one message with ``tag``; returns ``len(message) + 17`` bytes."""
        self._check()
        try:
            tag = Tag(tag)
        except ValueError:
            raise self._break(
                InvalidParameterError(f"unknown secretstream tag {tag!r}; use Tag.*")
            ) from None
        if len(message) > MESSAGE_MAX:
            raise self._break(
                LimitExceededError(f"a secretstream message holds at most {MESSAGE_MAX} bytes")
            )
        out: bytes = _push(
            self._ss, as_bytes(message, "message"), as_bytes(ad, "ad") or None, int(tag)
        )
        if tag is Tag.FINAL:
            self._finish()
        return out

    def rekey(self) -> None:
        """Ratchet the key now; the puller must call ``rekey()`` at the same point."""
        self._check()
        _rekey(self._ss)

    def __repr__(self) -> str:
        return f"SecretStreamPusher(state={self.state.value})"


class SecretStreamPuller(Lifecycle, HoldsSecrets):
    """The receiving side, message by message, from the sender's 24-byte ``header``.

    ``pull`` raises :class:`AuthenticationError` (tampered, reordered, dropped or
    duplicated message, wrong key or header), :class:`FormatError` (a message after FINAL,
    a message shorter than 17 bytes, an unknown tag); ``finalize`` raises
    :class:`TruncatedStreamError` if FINAL never came. Construction raises
    :class:`InvalidKeySizeError` and :class:`FormatError` (header length).
    """

    __slots__ = ("_final", "_ss")

    def __init__(self, key: KeyLike, header: Buffer) -> None:
        self._init_lifecycle()
        raw = _key(key)
        if len(header) != HEADER_SIZE:
            raise FormatError(f"a secretstream header is {HEADER_SIZE} bytes, got {len(header)}")
        self._ss = _State()
        _init_pull(self._ss, bytes(header), raw)
        self._final = False

    @property
    def finished(self) -> bool:
        """True once the FINAL message was pulled."""
        return self._final

    def pull(self, ciphertext: Buffer, *, ad: Buffer = b"") -> tuple[bytes, Tag]:
        """Verify and decrypt the next message: ``(plaintext, tag)``."""
        self._check()
        if self._final:
            raise self._break(
                FormatError("data after the FINAL secretstream message: the stream was extended")
            )
        if len(ciphertext) < ABYTES:
            raise self._break(
                FormatError(
                    f"a secretstream message is at least {ABYTES} bytes, got {len(ciphertext)}"
                )
            )
        if len(ciphertext) > MESSAGE_MAX + ABYTES:
            raise self._break(LimitExceededError("secretstream message is too long"))
        try:
            message, raw_tag = _pull(
                self._ss, as_bytes(ciphertext, "ciphertext"), as_bytes(ad, "ad") or None
            )
        except _nacl_exc.RuntimeError:
            raise self._break(
                AuthenticationError(
                    "secretstream message did not authenticate: wrong key or header, "
                    "tampered, reordered, dropped or duplicated message, or wrong ad"
                )
            ) from None
        try:
            tag = Tag(raw_tag)
        except ValueError:
            raise self._break(FormatError(f"unknown secretstream tag {raw_tag}")) from None
        if tag is Tag.FINAL:
            self._final = True
        return message, tag

    def rekey(self) -> None:
        """Ratchet the key now, where the pusher called ``rekey()``."""
        self._check()
        _rekey(self._ss)

    def finalize(self) -> None:
        """End of input: raises :class:`TruncatedStreamError` unless FINAL was pulled."""
        self._check()
        if not self._final:
            raise self._break(
                TruncatedStreamError("the secretstream ended without its FINAL message: truncated")
            )
        self._finish()

    def __repr__(self) -> str:
        return f"SecretStreamPuller(state={self.state.value}, finished={self._final})"


class _ByteStream(Lifecycle, HoldsSecrets):
    """The byte-stream transforms' chunk size, associated data and bytes held."""

    __slots__ = ("_aad", "_chunk", "_pending")

    def __init__(
        self,
        key: KeyLike,
        *,
        segment_size: int = DEFAULT_CHUNK_SIZE,
        aad: Buffer = b"",
    ) -> None:
        self._init_lifecycle()
        _check_segment_size(segment_size)
        self._chunk = segment_size
        self._aad = as_bytes(aad, "aad")
        self._pending = bytearray()
        self._start(key)

    def _start(self, key: KeyLike) -> None:  # this direction's state for ``key``
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(segment_size={self._chunk}, state={self.state.value})"


class SecretStreamEncryptor(_ByteStream):
    """Encrypt a byte stream into header + fixed-size secretstream messages (sans-I/O).

    ``update`` returns the header first, then a message per full ``segment_size`` of input;
    ``finalize`` returns the FINAL message (what is left, possibly empty). Raises
    :class:`InvalidKeySizeError`, :class:`InvalidParameterError` (chunk size).
    """

    __slots__ = ("_header", "_pusher", "_rekey_next")

    def _start(self, key: KeyLike) -> None:
        self._pusher = SecretStreamPusher(key)
        self._header = self._pusher.header
        self._rekey_next = False

    @property
    def header(self) -> bytes:
        """The stream header (also emitted by the first ``update``/``finalize``)."""
        return self._pusher.header

    def rekey(self) -> None:
        """Tag the message now being filled REKEY: both sides ratchet after it.

        The decryptor follows on its own (the tag is authenticated); nothing else to agree.
        """
        self._check()
        self._rekey_next = True

    def _take_header(self) -> bytes:
        header, self._header = self._header, b""
        return header

    def _push(self, data: Buffer, tag: Tag) -> bytes:
        if tag is Tag.MESSAGE and self._rekey_next:
            tag = Tag.REKEY
        if tag is not Tag.FINAL:
            self._rekey_next = False
        return self._pusher.push(data, tag, ad=self._aad)

    def update(self, data: Buffer) -> bytes:
        """Encrypt what fills whole chunks; buffer the rest."""
        self._check()
        try:
            out = [self._take_header()]
            view = memoryview(as_buffer(data, "data")).cast("B")
            pending, chunk = self._pending, self._chunk
            pos = 0
            if pending:
                need = chunk - len(pending)
                if len(view) < need:
                    pending += view
                    return out[0]
                pending += view[:need]
                pos = need
                out.append(self._push(pending, Tag.MESSAGE))
                pending.clear()
            while len(view) - pos >= chunk:
                out.append(self._push(view[pos : pos + chunk], Tag.MESSAGE))
                pos += chunk
            pending += view[pos:]
            return b"".join(out)
        except Exception as exc:
            raise self._break(exc) from None

    def finalize(self) -> bytes:
        """Encrypt the rest as the FINAL message."""
        self._check()
        try:
            out = self._take_header() + self._push(self._pending, Tag.FINAL)
        except Exception as exc:
            raise self._break(exc) from None
        self._pending.clear()
        self._finish()
        return out


class SecretStreamDecryptor(_ByteStream):
    """Decrypt header + fixed-size secretstream messages, releasing only verified bytes.

    ``segment_size`` must be the encryptor's. Raises :class:`AuthenticationError`,
    :class:`TruncatedStreamError` (no FINAL message, or input ending inside the header or a
    message), :class:`FormatError` (data after FINAL), :class:`InvalidKeySizeError`,
    :class:`InvalidParameterError`; after a failure every call raises
    :class:`BrokenTransformError`.
    """

    __slots__ = ("_key", "_puller", "tags")

    def _start(self, key: KeyLike) -> None:
        self._key = as_secret_key(key, KEY_SIZE, what="secretstream key")
        self._puller: SecretStreamPuller | None = None
        #: The tag of every message opened so far, in order.
        self.tags: list[Tag] = []

    @property
    def finished(self) -> bool:
        """True once the FINAL message was opened."""
        return self._puller is not None and self._puller.finished

    def _open(self, data: Buffer) -> bytes:
        assert self._puller is not None
        message, tag = self._puller.pull(data, ad=self._aad)
        self.tags.append(tag)
        return message

    def update(self, data: Buffer) -> bytes:
        """Open every message now complete; returns their plaintext (``b""`` if none)."""
        self._check()
        try:
            pending = self._pending
            pending += data if type(data) is bytes else as_buffer(data, "data")
            if self._puller is None:
                if len(pending) < HEADER_SIZE:
                    return b""
                self._puller = SecretStreamPuller(self._key, pending[:HEADER_SIZE])
                del pending[:HEADER_SIZE]
            full = self._chunk + ABYTES
            out = []
            pos = 0
            view = memoryview(pending)
            try:
                while not self._puller.finished and len(pending) - pos >= full:
                    out.append(self._open(view[pos : pos + full]))
                    pos += full
            finally:
                view.release()
            del pending[:pos]
            if self._puller.finished and pending:
                raise FormatError(
                    "data after the FINAL secretstream message: the stream was extended"
                )
            return b"".join(out)
        except Exception as exc:
            raise self._break(exc) from None

    def finalize(self) -> bytes:
        """Open the last (short) message; it must be FINAL."""
        self._check()
        try:
            puller = self._puller
            if puller is None:
                raise TruncatedStreamError(
                    f"the secretstream ended inside its {HEADER_SIZE}-byte header"
                )
            out = b""
            if not puller.finished:
                if len(self._pending) < ABYTES:
                    raise TruncatedStreamError(
                        "the secretstream ended without its FINAL message: truncated"
                        if not self._pending
                        else "the secretstream ended inside a message: truncated"
                    )
                out = self._open(self._pending)
                self._pending.clear()
            puller.finalize()
        except Exception as exc:
            raise self._break(exc) from None
        self._finish()
        return out


#: libsodium secretstream's format descriptor (``segment_size``: the chunk size, which
#: both sides must agree on; messages chain, so no random access).
FORMAT = SegmentedFormat(
    "secretstream",
    encryptor=lambda o: SecretStreamEncryptor(
        cast("KeyLike", o.key),
        segment_size=or_default(o.segment_size, DEFAULT_CHUNK_SIZE),
        aad=o.aad,
    ),
    decryptor=lambda o: SecretStreamDecryptor(
        cast("KeyLike", o.key),
        segment_size=or_default(o.segment_size, DEFAULT_CHUNK_SIZE),
        aad=o.aad,
    ),
    writes=frozenset({"key", "segment_size", "aad"}),
    reads=frozenset({"key", "segment_size", "aad"}),
)
