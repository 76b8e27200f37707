"""AES in ECB, CBC, CTR, CFB, CFB8, OFB, XTS and GCM as sans-I/O transforms.

Theory of operation: every class here wraps one ``cryptography`` CipherContext (OpenSSL,
which releases the GIL on large inputs) behind the transform verbs ``update``,
``update_into`` and ``finalize``. One shared base, :class:`AesTransform`, owns the
lifecycle (open, finalized, broken), the key and IV checks and the mapping of kernel
errors to streamcrypt's typed errors; the modes differ only where the mode itself
differs:

- stream modes (CTR, CFB, CFB8, OFB) pass bytes straight through the kernel;
- block modes (ECB, CBC) add PKCS#7 padding at ``finalize()`` when encrypting, and when
  decrypting hold back the last plaintext block until ``finalize()`` can check and strip
  the padding (``padding=False`` turns both off and then requires whole blocks);
- XTS encrypts one data unit as a whole: OpenSSL treats every update call as a new data
  unit, so the transform buffers the unit (at most 2**20 blocks, IEEE 1619) and runs it
  in ``finalize()``;
- GCM encryption emits ``ciphertext || tag``; GCM decryption releases nothing before the
  tag verifies unless the caller passes ``release_unverified_plaintext=True``.

``update_into(data, out)`` writes into the caller's buffer; ``output_bound(n)`` says how
large ``out`` must be for an ``n``-byte input (block modes need up to 15 bytes of slack,
as the kernel does). Any failure leaves a transform broken; later calls raise
:class:`~streamcrypt.errors.BrokenTransformError`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, TypeAlias

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.decrepit.ciphers import modes as decrepit_modes
from cryptography.hazmat.primitives import padding as pkcs7
from cryptography.hazmat.primitives.ciphers import (
    AEADDecryptionContext,
    AEADEncryptionContext,
    Cipher,
    CipherContext,
    algorithms,
    modes,
)

from ..abc import Buffer, as_bytes
from ..errors import (
    AuthenticationError,
    FormatError,
    InvalidNonceSizeError,
    InvalidPaddingError,
    InvalidParameterError,
    InvalidTagSizeError,
    LimitExceededError,
    TruncatedStreamError,
)
from ..keys import HoldsSecrets, SecretKey, constant_time_equal, key_bytes
from ._gf128 import doublings
from ._transform import KernelTransform
from ._xor import xor_bytes

BLOCK = 16
GCM_TAG_SIZE = 16
GCM_NONCE_SIZE = 12
#: IEEE 1619 caps an XTS data unit at 2**20 blocks.
XTS_MAX_UNIT = (1 << 20) * BLOCK

_AES_KEY_SIZES = (16, 24, 32)
_XTS_KEY_SIZES = (32, 48, 64)

_PlainMode: TypeAlias = (
    modes.ModeWithInitializationVector | modes.ModeWithNonce | modes.ModeWithTweak | modes.ECB
)

#: The cryptography mode object of each unauthenticated mode, from its IV (or tweak).
_MODES: dict[str, Callable[[bytes], _PlainMode]] = {
    "ECB": lambda _iv: modes.ECB(),
    "CBC": modes.CBC,
    "CTR": modes.CTR,
    "CFB": decrepit_modes.CFB,
    "CFB8": decrepit_modes.CFB8,
    "OFB": decrepit_modes.OFB,
    "XTS": modes.XTS,
}


def xts_tweak(data_unit: int) -> bytes:
    """The 16-byte XTS tweak of a data-unit (sector) number: little-endian, IEEE 1619.

    Raises :class:`InvalidParameterError` for a negative number or one of more than 128 bits.
    """
    if not 0 <= data_unit < 1 << 128:
        raise InvalidParameterError(f"an XTS data-unit number is 0..2**128-1, got {data_unit}")
    return data_unit.to_bytes(BLOCK, "little")


class AesTransform(HoldsSecrets, KernelTransform):
    """The shared base of every AES transform: one CipherContext behind the transform verbs.

    Class attributes describe the transform: ``mode`` (``"CBC"``, ...), ``iv_size`` (0 when
    the mode takes none), ``encrypting``. ``name`` is e.g. ``"AES-256-CBC"``.

    ``update``/``update_into``/``finalize`` raise :class:`AlreadyFinalizedError` after
    ``finalize()`` and :class:`BrokenTransformError` after an earlier failure; a kernel
    refusal or a short ``out`` becomes :class:`InvalidParameterError`.
    """

    mode: ClassVar[str]
    iv_size: ClassVar[int] = BLOCK
    iv_label: ClassVar[str] = "IV"
    key_sizes: ClassVar[tuple[int, ...]] = _AES_KEY_SIZES
    encrypting: ClassVar[bool]

    __slots__ = ("_ctx", "_key_size")

    def __init__(self, key: Buffer | SecretKey, iv: Buffer) -> None:
        raw = key_bytes(key, f"AES-{self.mode} key", self.key_sizes)
        if len(iv) != self.iv_size:
            raise InvalidNonceSizeError(
                f"AES-{self.mode} {self.iv_label} must be {self.iv_size} bytes, got {len(iv)}"
            )
        self._key_size = len(raw)
        self._ctx = self._context(raw, as_bytes(iv, "iv"))
        self._init_lifecycle()

    def _context(self, key: bytes, iv: bytes) -> CipherContext:
        cipher = Cipher(algorithms.AES(key), _MODES[self.mode](iv))
        return cipher.encryptor() if self.encrypting else cipher.decryptor()

    @property
    def name(self) -> str:
        return f"AES-{self._key_size * 8}-{self.mode}"

    def __repr__(self) -> str:
        direction = "encrypt" if self.encrypting else "decrypt"
        return f"<{type(self).__name__} {self.name} {direction} state={self._state.value}>"

    # -- the mode's own steps; the default is a pure pass-through (stream modes) --

    def _update(self, data: Buffer) -> bytes:
        return self._ctx.update(data)

    def _update_into(self, data: Buffer, out: bytearray | memoryview) -> int:
        return self._ctx.update_into(data, out)

    def _finalize(self) -> bytes:
        return self._ctx.finalize()


# --------------------------------------------------------------------------- stream modes


class AesCtrEncryptor(AesTransform):
    """AES-CTR; ``iv`` is the full 16-byte initial counter block (big-endian increment)."""

    mode = "CTR"
    iv_label = "initial counter block"
    encrypting = True
    __slots__ = ()


class AesCtrDecryptor(AesCtrEncryptor):
    """AES-CTR decryption (the same keystream XOR as encryption)."""

    encrypting = False
    __slots__ = ()


class AesCfbEncryptor(AesTransform):
    """AES-CFB with 128-bit feedback and a 16-byte IV."""

    mode = "CFB"
    encrypting = True
    __slots__ = ()


class AesCfbDecryptor(AesCfbEncryptor):
    """AES-CFB (128-bit feedback) decryption."""

    encrypting = False
    __slots__ = ()


class AesCfb8Encryptor(AesTransform):
    """AES-CFB8 (8-bit feedback) with a 16-byte IV."""

    mode = "CFB8"
    encrypting = True
    __slots__ = ()


class AesCfb8Decryptor(AesCfb8Encryptor):
    """AES-CFB8 decryption."""

    encrypting = False
    __slots__ = ()


class AesOfbEncryptor(AesTransform):
    """AES-OFB with a 16-byte IV."""

    mode = "OFB"
    encrypting = True
    __slots__ = ()


class AesOfbDecryptor(AesOfbEncryptor):
    """AES-OFB decryption (the same keystream XOR as encryption)."""

    encrypting = False
    __slots__ = ()


# ---------------------------------------------------------------------------- block modes


class _BlockTransform(AesTransform):
    """ECB and CBC: PKCS#7 padding (default) or whole blocks only (``padding=False``).

    Encrypting, ``finalize()`` appends the padding; without padding a total length that is
    not a multiple of 16 raises :class:`InvalidParameterError` there. Decrypting, the last
    plaintext block is held back until ``finalize()``, which raises
    :class:`InvalidPaddingError` for bad or missing padding and :class:`FormatError` for a
    ciphertext that is not a whole number of blocks.
    """

    __slots__ = ("_held", "_padding", "_total")

    def __init__(self, key: Buffer | SecretKey, iv: Buffer, *, padding: bool = True) -> None:
        super().__init__(key, iv)
        self._padding = padding
        self._total = 0
        self._held = b""  # decrypting with padding: the last plaintext block, not yet released

    def __repr__(self) -> str:
        return f"{super().__repr__()[:-1]} padding={self._padding}>"

    def output_bound(self, n: int) -> int:
        # The kernel wants 15 bytes of slack; a held block adds 16 more.
        held = BLOCK if self._padding and not self.encrypting else 0
        return n + BLOCK - 1 + held

    def _holds_back(self) -> bool:
        return self._padding and not self.encrypting

    def _update(self, data: Buffer) -> bytes:
        self._total += len(data)
        out = self._ctx.update(data)
        if not self._holds_back() or not out:
            return out
        released, self._held = self._held + out[:-BLOCK], out[-BLOCK:]
        return released

    def _update_into(self, data: Buffer, out: bytearray | memoryview) -> int:
        self._total += len(data)
        if not self._holds_back():
            return self._ctx.update_into(data, out)
        view = memoryview(out)
        held = len(self._held)
        n = self._ctx.update_into(data, view[held:])
        if n == 0:
            return 0
        end = held + n - BLOCK
        new_held = bytes(view[end : held + n])
        view[:held] = self._held
        self._held = new_held
        return end

    def _finalize(self) -> bytes:
        partial = self._total % BLOCK
        if self.encrypting:
            if self._padding:
                pad = BLOCK - partial
                return self._ctx.update(bytes([pad]) * pad) + self._ctx.finalize()
            if partial:
                raise InvalidParameterError(
                    f"{self.name} without padding needs a multiple of 16 bytes, "
                    f"got {self._total}; use padding=True or pad the plaintext"
                )
            return self._ctx.finalize()
        if partial:
            raise FormatError(
                f"{self.name} ciphertext of {self._total} bytes is not a whole number of "
                "16-byte blocks: check that it was not truncated"
            )
        self._ctx.finalize()
        if not self._padding:
            return b""
        if not self._held:
            raise InvalidPaddingError(
                f"{self.name} ciphertext is empty: a padded ciphertext has at least one block"
            )
        unpadder = pkcs7.PKCS7(BLOCK * 8).unpadder()
        try:
            return unpadder.update(self._held) + unpadder.finalize()
        except ValueError:
            raise InvalidPaddingError(
                f"{self.name} PKCS#7 padding is invalid: wrong key or IV, or corrupted data"
            ) from None


class AesEcbEncryptor(_BlockTransform):
    """AES-ECB encryption (no IV; PKCS#7 padding unless ``padding=False``).

    ECB leaks equal plaintext blocks; use it only where a format demands it.
    """

    mode = "ECB"
    iv_size = 0
    encrypting = True
    __slots__ = ()

    def __init__(self, key: Buffer | SecretKey, *, padding: bool = True) -> None:
        super().__init__(key, b"", padding=padding)


class AesEcbDecryptor(AesEcbEncryptor):
    """AES-ECB decryption; see :class:`_BlockTransform` for the padding errors."""

    encrypting = False
    __slots__ = ()


class AesCbcEncryptor(_BlockTransform):
    """AES-CBC encryption with a 16-byte IV (PKCS#7 padding unless ``padding=False``)."""

    mode = "CBC"
    encrypting = True
    __slots__ = ()


class AesCbcDecryptor(AesCbcEncryptor):
    """AES-CBC decryption; bad padding raises :class:`InvalidPaddingError` at finalize.

    CBC is unauthenticated: a padding error tells an attacker something (padding oracle).
    Authenticate the ciphertext before decrypting it.
    """

    encrypting = False
    __slots__ = ()


# ------------------------------------------------------------------------------------ XTS


def _xts_composed(key: bytes, tweak: bytes, data: bytes, encrypt: bool) -> bytes:
    """XTS (IEEE 1619, with ciphertext stealing) built on the ECB kernel.

    Serves AES-192-XTS, which OpenSSL lacks (Wycheproof tests it); 128 and 256 run on the
    native XTS kernel.
    """
    half = len(key) // 2
    k1 = Cipher(algorithms.AES(key[:half]), modes.ECB())
    t = int.from_bytes(
        Cipher(algorithms.AES(key[half:]), modes.ECB()).encryptor().update(tweak), "little"
    )
    full, rest = divmod(len(data), BLOCK)
    tweaks = [tw.to_bytes(BLOCK, "little") for tw in doublings(t, full + (1 if rest else 0))]

    def xex(blocks: bytes, tws: bytes, forward: bool) -> bytes:
        ctx = k1.encryptor() if forward else k1.decryptor()
        return xor_bytes(ctx.update(xor_bytes(blocks, tws)), tws)

    if not rest:
        return xex(data, b"".join(tweaks), encrypt)
    head_len = (full - 1) * BLOCK
    head = xex(data[:head_len], b"".join(tweaks[: full - 1]), encrypt)
    last_full, partial = data[head_len : head_len + BLOCK], data[head_len + BLOCK :]
    # Encrypting, the last full block takes tweak m-1 and the stolen block tweak m;
    # decrypting swaps the two.
    first_tw, second_tw = (
        (tweaks[full - 1], tweaks[full]) if encrypt else (tweaks[full], tweaks[full - 1])
    )
    cc = xex(last_full, first_tw, encrypt)
    return head + xex(partial + cc[rest:], second_tw, encrypt) + cc[:rest]


class AesXtsEncryptor(AesTransform):
    """AES-XTS encryption of one data unit (IEEE 1619, with ciphertext stealing).

    ``key`` is two AES keys back to back (32, 48 or 64 bytes) whose halves must differ;
    ``tweak`` is 16 bytes (see :func:`xts_tweak`). The unit is buffered and encrypted in
    ``finalize()``, so ``update`` returns ``b""``. A unit shorter than 16 bytes raises
    :class:`InvalidParameterError`; one longer than 2**20 blocks raises
    :class:`LimitExceededError`; equal key halves raise :class:`InvalidParameterError`.
    """

    mode = "XTS"
    iv_label = "tweak"
    key_sizes = _XTS_KEY_SIZES
    encrypting = True
    __slots__ = ("_key", "_tweak", "_unit")

    def __init__(self, key: Buffer | SecretKey, tweak: Buffer) -> None:
        raw = key_bytes(key, f"AES-{self.mode} key", self.key_sizes)
        half = len(raw) // 2
        if constant_time_equal(raw[:half], raw[half:]):
            raise InvalidParameterError("AES-XTS key halves must differ: use two independent keys")
        super().__init__(raw, tweak)
        self._key = raw
        self._tweak = as_bytes(tweak, "tweak")
        self._unit = bytearray()

    @property
    def name(self) -> str:
        return f"AES-{self._key_size * 4}-XTS"

    def _context(self, key: bytes, iv: bytes) -> CipherContext:
        if len(key) == 48:  # AES-192-XTS: composed from ECB at finalize
            return Cipher(algorithms.AES(key[:24]), modes.ECB()).encryptor()
        return super()._context(key, iv)

    def output_bound(self, n: int) -> int:
        return 0

    def _update(self, data: Buffer) -> bytes:
        if len(self._unit) + len(data) > XTS_MAX_UNIT:
            raise LimitExceededError(
                f"{self.name} data unit exceeds {XTS_MAX_UNIT} bytes (2**20 blocks): "
                "split the data into smaller units with distinct tweaks"
            )
        self._unit += data
        return b""

    def _update_into(self, data: Buffer, out: bytearray | memoryview) -> int:
        self._update(data)
        return 0

    def _finalize(self) -> bytes:
        unit = bytes(self._unit)
        self._unit.clear()
        if len(unit) < BLOCK:
            msg = f"{self.name} data unit must be at least 16 bytes, got {len(unit)}"
            raise InvalidParameterError(msg) if self.encrypting else FormatError(msg)
        if len(self._key) == 48:
            return _xts_composed(self._key, self._tweak, unit, self.encrypting)
        return self._ctx.update(unit) + self._ctx.finalize()


class AesXtsDecryptor(AesXtsEncryptor):
    """AES-XTS decryption of one data unit; a unit under 16 bytes raises :class:`FormatError`."""

    encrypting = False
    __slots__ = ()


# ------------------------------------------------------------------------------------ GCM


class AesGcmEncryptor(AesTransform):
    """Incremental AES-GCM encryption; the output stream is ``ciphertext || tag``.

    ``nonce`` is 12 bytes (:class:`InvalidNonceSizeError` otherwise), ``aad`` is
    authenticated but not encrypted. ``finalize()`` returns the 16-byte tag. Never reuse a
    nonce under one key.
    """

    mode = "GCM"
    iv_size = GCM_NONCE_SIZE
    iv_label = "nonce"
    encrypting = True
    __slots__ = ("_aead",)

    def __init__(self, key: Buffer | SecretKey, nonce: Buffer, *, aad: Buffer = b"") -> None:
        super().__init__(key, nonce)
        if aad:
            self._aead.authenticate_additional_data(aad)

    def _context(self, key: bytes, iv: bytes) -> CipherContext:
        self._aead: AEADEncryptionContext = Cipher(algorithms.AES(key), modes.GCM(iv)).encryptor()
        return self._aead

    def _finalize(self) -> bytes:
        tail = self._aead.finalize()
        return tail + self._aead.tag


class AesGcmDecryptor(AesTransform):
    """Incremental AES-GCM decryption that releases no plaintext before the tag verifies.

    The input is ``ciphertext || tag`` (the last 16 bytes are held back as the tag), unless
    a detached 16-byte ``tag=`` is given, in which case all input is ciphertext. By default
    ``update`` returns ``b""`` and ``finalize()`` returns the whole plaintext after the tag
    verifies, so the plaintext is held in memory: for long streams use a segmented format.

    ``release_unverified_plaintext=True`` is DANGEROUS: ``update`` then returns plaintext
    that has NOT been authenticated and may be forged; only ``finalize()`` tells whether it
    was genuine. Use it only when the caller can discard everything it received if
    ``finalize()`` raises.

    Raises :class:`AuthenticationError` (bad tag: wrong key, nonce, aad or tampered data),
    :class:`TruncatedStreamError` (input shorter than a tag), :class:`InvalidTagSizeError`
    (a detached tag that is not 16 bytes), :class:`InvalidNonceSizeError`,
    :class:`InvalidKeySizeError`.
    """

    mode = "GCM"
    iv_size = GCM_NONCE_SIZE
    iv_label = "nonce"
    encrypting = False
    __slots__ = ("_aead", "_plain", "_release", "_tag", "_tail")

    def __init__(
        self,
        key: Buffer | SecretKey,
        nonce: Buffer,
        *,
        aad: Buffer = b"",
        tag: Buffer | None = None,
        release_unverified_plaintext: bool = False,
    ) -> None:
        if tag is not None and len(tag) != GCM_TAG_SIZE:
            raise InvalidTagSizeError(f"AES-GCM tag must be {GCM_TAG_SIZE} bytes, got {len(tag)}")
        super().__init__(key, nonce)
        if aad:
            self._aead.authenticate_additional_data(aad)
        self._tag = None if tag is None else as_bytes(tag, "tag")
        self._release = release_unverified_plaintext
        self._tail = b""  # the last bytes seen, held back as the tag when it is inline
        self._plain = bytearray()  # decrypted but not yet verified (default mode)

    def _context(self, key: bytes, iv: bytes) -> CipherContext:
        self._aead: AEADDecryptionContext = Cipher(algorithms.AES(key), modes.GCM(iv)).decryptor()
        return self._aead

    def __repr__(self) -> str:
        return f"{super().__repr__()[:-1]} release_unverified={self._release}>"

    def _split(self, data: Buffer) -> tuple[bytes, Buffer]:
        """Ciphertext ready now, as (from the held tail, from ``data``); hold the rest back."""
        if self._tag is not None:
            return b"", data
        if len(data) >= GCM_TAG_SIZE:
            head, self._tail = self._tail, bytes(data[-GCM_TAG_SIZE:])
            return head, memoryview(data)[:-GCM_TAG_SIZE]
        joined = self._tail + as_bytes(data, "data")
        cut = max(0, len(joined) - GCM_TAG_SIZE)
        self._tail = joined[cut:]
        return joined[:cut], b""

    def _update(self, data: Buffer) -> bytes:
        head, body = self._split(data)
        out = self._ctx.update(head) + self._ctx.update(body) if head else self._ctx.update(body)
        if self._release:
            return out
        self._plain += out
        return b""

    def _update_into(self, data: Buffer, out: bytearray | memoryview) -> int:
        if not self._release:
            self._update(data)
            return 0
        head, body = self._split(data)
        view = memoryview(out)
        n = self._ctx.update_into(head, view) if head else 0
        return n + (self._ctx.update_into(body, view[n:]) if body else 0)

    def _finalize(self) -> bytes:
        if self._tag is None and len(self._tail) < GCM_TAG_SIZE:
            raise TruncatedStreamError(
                f"AES-GCM input of {len(self._tail)} bytes ended before the 16-byte tag"
            )
        tag = self._tag if self._tag is not None else self._tail
        try:
            tail = self._aead.finalize_with_tag(tag)
        except InvalidTag:
            self._plain[:] = bytes(len(self._plain))
            self._plain.clear()
            raise AuthenticationError(
                "AES-GCM tag did not verify: wrong key, nonce or associated data, or tampered data"
            ) from None
        plain = bytes(self._plain) + tail
        self._plain.clear()
        return plain
