"""The envelope as sans-I/O transforms: the sealer (header, then the native container
keyed from the file key), the signature tap, the encryptor and the decryptor."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ...abc import Buffer, Chain, Lifecycle, as_buffer, as_bytes
from ...errors import (
    FormatError,
    InvalidParameterError,
    InvalidSignatureError,
    LimitExceededError,
    TruncatedStreamError,
)
from ...keys import (
    MAX_READ_PARAMS,
    MAX_SCRYPT_READ_PARAMS,
    MODERATE,
    Argon2Params,
    HoldsSecrets,
    PasswordParams,
    ScryptParams,
    SecretKey,
    random_bytes,
)
from ...primitives import (
    Ed25519phSigner,
    Ed25519phVerifier,
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from .. import _stanza, container
from .._segmented import (
    SegmentCodec,
    SegmentedDecryptor,
    SegmentedEncryptor,
    SegmentJob,
    SegmentLayout,
)
from .._stanza import Identity, IdentityLike, Recipient, RecipientLike
from ._header import (
    FILE_KEY_SIZE,
    SIGNATURE_SIZE,
    EnvelopeHeader,
    _encode_header,
    _keys,
    _mac,
    _parse_header,
)
from ._recipients import (
    _identity_list,
    _open_file_key,
    _recipient_list,
    _wrap,
)

#: How many bytes of a signed envelope a verifying decryptor holds at most until its
#: signature verified (the AWS decryptor's ``max_buffered`` default): 1 GiB.
DEFAULT_MAX_BUFFERED = 1 << 30


class _Sealer(SegmentedEncryptor):
    """The envelope's segmented encryptor: stanzas, header and MAC, then the container
    keyed from the file key (its codec and header, built on the first feed/finish)."""

    __slots__ = ("header",)

    header: EnvelopeHeader | None

    def __init__(
        self,
        recips: list[Recipient],
        signer: bytes | None,
        suite: str,
        segment_size: int,
        aad: Buffer,
    ) -> None:
        file_key = random_bytes(FILE_KEY_SIZE)
        mac_key, payload_key = _keys(file_key)
        associated = as_bytes(aad, "aad")
        # Checks the suite and segment size now; the keyed container is built below.
        container.StreamEncryptor(payload_key, suite=suite, segment_size=segment_size)
        self.header = None

        def build() -> tuple[SegmentCodec, bytes]:
            # Wrapping the file key may run a password KDF: the engine calls this (through
            # feed/finish while header_pending) on a worker thread.
            stanzas = [s for r in recips for s in _wrap(r, file_key)]
            body = _encode_header(stanzas, signer)
            raw = body + _mac(mac_key, body, associated)
            self.header = EnvelopeHeader(tuple(stanzas), signer, raw)
            inner = container.StreamEncryptor(
                payload_key, suite=suite, segment_size=segment_size, aad=raw + associated
            )
            assert inner.codec is not None  # built keyed
            return inner.codec, raw + inner.take_header()

        super().__init__(build=build)


class _SignatureTap(Lifecycle):
    """Signs the envelope that passes through (Ed25519ph) and appends the signature."""

    __slots__ = ("_signer",)

    def __init__(self, key: Ed25519PrivateKey) -> None:
        self._init_lifecycle()
        self._signer = Ed25519phSigner(key)

    def update(self, data: Buffer, /) -> bytes:
        self._check()
        return self._signer.update(data)

    def finalize(self) -> bytes:
        self._check()
        self._signer.finalize()
        self._finish()
        return self._signer.signature()


class EnvelopeEncryptor(Chain, HoldsSecrets):
    """Encrypt a stream to recipients and/or a passphrase, optionally signed (sans-I/O).

    ``recipients`` are :class:`X25519Recipient`, :class:`EciesRecipient`,
    :class:`PassphraseRecipient` or their text forms; ``passphrase`` adds a passphrase
    stanza (``work_factor``: Argon2id MODERATE by default, or ScryptParams).
    ``sign_with`` appends an Ed25519ph
    signature over the whole ciphertext.

    A chain (``update``/``finalize``): the segmented encryptor, whose segments the
    engine seals in parallel (it runs a chain's stages each where it runs best, as for
    every format), then, when signing, a tap that hashes the ciphertext as it comes out in
    order and appends the signature. Raises :class:`InvalidParameterError`,
    :class:`InvalidPublicKeyError`, :class:`UnsupportedFormatError`.
    """

    __slots__ = ("_sealer",)

    def __init__(
        self,
        *,
        recipients: Iterable[RecipientLike] | RecipientLike = (),
        passphrase: str | Buffer | None = None,
        suite: str = "aes-256-gcm",
        segment_size: int = container.DEFAULT_SEGMENT_SIZE,
        aad: Buffer = b"",
        sign_with: Ed25519PrivateKey | None = None,
        work_factor: PasswordParams = MODERATE,
    ) -> None:
        if sign_with is not None and not isinstance(sign_with, Ed25519PrivateKey):
            raise InvalidParameterError("sign_with must be an Ed25519PrivateKey")
        recips = _recipient_list(recipients, passphrase, work_factor)
        public = sign_with.public_bytes() if sign_with else None
        self._sealer = _Sealer(recips, public, suite, segment_size, aad)
        tap = [_SignatureTap(sign_with)] if sign_with is not None else []
        super().__init__(self._sealer, *tap)

    @property
    def header(self) -> EnvelopeHeader | None:
        """The envelope header, once built (``None`` until the first bytes went in)."""
        return self._sealer.header


def _check_signer(
    header: EnvelopeHeader, verify: Ed25519PublicKey | None, allow_unverified: bool
) -> None:
    """The one place that decides whether a header's signature will be checked: a signed
    envelope is read only with ``verify_with`` naming its signer, or when the caller
    opted out by name (``allow_unverified=True``). Raises
    :class:`InvalidSignatureError` before any plaintext otherwise."""
    if verify is None:
        if header.signer is not None and not allow_unverified:
            raise InvalidSignatureError(
                "the envelope is signed, but no signature check was asked for: give "
                "verify_with= the signer's public key (--verify-with), or "
                "allow_unverified=True (--allow-unverified) to read it unchecked"
            )
        return
    if header.signer is None:
        raise InvalidSignatureError(
            "the envelope is not signed, but a signature was required (verify_with)"
        )
    if header.signer != verify.public_bytes():
        raise InvalidSignatureError("the envelope is signed by another key than verify_with names")


class _HeaderReader(_stanza.StanzaHeaderReader[EnvelopeHeader]):
    """Opens the envelope header once (KDF work happens once), then the container header."""

    __slots__ = ("_aad", "_allow_unverified", "_identities", "_payload_key", "_verify")

    def __init__(
        self,
        identities: Sequence[Identity],
        aad: Buffer,
        verify: Ed25519PublicKey | None,
        allow_unverified: bool,
    ) -> None:
        super().__init__()
        self._identities = identities
        self._aad = as_bytes(aad, "aad")
        self._verify = verify
        self._allow_unverified = allow_unverified
        self._payload_key: SecretKey | None = None

    def _parse(self, data: bytes | bytearray) -> EnvelopeHeader | int:
        return _parse_header(data)

    def _open(self, header: EnvelopeHeader) -> None:
        _, payload_key = _keys(_open_file_key(header, self._identities, self._aad))
        _check_signer(header, self._verify, self._allow_unverified)
        self._payload_key = payload_key

    def _payload(
        self, header: EnvelopeHeader, data: bytes | bytearray
    ) -> tuple[SegmentCodec, int] | None:
        assert self._payload_key is not None
        size = header.size
        inner = bytes(data[size : size + container.MAX_HEADER_SIZE])  # a header fits in it
        parsed = container.read_header(inner)
        if parsed is None or len(inner) < parsed[1] + container.TAG_SIZE:
            return None
        if parsed[0].key_id:
            raise FormatError("the container inside an envelope must not name a key id")
        lay = container.layout(
            self._payload_key, inner, len(data) - size, aad=header.raw + self._aad
        )
        return lay.codec, size + lay.header_size


class EnvelopeDecryptor(SegmentedDecryptor):
    """Decrypt an envelope with any matching identity or the passphrase (sans-I/O).

    Releases only verified segments. With ``verify_with`` (an Ed25519 public key) the
    stream must be signed by it, and nothing comes out before its signature verified:
    the segments are held (at most ``max_buffered`` bytes, the AWS decryptor's name and
    default, else :class:`LimitExceededError`) and opened once ``finish()`` /
    ``finalize()`` checked the signature. ``allow_unverified=True`` with ``verify_with``
    releases each segment once its tag verified and still checks the signature at the
    end (for an output that can be discarded if it fails). A signed stream without
    ``verify_with`` is refused (:class:`InvalidSignatureError`, before any plaintext)
    unless the caller passes ``allow_unverified=True``, which reads it without checking
    the signature. Caps on passphrase parameters: ``max_work_factor`` (Argon2id) and
    ``max_scrypt``. Raises :class:`UnknownKeyError`, :class:`AuthenticationError`,
    :class:`InvalidSignatureError`, :class:`InvalidPublicKeyError`,
    :class:`LimitExceededError`, :class:`TruncatedStreamError`, :class:`FormatError`,
    :class:`UnsupportedFormatError`.
    """

    __slots__ = ("_gated", "_gated_size", "_max_buffered", "_reader", "_tail", "_verifier")

    def __init__(
        self,
        *,
        identities: Iterable[IdentityLike] | IdentityLike = (),
        passphrase: str | Buffer | None = None,
        aad: Buffer = b"",
        verify_with: Ed25519PublicKey | Buffer | None = None,
        allow_unverified: bool = False,
        max_work_factor: Argon2Params = MAX_READ_PARAMS,
        max_scrypt: ScryptParams = MAX_SCRYPT_READ_PARAMS,
        max_buffered: int = DEFAULT_MAX_BUFFERED,
    ) -> None:
        idents = _identity_list(identities, passphrase, max_work_factor, max_scrypt)
        verify = None
        if verify_with is not None:
            verify = (
                verify_with
                if isinstance(verify_with, Ed25519PublicKey)
                else Ed25519PublicKey(verify_with)
            )
        self._reader = _HeaderReader(idents, aad, verify, allow_unverified)
        super().__init__(self._reader)
        self._verifier = Ed25519phVerifier(verify) if verify is not None else None
        self._tail = bytearray()
        # Segments held until the signature verified (None: released as they verify).
        self._gated: list[SegmentJob] | None = (
            [] if verify is not None and not allow_unverified else None
        )
        self._gated_size = 0
        self._max_buffered = max_buffered

    @property
    def header(self) -> EnvelopeHeader | None:
        """The envelope header, once it was opened and authenticated."""
        return self._reader.header

    @property
    def signer(self) -> Ed25519PublicKey | None:
        """The key a signed stream names (checked only when ``verify_with`` was given)."""
        header = self._reader.header
        return Ed25519PublicKey(header.signer) if header and header.signer else None

    @property
    def verified(self) -> bool:
        """True once the signature was checked against ``verify_with``."""
        return self._verifier is not None and self._verifier.verified()

    def _forward(self, chunk: Buffer) -> list[SegmentJob]:
        if self._verifier is not None and len(chunk):
            self._verifier.update(chunk)
        jobs = super().feed(chunk)
        gated = self._gated
        if gated is None:
            return jobs
        for job in jobs:  # a copy: a job's data may be a view of the caller's buffer
            self._gated_size += len(job.data)
            if self._gated_size > self._max_buffered:
                raise LimitExceededError(
                    f"a signed envelope is held until its signature verified, here at most "
                    f"{self._max_buffered} bytes (max_buffered): raise max_buffered, or pass "
                    "allow_unverified=True with verify_with into an output that can be "
                    "discarded (segments then come out before the signature is checked)"
                )
            job.data = bytes(job.data)
            gated.append(job)
        return []

    def feed(self, data: Buffer) -> list[SegmentJob]:
        """Jobs for every segment now complete (the last 64 bytes are held back)."""
        self._check()
        view = memoryview(as_buffer(data, "data")).cast("B")
        tail = self._tail
        if len(tail) + len(view) <= SIGNATURE_SIZE:
            tail += view
            return []
        try:
            if len(view) >= SIGNATURE_SIZE:
                jobs = self._forward(bytes(tail)) if tail else []
                jobs += self._forward(view[:-SIGNATURE_SIZE])
                tail[:] = view[-SIGNATURE_SIZE:]
            else:
                joined = bytes(tail) + bytes(view)
                jobs = self._forward(joined[:-SIGNATURE_SIZE])
                tail[:] = joined[-SIGNATURE_SIZE:]
        except Exception as exc:
            raise self._break(exc) from None
        return jobs

    def finish(self) -> list[SegmentJob]:
        """Verify the signature (if asked), then the final segment's job.

        Raises :class:`InvalidSignatureError` before any final output.
        """
        self._check()
        try:
            jobs: list[SegmentJob] = []
            tail = bytes(self._tail)
            self._tail.clear()
            header = self._reader.header
            if header is None:
                # The header may end inside the held-back bytes: then the stream is unsigned.
                jobs = self._forward(tail)
                header = self._reader.header
                if header is not None and header.signed:
                    raise TruncatedStreamError("the signed envelope ended before its signature")
            elif not header.signed:
                jobs = self._forward(tail)
            else:
                if len(tail) < SIGNATURE_SIZE:
                    raise TruncatedStreamError("the signed envelope ended before its signature")
                if self._verifier is not None:
                    self._verifier.finalize(tail)
                if self._gated is not None:
                    jobs, self._gated = self._gated, None
        except Exception as exc:
            raise self._break(exc) from None
        return jobs + super().finish()


def layout(
    head: Buffer,
    stream_size: int,
    *,
    identities: Iterable[IdentityLike] | IdentityLike = (),
    passphrase: str | Buffer | None = None,
    aad: Buffer = b"",
    allow_unverified: bool = False,
    max_work_factor: Argon2Params = MAX_READ_PARAMS,
    max_scrypt: ScryptParams = MAX_SCRYPT_READ_PARAMS,
) -> SegmentLayout:
    """Open the headers at the start of ``head`` and map an envelope of ``stream_size`` bytes.

    For random access: ``head`` must hold both headers (the first 64 KiB + 1 KiB always
    suffice). Random reads cannot check a signature over the whole stream, so a signed
    envelope is refused (:class:`InvalidSignatureError`) unless
    ``allow_unverified=True``: then its signature is left out of the layout, unchecked
    (read it all with ``verify_with`` to check it). Raises like :class:`EnvelopeDecryptor`, and
    :class:`FormatError` when ``head`` is shorter than the headers.
    """
    idents = _identity_list(identities, passphrase, max_work_factor, max_scrypt)
    reader = _HeaderReader(idents, aad, None, allow_unverified)
    opened = reader(bytes(head))
    if opened is None or isinstance(opened, int) or reader.header is None:
        raise FormatError("the data is shorter than the envelope and container headers")
    codec, size = opened
    end = stream_size - (SIGNATURE_SIZE if reader.header.signed else 0)
    return SegmentLayout(codec, size, end)
