"""EME (ECB-Mix-ECB), the wide-block tweakable mode of Halevi and Rogaway, over AES.

"A Parallelizable Enciphering Mode" (CT-RSA 2004), as specified by the IEEE P1619.2
EME-32 draft and implemented by rfjakob/eme (which rclone uses for file names). For
``m`` blocks ``P_0..P_{m-1}`` (1 <= m <= 128) under key ``K`` and 16-byte tweak ``T``,
with ``L = 2 * E_K(0)`` and ``L_j = 2^j * L`` (doubling in GF(2^128), bytes little-endian,
reduction 0x87)::

    PPP_j = E_K(P_j xor L_j)
    MP    = T xor PPP_0 xor ... xor PPP_{m-1};  MC = E_K(MP);  M = MP xor MC
    CCC_j = PPP_j xor 2^j * M                  (j >= 1)
    CCC_0 = MC xor T xor CCC_1 xor ... xor CCC_{m-1}
    C_j   = E_K(CCC_j) xor L_j

Decryption is the same with ``E_K`` replaced by ``D_K`` (the ``L`` table always uses
``E_K``). The two ECB layers run as one native AES-ECB call each; only the mixing and
the GF doublings are Python integer arithmetic (names are at most 2 KiB), without a
branch on their bits (:mod:`._gf128`).
"""

from __future__ import annotations

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from ..abc import Buffer, as_bytes
from ..errors import InvalidKeySizeError, InvalidParameterError
from ..keys import HoldsSecrets, SecretKey
from ._gf128 import double, doublings

#: Most 16-byte blocks one EME call takes (2 KiB, as the EME-32 construction allows).
EME_MAX_BLOCKS = 128


def _ints(data: bytes) -> list[int]:
    return [int.from_bytes(data[i : i + 16], "little") for i in range(0, len(data), 16)]


def _bytes(blocks: list[int]) -> bytes:
    return b"".join(b.to_bytes(16, "little") for b in blocks)


class Eme(HoldsSecrets):
    """EME over AES (128, 192 or 256-bit key): ``encrypt(tweak, data)`` / ``decrypt``.

    ``data`` is 1..128 whole 16-byte blocks; the tweak is 16 bytes. Raises
    :class:`InvalidKeySizeError` and :class:`InvalidParameterError`.
    """

    __slots__ = ("_aes", "_l0")

    def __init__(self, key: Buffer | SecretKey) -> None:
        raw = key.secret_bytes() if isinstance(key, SecretKey) else bytes(key)
        if len(raw) not in (16, 24, 32):
            raise InvalidKeySizeError(f"EME-AES key must be 16, 24 or 32 bytes, got {len(raw)}")
        self._aes = algorithms.AES(raw)
        enc = Cipher(self._aes, modes.ECB()).encryptor()
        self._l0 = double(int.from_bytes(enc.update(bytes(16)), "little"))

    def _ecb(self, data: bytes, forward: bool) -> bytes:
        cipher = Cipher(self._aes, modes.ECB())
        ctx = cipher.encryptor() if forward else cipher.decryptor()
        return ctx.update(data)

    def _transform(self, tweak: Buffer, data: Buffer, forward: bool) -> bytes:
        raw = as_bytes(data, "data")
        m, rest = divmod(len(raw), 16)
        if len(tweak) != 16:
            raise InvalidParameterError(f"EME tweak must be 16 bytes, got {len(tweak)}")
        if rest or not 1 <= m <= EME_MAX_BLOCKS:
            raise InvalidParameterError(
                f"EME takes 1..{EME_MAX_BLOCKS} whole 16-byte blocks, got {len(raw)} bytes"
            )
        t = int.from_bytes(tweak, "little")
        ls = doublings(self._l0, m)
        ppp = _ints(
            self._ecb(_bytes([p ^ lj for p, lj in zip(_ints(raw), ls, strict=True)]), forward)
        )
        mp = t
        for block in ppp:
            mp ^= block
        mc = int.from_bytes(self._ecb(mp.to_bytes(16, "little"), forward), "little")
        mix = mp ^ mc
        ccc = [0] * m
        acc = mc ^ t
        for j in range(1, m):
            mix = double(mix)
            ccc[j] = ppp[j] ^ mix
            acc ^= ccc[j]
        ccc[0] = acc
        out = _ints(self._ecb(_bytes(ccc), forward))
        return _bytes([c ^ lj for c, lj in zip(out, ls, strict=True)])

    def encrypt(self, tweak: Buffer, data: Buffer) -> bytes:
        """EME-encrypt whole blocks of ``data`` under ``tweak``."""
        return self._transform(tweak, data, True)

    def decrypt(self, tweak: Buffer, data: Buffer) -> bytes:
        """EME-decrypt whole blocks of ``data`` under ``tweak``."""
        return self._transform(tweak, data, False)

    def __repr__(self) -> str:
        return "Eme(AES, <key hidden>)"
