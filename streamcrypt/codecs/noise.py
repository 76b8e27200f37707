"""The Noise Protocol Framework handshake (revision 34) as a sans-I/O state machine.

Theory of operation
-------------------
Noise builds a secure channel from a *handshake pattern*: a short script of tokens
(``e``, ``s``, ``ee``, ``es``, ``se``, ``ss``, ``psk``) that each side runs in turn.
Three nested objects carry the state, exactly as in the specification:

* :class:`CipherState` holds a key ``k`` and a 64-bit nonce counter ``n``; it seals and
  opens one message per nonce (ChaChaPoly with a little-endian counter, AESGCM with a
  big-endian one, both after four zero bytes). Nonce ``2**64 - 1`` is reserved for
  ``rekey()``.
* :class:`SymmetricState` holds the chaining key ``ck`` and the transcript hash ``h``.
  Every public key and ciphertext is hashed into ``h``; every DH result and PSK is mixed
  into ``ck`` with the spec's HKDF (HMAC over the negotiated hash, so BLAKE2s and BLAKE2b
  use their own 64- and 128-byte blocks).
* :class:`NoiseHandshake` (``HandshakeState``) walks the pattern: ``write_message`` and
  ``read_message`` alternate as the pattern says, each message being the tokens' bytes
  followed by the (encrypted once a key exists) payload. After the last message
  ``split()`` gives this side's two transport :class:`CipherState` objects.

No I/O happens here: the caller frames and moves messages (a Noise message is at most
65535 bytes; framing, e.g. a 2-byte length, is the transport's business). Any failure
leaves the machine broken; a bad incoming message raises :class:`HandshakeError` with the
cause chained. The peer's static key is readable as :attr:`NoiseHandshake.remote_static`
as soon as the message carrying it has been read, so a transport can refuse it before
answering.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Sequence
from typing import Any, Literal

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from ..abc import Buffer, Lifecycle, State, as_bytes
from ..errors import (
    AuthenticationError,
    HandshakeError,
    InvalidKeySizeError,
    InvalidParameterError,
    InvalidPublicKeyError,
    LimitExceededError,
    StreamCryptError,
)
from ..keys import HoldsSecrets, SecretKey, as_secret_key, key_bytes
from ..primitives import AES256GCM, Aead, ChaCha20Poly1305Suite
from ._noise_patterns import HandshakePattern, NoiseProtocolName, parse_pattern

__all__ = [
    "DHLEN",
    "MAX_MESSAGE_LEN",
    "MAX_NONCE",
    "TAGLEN",
    "CipherState",
    "FixedKeyCipher",
    "HandshakePattern",
    "HandshakeState",
    "NoiseHandshake",
    "NoiseProtocolName",
    "SymmetricState",
    "generate_keypair",
    "parse_pattern",
    "public_key",
]

#: The largest Noise message, handshake or transport, in bytes.
MAX_MESSAGE_LEN = 65535
#: The AEAD tag length of both Noise ciphers.
TAGLEN = 16
#: Public key and shared secret length of Curve25519.
DHLEN = 32
#: The reserved nonce: never used for a message, only by ``rekey()``.
MAX_NONCE = 2**64 - 1

_ZERO4 = b"\x00\x00\x00\x00"
_MAX_PLAINTEXT = MAX_MESSAGE_LEN - TAGLEN
_ZEROKEY = bytes(32)


def _not_authentic(cipher: str, n: int) -> AuthenticationError:
    return AuthenticationError(
        f"Noise {cipher} message did not authenticate (nonce {n}): "
        "wrong key, reordered, replayed or modified"
    )


def _too_long(what: str, size: int, advice: str) -> LimitExceededError:
    return LimitExceededError(
        f"Noise {what} of {size} bytes exceeds the {MAX_MESSAGE_LEN}-byte limit: {advice}"
    )


#: hash name -> digestmod for hmac (HASHLEN is the protocol name's ``hash_len``)
_DIGESTMODS: dict[str, str | Callable[..., Any]] = {
    "SHA256": "sha256",
    "SHA512": "sha512",
    "BLAKE2s": hashlib.blake2s,
    "BLAKE2b": hashlib.blake2b,
}


def _private_key(key: Buffer | SecretKey | X25519PrivateKey, what: str) -> X25519PrivateKey:
    if isinstance(key, X25519PrivateKey):
        return key  # loaded once by the caller, reused across handshakes
    raw = as_secret_key(key, DHLEN, what=f"{what} (an X25519 private key)").secret_bytes()
    return X25519PrivateKey.from_private_bytes(raw)


def _public_bytes(key: X25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def _check_public(key: Buffer, what: str) -> bytes:
    raw = bytes(key)
    if len(raw) != DHLEN:
        raise InvalidPublicKeyError(
            f"{what} must be a {DHLEN}-byte X25519 public key, got {len(raw)}"
        )
    return raw


def generate_keypair() -> tuple[SecretKey, bytes]:
    """A fresh X25519 key pair for Noise: ``(private key, 32-byte public key)``."""
    private = X25519PrivateKey.generate()
    raw = private.private_bytes_raw()
    return SecretKey(raw), _public_bytes(private)


def public_key(private: Buffer | SecretKey) -> bytes:
    """The X25519 public key of a 32-byte private key; raises :class:`InvalidKeySizeError`."""
    return _public_bytes(_private_key(private, "the private key"))


def _dh(private: X25519PrivateKey, public: bytes) -> bytes:
    try:
        return private.exchange(X25519PublicKey.from_public_bytes(public))
    except ValueError:
        raise InvalidPublicKeyError(
            "X25519 gave an all-zero shared secret: the peer's public key is of low order"
        ) from None


class CipherState(HoldsSecrets, Lifecycle):
    """A Noise CipherState: a 32-byte key ``k`` and nonce counter ``n``.

    ``encrypt(ad, plaintext)`` and ``decrypt(ad, ciphertext)`` use and advance the nonce.
    The key is required (a missing one raises :class:`InvalidParameterError`): the spec's
    key-less state, which passes data through in clear, exists only inside
    :class:`SymmetricState`, for the early handshake. ``decrypt`` raises
    :class:`AuthenticationError`; running out of nonces or a message over 65535 bytes
    raises :class:`LimitExceededError`. Any failure breaks the state: later calls raise
    :class:`BrokenTransformError`.
    """

    __slots__ = ("_aead", "_cipher", "_n", "_native", "_nonce_order")

    def __init__(self, cipher: str, key: Buffer | SecretKey) -> None:
        if cipher not in ("ChaChaPoly", "AESGCM"):
            raise InvalidParameterError(
                f"unsupported Noise cipher {cipher!r}; use 'ChaChaPoly' or 'AESGCM'"
            )
        self._init_lifecycle()
        self._cipher = cipher
        self._nonce_order: Literal["little", "big"] = "little" if cipher == "ChaChaPoly" else "big"
        self._n = 0
        self.initialize_key(key)

    def initialize_key(self, key: Buffer | SecretKey) -> None:
        """Set a new 32-byte key and reset the nonce to zero; raises
        :class:`InvalidParameterError` for ``None`` (there is no key-less CipherState)
        and :class:`InvalidKeySizeError` for another size."""
        self._check()
        if key is None:
            raise self._break(
                InvalidParameterError(
                    "a Noise CipherState needs a 32-byte key: without one it would pass "
                    "data through in clear"
                )
            )
        raw = key_bytes(key, "a Noise cipher key")
        if len(raw) != 32:
            raise self._break(
                InvalidKeySizeError(f"a Noise cipher key is 32 bytes, got {len(raw)}")
            )
        self._set_key(raw)
        self._n = 0

    def _set_key(self, raw: bytes) -> None:
        self._aead = aead = self._kernel(raw)
        # The AEAD's native kernel (Noise nonces are 12 bytes: always the direct route),
        # called straight from encrypt/decrypt: records are sealed one call deep.
        self._native: AESGCM | ChaCha20Poly1305 = aead.native(_ZERO4 + bytes(8))[0]

    def _kernel(self, key: bytes) -> Aead:
        return ChaCha20Poly1305Suite(key) if self._cipher == "ChaChaPoly" else AES256GCM(key)

    @property
    def cipher(self) -> str:
        return self._cipher

    @property
    def nonce(self) -> int:
        """The nonce the next message will use."""
        return self._n

    def set_nonce(self, nonce: int) -> None:
        """Set the next nonce (the spec's SetNonce, for out-of-order transports)."""
        self._check()
        if not 0 <= nonce <= MAX_NONCE:
            raise InvalidParameterError(f"a Noise nonce is 0..2**64-1, got {nonce}")
        self._n = nonce

    def _nonce_bytes(self, n: int) -> bytes:
        return _ZERO4 + n.to_bytes(8, self._nonce_order)

    def _next_nonce(self) -> bytes:
        if self._n >= MAX_NONCE:
            raise self._break(
                LimitExceededError(
                    "Noise nonce space exhausted (2**64-1 messages): rekey cannot help, "
                    "start a new handshake"
                )
            )
        return self._nonce_bytes(self._n)

    def encrypt(self, ad: Buffer, plaintext: Buffer) -> bytes:
        """Seal ``plaintext`` with associated data ``ad`` under the next nonce.

        Raises :class:`LimitExceededError` if the result would exceed 65535 bytes or the
        nonces are exhausted.
        """
        native, n = self._native, self._n
        if (
            n < MAX_NONCE and len(plaintext) <= _MAX_PLAINTEXT and self._state is State.OPEN
        ):  # the common case, one call deep; anything else takes the checks below
            out = native.encrypt(_ZERO4 + n.to_bytes(8, self._nonce_order), plaintext, ad)
            self._n = n + 1
            return out
        self._check()
        if len(plaintext) + TAGLEN > MAX_MESSAGE_LEN:
            raise self._break(
                _too_long(
                    "message", len(plaintext) + TAGLEN, "split the data into smaller messages"
                )
            )
        nonce = self._next_nonce()
        out = self._aead.seal(nonce, plaintext, ad)
        self._n += 1
        return out

    def decrypt(self, ad: Buffer, ciphertext: Buffer) -> bytes:
        """Open ``ciphertext`` with associated data ``ad`` under the next nonce.

        Raises :class:`AuthenticationError` (wrong key, reordered, replayed or modified
        message) and :class:`LimitExceededError` (over 65535 bytes, nonces exhausted).
        """
        native, n = self._native, self._n
        if (
            n < MAX_NONCE
            and TAGLEN <= len(ciphertext) <= MAX_MESSAGE_LEN
            and self._state is State.OPEN
        ):  # the common case, one call deep; anything else takes the checks below
            try:
                out = native.decrypt(_ZERO4 + n.to_bytes(8, self._nonce_order), ciphertext, ad)
            except InvalidTag:
                raise self._break(_not_authentic(self._cipher, self._n)) from None
            self._n = n + 1
            return out
        self._check()
        if len(ciphertext) > MAX_MESSAGE_LEN:
            raise self._break(_too_long("message", len(ciphertext), "check the peer's framing"))
        nonce = self._next_nonce()
        if len(ciphertext) < TAGLEN:
            raise self._break(
                AuthenticationError(
                    f"Noise message of {len(ciphertext)} bytes is shorter than its "
                    f"{TAGLEN}-byte tag: truncated or not a Noise message"
                )
            )
        try:
            out = self._aead.open(nonce, ciphertext, ad)
        except AuthenticationError as exc:
            raise self._break(_not_authentic(self._cipher, self._n)) from exc
        self._n += 1
        return out

    def fixed_key(self) -> FixedKeyCipher:
        """The current key as a :class:`FixedKeyCipher` (explicit nonces, safe on any thread).

        It keeps this key after :meth:`rekey`.
        """
        self._check()
        kernel, _ = self._aead.native(_ZERO4 + bytes(8))
        return FixedKeyCipher(self._cipher, kernel, self._nonce_order)

    def rekey(self) -> None:
        """Replace the key with ``ENCRYPT(k, 2**64-1, b"", zeros)[:32]``; the nonce is kept."""
        self._check()
        self._set_key(self._aead.seal(self._nonce_bytes(MAX_NONCE), _ZEROKEY, b"")[:32])

    def __repr__(self) -> str:
        return (
            f"CipherState({self._cipher}, <key hidden>, nonce={self._n}, state={self._state.value})"
        )


class FixedKeyCipher(HoldsSecrets):
    """One CipherState key with explicit nonces: pure seal/open for batch workers.

    Callers assign nonces themselves (``CipherState.fixed_key()`` then
    ``CipherState.set_nonce()`` past the ones taken), so work can run on other threads
    and in any order without touching the CipherState. ``open``/``open_into`` raise
    :class:`AuthenticationError`; messages over 65535 bytes and nonces outside
    ``0 .. 2**64-2`` raise :class:`LimitExceededError`.
    """

    __slots__ = ("_cipher", "_kernel", "_order")

    def __init__(
        self, cipher: str, kernel: AESGCM | ChaCha20Poly1305, order: Literal["little", "big"]
    ) -> None:
        self._cipher = cipher
        self._kernel = kernel
        self._order: Literal["little", "big"] = order

    @property
    def cipher(self) -> str:
        return self._cipher

    def _nonce(self, n: int, size: int) -> bytes:
        if not 0 <= n < MAX_NONCE:
            raise LimitExceededError(
                f"Noise nonce {n} is outside 0..2**64-2: start a new handshake"
            )
        if size > MAX_MESSAGE_LEN:
            raise _too_long("message", size, "seal smaller pieces, or check the peer's framing")
        return _ZERO4 + n.to_bytes(8, self._order)

    def seal_into(self, n: int, ad: Buffer, plaintext: Buffer, out: bytearray | memoryview) -> int:
        """Seal under nonce ``n`` into ``out`` (exactly ``len(plaintext) + 16`` bytes)."""
        size = len(plaintext) + TAGLEN
        if len(out) != size:
            raise InvalidParameterError(f"out must be exactly {size} bytes, got {len(out)}")
        return self._kernel.encrypt_into(self._nonce(n, size), plaintext, ad, out)

    def open(self, n: int, ad: Buffer, ciphertext: Buffer) -> bytes:
        """Verify and decrypt ``ciphertext`` under nonce ``n``; raises AuthenticationError."""
        nonce = self._nonce(n, len(ciphertext))
        if len(ciphertext) < TAGLEN:
            raise _not_authentic(self._cipher, n)
        try:
            return self._kernel.decrypt(nonce, ciphertext, ad)
        except InvalidTag:
            raise _not_authentic(self._cipher, n) from None

    def open_into(self, n: int, ad: Buffer, ciphertext: Buffer, out: bytearray | memoryview) -> int:
        """Like :meth:`open` into ``out`` (exactly ``len(ciphertext) - 16`` bytes)."""
        nonce = self._nonce(n, len(ciphertext))
        if len(ciphertext) < TAGLEN:
            raise _not_authentic(self._cipher, n)
        if len(out) != len(ciphertext) - TAGLEN:
            raise InvalidParameterError(
                f"out must be exactly {len(ciphertext) - TAGLEN} bytes, got {len(out)}"
            )
        try:
            return self._kernel.decrypt_into(nonce, ciphertext, ad, out)
        except InvalidTag:
            raise _not_authentic(self._cipher, n) from None

    def __repr__(self) -> str:
        return f"FixedKeyCipher({self._cipher}, <key hidden>)"


class SymmetricState(HoldsSecrets):
    """The Noise SymmetricState: chaining key ``ck``, hash ``h`` and a CipherState.

    Method names follow the spec (MixKey, MixHash, MixKeyAndHash, EncryptAndHash,
    DecryptAndHash, Split). ``decrypt_and_hash`` raises :class:`AuthenticationError`.
    Until the first MixKey there is no key and EncryptAndHash passes its input through,
    as the spec says: that key-less state lives here only (``None``), never in a
    :class:`CipherState`.
    """

    __slots__ = ("_cipher", "_cipher_state", "_digestmod", "_hash_name", "_hashlen", "ck", "h")

    def __init__(self, protocol: NoiseProtocolName) -> None:
        self._hash_name = protocol.hash
        self._digestmod, self._hashlen = _DIGESTMODS[protocol.hash], protocol.hash_len
        self._cipher = protocol.cipher
        name = protocol.name.encode("ascii")
        if len(name) <= self._hashlen:
            self.h = name + bytes(self._hashlen - len(name))
        else:
            self.h = self.hash(name)
        self.ck = self.h
        self._cipher_state: CipherState | None = None

    @property
    def hash_len(self) -> int:
        return self._hashlen

    def has_key(self) -> bool:
        """The spec's HasKey(): whether a MixKey has set a key yet."""
        return self._cipher_state is not None

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self._hash_name.lower(), data).digest()

    def _hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.digest(key, data, self._digestmod)

    def hkdf(self, ikm: bytes, outputs: int) -> tuple[bytes, ...]:
        """The spec's HKDF(chaining_key, input_key_material, num_outputs) with 2 or 3 outputs."""
        temp = self._hmac(self.ck, ikm)
        out: list[bytes] = []
        prev = b""
        for i in range(1, outputs + 1):
            prev = self._hmac(temp, prev + bytes((i,)))
            out.append(prev)
        return tuple(out)

    def _initialize_key(self, key: bytes) -> None:
        if self._cipher_state is None:
            self._cipher_state = CipherState(self._cipher, key)
        else:
            self._cipher_state.initialize_key(key)

    def mix_key(self, ikm: bytes) -> None:
        self.ck, temp_k = self.hkdf(ikm, 2)
        self._initialize_key(temp_k[:32])

    def mix_hash(self, data: bytes) -> None:
        self.h = self.hash(self.h + data)

    def mix_key_and_hash(self, ikm: bytes) -> None:
        self.ck, temp_h, temp_k = self.hkdf(ikm, 3)
        self.mix_hash(temp_h)
        self._initialize_key(temp_k[:32])

    def encrypt_and_hash(self, plaintext: bytes) -> bytes:
        cs = self._cipher_state
        ciphertext = plaintext if cs is None else cs.encrypt(self.h, plaintext)
        self.mix_hash(ciphertext)
        return ciphertext

    def decrypt_and_hash(self, ciphertext: bytes) -> bytes:
        cs = self._cipher_state
        plaintext = ciphertext if cs is None else cs.decrypt(self.h, ciphertext)
        self.mix_hash(ciphertext)
        return plaintext

    def split(self) -> tuple[CipherState, CipherState]:
        """(initiator-to-responder, responder-to-initiator) transport cipher states."""
        k1, k2 = self.hkdf(b"", 2)
        return CipherState(self._cipher, k1[:32]), CipherState(self._cipher, k2[:32])

    def __repr__(self) -> str:
        return f"SymmetricState({self._cipher}, {self._hash_name}, <keys hidden>)"


def _message_overheads(pattern: HandshakePattern) -> tuple[int, ...]:
    """Bytes each handshake message adds to its payload (keys and tags), from the pattern."""
    has_key = False
    psk_mode = pattern.psk_count > 0
    out: list[int] = []
    for message in pattern.messages:
        size = 0
        for token in message:
            if token == "e":
                size += DHLEN
                has_key = has_key or psk_mode
            elif token == "s":
                size += DHLEN + (TAGLEN if has_key else 0)
            else:
                has_key = True
        out.append(size + (TAGLEN if has_key else 0))
    return tuple(out)


class NoiseHandshake(HoldsSecrets, Lifecycle):
    """A Noise HandshakeState for one side, driven without I/O.

    ``protocol_name`` is e.g. ``"Noise_XX_25519_ChaChaPoly_BLAKE2s"``. Keys: ``s`` this
    side's 32-byte static private key (or a loaded ``X25519PrivateKey``: a server reusing
    one saves an X25519 scalar multiplication per handshake), ``rs`` the peer's static public key (only for
    patterns where it is known in advance), ``psks`` one 32-byte key per ``psk`` token in
    the order they are used, ``e`` a fixed ephemeral private key (test vectors only: never
    reuse an ephemeral). A key the pattern does not use, or a missing one, raises
    :class:`InvalidParameterError` (or :class:`InvalidKeySizeError` /
    :class:`InvalidPublicKeyError` for a wrong length); a bad name raises
    :class:`FormatError` or :class:`UnsupportedFormatError`.

    Call :meth:`write_message` and :meth:`read_message` as the pattern alternates
    (:attr:`needs_write` says which); once :attr:`complete`, :meth:`split` gives the
    transport cipher states. A malformed or unauthentic incoming message raises
    :class:`HandshakeError`; an out-of-turn call raises :class:`HandshakeError` too; an
    oversized message raises :class:`LimitExceededError`. Any failure breaks the machine.
    """

    __slots__ = (
        "_e",
        "_fixed_e",
        "_h_final",
        "_index",
        "_initiator",
        "_overheads",
        "_protocol",
        "_psks",
        "_re",
        "_rs",
        "_s",
        "_ss",
    )

    def __init__(
        self,
        protocol_name: str | NoiseProtocolName,
        initiator: bool,
        *,
        s: Buffer | SecretKey | X25519PrivateKey | None = None,
        rs: Buffer | None = None,
        psks: Sequence[Buffer | SecretKey] = (),
        prologue: Buffer = b"",
        e: Buffer | SecretKey | None = None,
    ) -> None:
        self._init_lifecycle()
        protocol = (
            protocol_name
            if isinstance(protocol_name, NoiseProtocolName)
            else NoiseProtocolName.parse(protocol_name)
        )
        pattern = protocol.pattern
        self._protocol = protocol
        self._initiator = bool(initiator)
        role = "initiator" if initiator else "responder"

        needs_s = pattern.uses_local_static(self._initiator)
        if needs_s and s is None:
            raise InvalidParameterError(
                f"{protocol.name} needs the {role}'s static private key (s=)"
            )
        if not needs_s and s is not None:
            raise InvalidParameterError(
                f"{protocol.name} does not use a static key for the {role}: drop s="
            )
        self._s = _private_key(s, "s") if s is not None else None

        needs_rs = pattern.remote_static_premessage(self._initiator)
        if needs_rs and rs is None:
            raise InvalidParameterError(
                f"{protocol.name} needs the peer's static public key in advance (rs=)"
            )
        if not needs_rs and rs is not None:
            raise InvalidParameterError(
                f"{protocol.name} does not take the peer's static key in advance: drop rs="
            )
        self._rs: bytes | None = _check_public(rs, "rs") if rs is not None else None

        if len(psks) != pattern.psk_count:
            raise InvalidParameterError(
                f"{protocol.name} uses {pattern.psk_count} pre-shared key(s), got {len(psks)}"
            )
        what = "a Noise pre-shared key"
        self._psks = [as_secret_key(p, 32, what=what).secret_bytes() for p in psks]

        self._fixed_e = _private_key(e, "e") if e is not None else None
        self._e: X25519PrivateKey | None = None
        self._re: bytes | None = None
        self._index = 0
        self._overheads = _message_overheads(pattern)
        self._h_final: bytes | None = None

        ss = SymmetricState(protocol)
        ss.mix_hash(bytes(prologue))
        # Pre-messages: the initiator's first, then the responder's (public keys only).
        for owner_is_initiator, tokens in (
            (True, pattern.initiator_pre),
            (False, pattern.responder_pre),
        ):
            for token in tokens:
                assert token == "s"
                if owner_is_initiator == self._initiator:
                    assert self._s is not None
                    ss.mix_hash(_public_bytes(self._s))
                else:
                    assert self._rs is not None
                    ss.mix_hash(self._rs)
        self._ss: SymmetricState | None = ss

    # -- introspection -------------------------------------------------------------------

    @property
    def protocol(self) -> NoiseProtocolName:
        return self._protocol

    @property
    def protocol_name(self) -> str:
        return self._protocol.name

    @property
    def initiator(self) -> bool:
        return self._initiator

    @property
    def message_index(self) -> int:
        """How many handshake messages have been written or read so far."""
        return self._index

    @property
    def complete(self) -> bool:
        """True once the last handshake message has been written or read."""
        return self._index >= len(self._protocol.pattern.messages)

    @property
    def needs_write(self) -> bool:
        """True when the next call must be :meth:`write_message` (False: read, or done)."""
        return not self.complete and (self._index % 2 == 0) == self._initiator

    @property
    def remote_static(self) -> bytes | None:
        """The peer's static public key, once known (given as ``rs=`` or received)."""
        return self._rs

    @property
    def local_static(self) -> bytes | None:
        """This side's static public key, if it has one."""
        return _public_bytes(self._s) if self._s is not None else None

    @property
    def handshake_hash(self) -> bytes:
        """The final transcript hash ``h`` (channel binding); raises :class:`HandshakeError` before completion."""
        if self._h_final is None:
            raise HandshakeError(
                "the Noise handshake hash exists only once the handshake is complete"
            )
        return self._h_final

    def max_payload(self) -> int:
        """The largest payload the next handshake message can carry within 65535 bytes."""
        if self.complete:
            return 0
        return MAX_MESSAGE_LEN - self._overheads[self._index]

    # -- the handshake ---------------------------------------------------------------------

    def _begin(self, writing: bool) -> SymmetricState:
        self._check()
        verb = "write" if writing else "read"
        if self.complete:
            raise self._break(
                HandshakeError(
                    f"cannot {verb} a handshake message: the Noise handshake is complete, "
                    "call split() and use the transport cipher states"
                )
            )
        if self.needs_write != writing:
            other = "read_message" if writing else "write_message"
            raise self._break(
                HandshakeError(
                    f"out of turn: Noise message {self._index} of {self._protocol.name} "
                    f"is not this side's to {verb}; call {other}() next"
                )
            )
        assert self._ss is not None
        return self._ss

    def _dh_for(self, token: str) -> bytes:
        """The DH result for ``ee``/``es``/``se``/``ss`` from this side's point of view."""
        first, second = token[0], token[1]
        # token letters name (initiator key, responder key); pick ours and theirs
        mine, theirs = (first, second) if self._initiator else (second, first)
        local = self._e if mine == "e" else self._s
        remote = self._re if theirs == "e" else self._rs
        if local is None or remote is None:
            raise HandshakeError(f"Noise token {token!r} needs a key this side does not have")
        return _dh(local, remote)

    def write_message(self, payload: Buffer = b"") -> bytes:
        """The next handshake message carrying ``payload``.

        Raises :class:`LimitExceededError` if the message would exceed 65535 bytes and
        :class:`HandshakeError` when it is not this side's turn to write.
        """
        ss = self._begin(writing=True)
        limit = self.max_payload()
        if len(payload) > limit:
            raise self._break(
                LimitExceededError(
                    f"Noise handshake payload of {len(payload)} bytes exceeds the {limit} "
                    f"bytes message {self._index} can carry (65535-byte message limit)"
                )
            )
        psk_mode = self._protocol.pattern.psk_count > 0
        out = bytearray()
        try:
            for token in self._protocol.pattern.messages[self._index]:
                if token == "e":
                    self._e = (
                        self._fixed_e if self._fixed_e is not None else X25519PrivateKey.generate()
                    )
                    pub = _public_bytes(self._e)
                    out += pub
                    ss.mix_hash(pub)
                    if psk_mode:
                        ss.mix_key(pub)
                elif token == "s":
                    assert self._s is not None
                    out += ss.encrypt_and_hash(_public_bytes(self._s))
                elif token == "psk":
                    ss.mix_key_and_hash(self._psks.pop(0))
                else:
                    ss.mix_key(self._dh_for(token))
            out += ss.encrypt_and_hash(as_bytes(payload, "payload"))
        except StreamCryptError as exc:
            raise self._break(
                HandshakeError(f"writing Noise handshake message {self._index} failed: {exc}")
            ) from exc
        self._advance()
        return bytes(out)

    def read_message(self, message: Buffer) -> bytes:
        """Process the peer's next handshake message and return its payload.

        Raises :class:`HandshakeError` (cause chained) for a short, malformed or
        unauthentic message, a low-order peer key, or an out-of-turn call, and
        :class:`LimitExceededError` for a message over 65535 bytes.
        """
        ss = self._begin(writing=False)
        data = as_bytes(message, "message")
        if len(data) > MAX_MESSAGE_LEN:
            raise self._break(_too_long("handshake message", len(data), "check the peer's framing"))
        if len(data) < self._overheads[self._index]:
            raise self._break(
                HandshakeError(
                    f"Noise handshake message {self._index} of {self._protocol.name} is "
                    f"{len(data)} bytes, shorter than the {self._overheads[self._index]} "
                    "its pattern requires: truncated, or the peer runs another protocol"
                )
            )
        psk_mode = self._protocol.pattern.psk_count > 0
        pos = 0
        # The message's later DH tokens need the peer keys it carries, so they are set as
        # they arrive, and put back if the message fails: a refused message must not leave
        # a remote static key the peer never proved it holds.
        prev_re, prev_rs = self._re, self._rs
        try:
            for token in self._protocol.pattern.messages[self._index]:
                if token == "e":
                    self._re = data[pos : pos + DHLEN]
                    pos += DHLEN
                    ss.mix_hash(self._re)
                    if psk_mode:
                        ss.mix_key(self._re)
                elif token == "s":
                    size = DHLEN + (TAGLEN if ss.has_key() else 0)
                    self._rs = ss.decrypt_and_hash(data[pos : pos + size])
                    pos += size
                elif token == "psk":
                    ss.mix_key_and_hash(self._psks.pop(0))
                else:
                    ss.mix_key(self._dh_for(token))
            payload = ss.decrypt_and_hash(data[pos:])
        except StreamCryptError as exc:
            self._re, self._rs = prev_re, prev_rs
            raise self._break(
                HandshakeError(
                    f"Noise handshake message {self._index} of {self._protocol.name} was "
                    f"refused: {exc}; check both sides use the same protocol name, "
                    "prologue, keys and PSKs"
                )
            ) from exc
        self._advance()
        return payload

    def _advance(self) -> None:
        self._index += 1
        if self.complete:
            assert self._ss is not None
            self._h_final = self._ss.h

    def split(self) -> tuple[CipherState, CipherState]:
        """``(send, receive)`` transport cipher states for this side; once only.

        For one-way patterns (N, K, X) only the initiator sends: the responder must not
        use its ``send`` state. Raises :class:`HandshakeError` before completion and
        :class:`AlreadyFinalizedError` on a second call.
        """
        self._check()
        if not self.complete:
            raise self._break(
                HandshakeError(
                    f"split() before the Noise handshake is complete "
                    f"({self._index} of {len(self._protocol.pattern.messages)} messages)"
                )
            )
        assert self._ss is not None
        c1, c2 = self._ss.split()
        self._ss = None
        self._e = self._fixed_e = self._s = None
        self._finish()
        return (c1, c2) if self._initiator else (c2, c1)

    def __repr__(self) -> str:
        role = "initiator" if self._initiator else "responder"
        return (
            f"NoiseHandshake({self._protocol.name!r}, {role}, message={self._index}, "
            f"state={self._state.value})"
        )


#: The specification's name for :class:`NoiseHandshake`.
HandshakeState = NoiseHandshake
