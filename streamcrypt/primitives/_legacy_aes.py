"""AES-IGE and AES-PCBC: the legacy chaining modes, on OpenSSL's AES.

Theory of operation
-------------------
Both modes chain every block to the one before, so neither has a native kernel; each is
rewritten here in terms of modes OpenSSL runs natively, with whole-buffer XORs (Python
integers, native loops) around one kernel call per ``update``:

- IGE encryption, c_i = E(p_i ^ c_{i-1}) ^ p_{i-1}: with y_i = c_i ^ p_{i-1}, the input
  of E is p_i ^ p_{i-2} ^ y_{i-1}, so y is plain CBC encryption of x_i = p_i ^ p_{i-2}
  (IV c_0, and p_{-1} = 0), and c = y ^ (p shifted by one block). One CBC call.
- PCBC encryption, c_i = E(p_i ^ p_{i-1} ^ c_{i-1}): CBC encryption of x_i = p_i ^ p_{i-1}.
  One CBC call.
- PCBC decryption, p_i = D(c_i) ^ c_{i-1} ^ p_{i-1}: the D(c_i) are independent (one ECB
  call); what remains is a running XOR over blocks, done as a prefix scan on one big
  integer in log2(blocks) shift-XOR steps.
- IGE decryption, p_i = D(c_i ^ p_{i-1}) ^ c_{i-1}: the input of D depends on the
  previous output, and OpenSSL has no mode that chains through AES decryption. It runs
  block by block on one ECB context (one kernel call per 16 bytes), about 100 times slower
  than the others: bench/seeds.py gives the measured speed.

The IGE IV is 32 bytes, c_0 || p_0, as OpenSSL's ``AES_ige_encrypt`` and Telegram's
MTProto use it (cipherlib's 16-byte IV is the same with p_0 = 0). The PCBC IV is 16 bytes.
Padding is PKCS#7 by default (``padding=False`` takes whole blocks only), decryption holds
the last block back until ``finalize()`` checks the padding, and errors are those of the
other block modes: the classes reuse :class:`~streamcrypt.primitives.hazmat.AesCbcEncryptor`'s
machinery, with a chaining context in place of OpenSSL's.

These modes are unauthenticated. IGE was meant to propagate errors forward, which does not
make it authenticated either; PCBC's propagation is defeated by swapping two blocks.
"""

from __future__ import annotations

from collections.abc import Callable

from cryptography.hazmat.primitives.ciphers import Cipher, CipherContext, algorithms, modes

from ..abc import Buffer, as_bytes
from ._aes import BLOCK, _BlockTransform
from ._xor import xor_bytes

_Chain = Callable[[bytes], bytes]


class _ChainContext:
    """A CipherContext look-alike that runs whole blocks through a chaining function."""

    __slots__ = ("_chain", "_partial")

    def __init__(self, chain: _Chain) -> None:
        self._chain = chain
        self._partial = b""

    def update(self, data: Buffer) -> bytes:
        buf = self._partial + as_bytes(data, "data")
        whole = len(buf) - len(buf) % BLOCK
        self._partial = buf[whole:]
        return self._chain(buf[:whole]) if whole else b""

    def update_into(self, data: Buffer, out: bytearray | memoryview) -> int:
        result = self.update(data)
        memoryview(out)[: len(result)] = result
        return len(result)

    def finalize(self) -> bytes:
        if self._partial:
            raise ValueError("the length of the data is not a multiple of the block length")
        return b""


def _prefix_xor(blocks: bytes) -> bytes:
    """Block i of the result is blocks 0..i XORed together."""
    s = int.from_bytes(blocks, "big")
    shift, total = BLOCK * 8, len(blocks) * 8
    while shift < total:
        s ^= s >> shift
        shift <<= 1
    return s.to_bytes(len(blocks), "big")


class _Chaining:
    """The chaining state of one IGE or PCBC stream and its four block functions."""

    __slots__ = ("_aes", "_c", "_ecb", "_p")

    def __init__(self, key: bytes, c0: bytes, p0: bytes) -> None:
        self._aes = algorithms.AES(key)
        self._ecb: CipherContext | None = None
        self._c, self._p = c0, p0

    def _cbc(self, x: bytes) -> bytes:
        return Cipher(self._aes, modes.CBC(self._c)).encryptor().update(x)

    def _ecb_decrypt(self) -> CipherContext:
        if self._ecb is None:
            self._ecb = Cipher(self._aes, modes.ECB()).decryptor()
        return self._ecb

    def ige_encrypt(self, p: bytes) -> bytes:
        shifted = self._p + p[:-BLOCK]  # p_{i-1}
        y = self._cbc(xor_bytes(p, (bytes(BLOCK) + shifted)[: len(p)]))
        c = xor_bytes(y, shifted)
        self._c, self._p = c[-BLOCK:], p[-BLOCK:]
        return c

    def ige_decrypt(self, c: bytes) -> bytes:
        dec = self._ecb_decrypt().update
        c_prev = int.from_bytes(self._c, "big")
        p_prev = int.from_bytes(self._p, "big")
        out = []
        for off in range(0, len(c), BLOCK):
            c_i = int.from_bytes(c[off : off + BLOCK], "big")
            z = int.from_bytes(dec((c_i ^ p_prev).to_bytes(BLOCK, "big")), "big")
            p_prev = z ^ c_prev
            c_prev = c_i
            out.append(p_prev.to_bytes(BLOCK, "big"))
        self._c, self._p = c[-BLOCK:], out[-1]
        return b"".join(out)

    def pcbc_encrypt(self, p: bytes) -> bytes:
        c = self._cbc(xor_bytes(p, (self._p + p)[: len(p)]))
        self._c, self._p = c[-BLOCK:], p[-BLOCK:]
        return c

    def pcbc_decrypt(self, c: bytes) -> bytes:
        q = xor_bytes(self._ecb_decrypt().update(c), (self._c + c)[: len(c)])
        p = xor_bytes(_prefix_xor(q), self._p * (len(c) // BLOCK))
        self._c, self._p = c[-BLOCK:], p[-BLOCK:]
        return p


class AesIgeEncryptor(_BlockTransform):
    """AES-IGE encryption; ``iv`` is 32 bytes (c_0 || p_0, as OpenSSL and MTProto).

    PKCS#7 padding unless ``padding=False`` (then the total must be whole blocks, as
    Telegram's AES-256-IGE needs). Raises as :class:`AesCbcEncryptor` does.
    """

    mode = "IGE"
    iv_size = 2 * BLOCK
    encrypting = True
    __slots__ = ()

    def _context(self, key: bytes, iv: bytes) -> CipherContext:
        chaining = _Chaining(key, iv[:BLOCK], iv[BLOCK:])
        chain = chaining.ige_encrypt if self.encrypting else chaining.ige_decrypt
        return _ChainContext(chain)  # type: ignore[return-value]


class AesIgeDecryptor(AesIgeEncryptor):
    """AES-IGE decryption (block by block: see the module docstring for its speed)."""

    encrypting = False
    __slots__ = ()


class AesPcbcEncryptor(_BlockTransform):
    """AES-PCBC encryption with a 16-byte IV; PKCS#7 padding unless ``padding=False``."""

    mode = "PCBC"
    encrypting = True
    __slots__ = ()

    def _context(self, key: bytes, iv: bytes) -> CipherContext:
        chaining = _Chaining(key, iv, bytes(BLOCK))
        chain = chaining.pcbc_encrypt if self.encrypting else chaining.pcbc_decrypt
        return _ChainContext(chain)  # type: ignore[return-value]


class AesPcbcDecryptor(AesPcbcEncryptor):
    """AES-PCBC decryption; bad padding raises :class:`InvalidPaddingError` at finalize."""

    encrypting = False
    __slots__ = ()
