"""HChaCha20 (draft-irtf-cfrg-xchacha, section 2.2) from one native ChaCha20 block.

A ChaCha20 block is ``rounds(state) + state`` word by word. HChaCha20 is words 0-3 and
12-15 of ``rounds(state)`` for the state (constants, key, 16-byte input), and
``cryptography``'s ChaCha20 takes exactly those 16 bytes as its nonce (words 12-15). So
one native block, minus the known input words, gives HChaCha20 without a Python-level
ChaCha round function.
"""

from __future__ import annotations

import struct

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

from ..abc import Buffer
from ..errors import InvalidKeySizeError, InvalidNonceSizeError

_SIGMA = struct.unpack("<4I", b"expand 32-byte k")
_WORDS = struct.Struct("<16I")
_OUT = struct.Struct("<8I")
_MASK = 0xFFFFFFFF


def hchacha20(key: Buffer, nonce16: Buffer) -> bytes:
    """The 32-byte HChaCha20 subkey of a 32-byte key and a 16-byte input."""
    if len(key) != 32:
        raise InvalidKeySizeError(f"HChaCha20 key must be 32 bytes, got {len(key)}")
    if len(nonce16) != 16:
        raise InvalidNonceSizeError(f"HChaCha20 input must be 16 bytes, got {len(nonce16)}")
    n = bytes(nonce16)
    block = Cipher(algorithms.ChaCha20(bytes(key), n), None).encryptor().update(bytes(64))
    w = _WORDS.unpack(block)
    iw = struct.unpack("<4I", n)
    return _OUT.pack(
        (w[0] - _SIGMA[0]) & _MASK,
        (w[1] - _SIGMA[1]) & _MASK,
        (w[2] - _SIGMA[2]) & _MASK,
        (w[3] - _SIGMA[3]) & _MASK,
        (w[12] - iw[0]) & _MASK,
        (w[13] - iw[1]) & _MASK,
        (w[14] - iw[2]) & _MASK,
        (w[15] - iw[3]) & _MASK,
    )
