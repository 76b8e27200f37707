"""The XOR cipher (cipherlib's ``xor``): the data XORed with the key repeated.

Not encryption in any modern sense: with a repeating key it falls to frequency analysis,
and it is only a one-time pad when the key is as long as the data, random and never
reused. It is here for interop with cipherlib and for building formats.

:func:`xor_bytes` is the one helper every module uses to XOR equal-length buffers. With the
``legacy`` extra installed it runs pycryptodome's native ``strxor`` (about 20 GB/s here) on
inputs of :data:`NATIVE_XOR_MIN` bytes or more; below that, or without the extra, it XORs
Python integers (``int.from_bytes``, ``^``, ``to_bytes``: native loops, about 0.25 GB/s,
and cheaper per call on small inputs). Never a per-byte Python loop.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from ..abc import Buffer
from ..errors import InvalidParameterError
from ..keys import HoldsSecrets, SecretKey, as_secret_key
from ._transform import KernelTransform


@functools.cache
def _native_strxor() -> Callable[..., bytes] | None:
    """pycryptodome's ``strxor``, or ``None`` without the ``legacy`` extra. Imported by
    the first call that needs it: importing pycryptodome costs ~50 ms, which
    ``import streamcrypt`` and the command's start-up skip."""
    try:
        from Crypto.Util.strxor import strxor
    except ImportError:  # pragma: no cover - the legacy extra is installed in development
        return None
    return strxor


#: Smallest input that goes to the native XOR: measured 2026 on the 2-core box, strxor
#: costs ~3.8 us per call (ctypes) and the integer path ~1 us + 4 ns/byte.
NATIVE_XOR_MIN = 1024


def xor_ints(a: Buffer, b: Buffer) -> bytes:
    """``a XOR b`` through Python integers (the path without the native kernel)."""
    n = len(a)
    return (int.from_bytes(a, "little") ^ int.from_bytes(b, "little")).to_bytes(n, "little")


def xor_bytes(a: Buffer, b: Buffer) -> bytes:
    """``a XOR b`` for two buffers of the same length."""
    if len(a) >= NATIVE_XOR_MIN:
        native = _native_strxor()
        if native is not None:
            return native(a, b)
    return xor_ints(a, b)


def _keystream(key: bytes, offset: int, n: int) -> bytes:
    """``n`` bytes of ``key`` repeated, starting at ``offset`` into the repetition."""
    start = offset % len(key)
    reps = (start + n) // len(key) + 1
    return (key * reps)[start : start + n]


def xor(data: Buffer, key: Buffer | SecretKey) -> bytes:
    """``data`` XORed with ``key`` repeated (its own inverse). Raises
    :class:`InvalidKeySizeError` for an empty key."""
    return XorCipher(key).update(data)


class XorCipher(HoldsSecrets, KernelTransform):
    """The XOR cipher as a transform: each byte XORed with the key, repeated, in order.

    The same class encrypts and decrypts. :meth:`seek` moves to any byte offset.
    Raises :class:`InvalidKeySizeError` for an empty key.
    """

    __slots__ = ("_key", "_offset")

    def __init__(self, key: Buffer | SecretKey) -> None:
        self._key = as_secret_key(key, None, what="an XOR key").secret_bytes()
        self._offset = 0
        self._init_lifecycle()

    name = "XOR"

    def _update(self, data: Buffer) -> bytes:
        out = xor_bytes(data, _keystream(self._key, self._offset, len(data)))
        self._offset += len(data)
        return out

    def _update_into(self, data: Buffer, out: bytearray | memoryview) -> int:
        memoryview(out)[: len(data)] = self._update(data)
        return len(data)

    def seek(self, offset: int) -> None:
        """Continue as if ``offset`` bytes had been processed."""
        self._check()
        if not isinstance(offset, int) or offset < 0:
            raise InvalidParameterError(f"an offset must be a non-negative int, got {offset!r}")
        self._offset = offset

    def __repr__(self) -> str:
        return f"<XorCipher key=<{len(self._key)} bytes hidden> state={self._state.value}>"
