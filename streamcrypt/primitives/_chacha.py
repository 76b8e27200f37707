"""ChaCha20 (RFC 8439 and the original) and XChaCha20 as sans-I/O keystream transforms.

Theory of operation: ``cryptography``'s ``algorithms.ChaCha20(key, nonce16)`` takes the
16 bytes of ChaCha state words 12..15, little-endian: the block counter starts in word 12
and the nonce fills the rest. So

- RFC 8439 (96-bit nonce, 32-bit counter): ``nonce16 = le32(counter) || nonce12``;
- the original (64-bit nonce, 64-bit counter): ``nonce16 = le64(counter) || nonce8``;
- XChaCha20 (192-bit nonce): the subkey ``HChaCha20(key, nonce[:16])`` drives the original
  variant with ``nonce[16:]``. This agrees with draft-irtf-cfrg-xchacha (whose 32-bit
  counter sits in word 12 with zero in word 13) wherever that draft is defined and with
  libsodium's 64-bit counter beyond it.

The kernel counts blocks in word 12 only and refuses to wrap it. The RFC 8439 variant
therefore stops with :class:`LimitExceededError` before its 2**32nd block; the 64-bit
variants run one kernel context per 2**32-block run and start the next context with the
carry in word 13 (the limit there is 2**64 blocks). Encryption and decryption are the same
XOR, so one class serves both directions.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from cryptography.hazmat.primitives.ciphers import Cipher, CipherContext, algorithms

from ..abc import Buffer, as_bytes
from ..errors import (
    InvalidNonceSizeError,
    InvalidParameterError,
    LimitExceededError,
)
from ..keys import HoldsSecrets, SecretKey, key_bytes
from ._hchacha import hchacha20
from ._transform import KernelTransform

BLOCK = 64
KEY_SIZE = 32
_RUN_BLOCKS = 1 << 32  # blocks one kernel context can produce from counter 0


class ChaCha20(KernelTransform, HoldsSecrets):
    """The ChaCha20 keystream XOR, for both directions.

    ``nonce`` of 12 bytes selects RFC 8439 (32-bit block ``counter``, at most
    ``2**32 - counter`` blocks); 8 bytes selects the original variant (64-bit counter).
    ``update``/``update_into`` raise :class:`LimitExceededError` (processing nothing of that
    call) when the input would run the counter past its limit; :class:`InvalidKeySizeError`,
    :class:`InvalidNonceSizeError` and :class:`InvalidParameterError` (counter out of range)
    come from the constructor. Never reuse a (key, nonce) pair.
    """

    variant: ClassVar[str] = "ChaCha20"
    nonce_sizes: ClassVar[tuple[int, ...]] = (12, 8)

    __slots__ = ("_counter", "_counter_bits", "_ctx", "_key", "_left", "_nonce", "_run_left")

    def __init__(self, key: Buffer | SecretKey, nonce: Buffer, *, counter: int = 0) -> None:
        raw = key_bytes(key, f"{self.variant} key", KEY_SIZE)
        if len(nonce) not in self.nonce_sizes:
            raise InvalidNonceSizeError(
                f"{self.variant} nonce must be "
                + " or ".join(f"{n} bytes" for n in self.nonce_sizes)
                + f", got {len(nonce)}"
            )
        self._setup(*self._derive(raw, as_bytes(nonce, "nonce")), counter)

    def _derive(self, key: bytes, nonce: bytes) -> tuple[bytes, bytes]:
        """The (key, nonce tail) the ChaCha20 kernel runs with."""
        return key, nonce

    def _setup(self, key: bytes, nonce: bytes, counter: int) -> None:
        self._counter_bits = 32 if len(nonce) == 12 else 64
        if not 0 <= counter < 1 << self._counter_bits:
            raise InvalidParameterError(
                f"{self.variant} initial counter must be 0..2**{self._counter_bits}-1, "
                f"got {counter}"
            )
        self._key = key
        self._nonce = nonce
        #: Keystream bytes left before the counter would pass its limit.
        self._left = ((1 << self._counter_bits) - counter) * BLOCK
        self._open_run(counter)
        self._init_lifecycle()

    def _open_run(self, counter: int) -> None:
        """A kernel context from ``counter`` to the next multiple of 2**32 blocks."""
        nonce16 = counter.to_bytes(self._counter_bits // 8, "little") + self._nonce
        self._ctx: CipherContext = Cipher(algorithms.ChaCha20(self._key, nonce16), None).encryptor()
        self._counter = counter
        self._run_left = (_RUN_BLOCKS - counter % _RUN_BLOCKS) * BLOCK

    @property
    def name(self) -> str:
        return self.variant if self._counter_bits == 64 else "ChaCha20 (RFC 8439)"

    def _reserve(self, n: int) -> None:
        if n > self._left:
            raise LimitExceededError(
                f"{self.name} keystream exhausted: {n} more bytes would run the "
                f"{self._counter_bits}-bit block counter past its limit "
                f"({self._left} bytes left); use a new nonce"
            )
        self._left -= n

    def _pieces(self, n: int) -> Iterator[tuple[int, int]]:
        """(start, stop) slices of an ``n``-byte input, one per kernel run.

        A generator on purpose: the caller runs each slice through ``self._ctx`` before the
        next run's context replaces it.
        """
        start = 0
        while True:
            take = min(n - start, self._run_left)
            yield start, start + take
            self._run_left -= take
            start += take
            if start == n:
                return
            # Finish this run with the carry into word 13 (64-bit variants only: the
            # 32-bit variant's limit equals its single run, so _reserve stopped it).
            self._ctx.finalize()
            self._open_run(self._counter - self._counter % _RUN_BLOCKS + _RUN_BLOCKS)

    def _update(self, data: Buffer) -> bytes:
        self._reserve(len(data))
        if len(data) <= self._run_left:
            self._run_left -= len(data)
            return self._ctx.update(data)
        view = memoryview(data)
        return b"".join(self._ctx.update(view[a:b]) for a, b in self._pieces(len(data)))

    def _update_into(self, data: Buffer, out: bytearray | memoryview) -> int:
        self._reserve(len(data))
        view, dest = memoryview(data), memoryview(out)
        for start, stop in self._pieces(len(data)):
            self._ctx.update_into(view[start:stop], dest[start:])
        return len(data)

    def _finalize(self) -> bytes:
        return self._ctx.finalize()


class XChaCha20(ChaCha20):
    """XChaCha20: a 24-byte nonce, safe to pick at random; 64-bit block ``counter``.

    The key is the HChaCha20 subkey of ``key`` and ``nonce[:16]``; the keystream is the
    original ChaCha20 under it with ``nonce[16:]``. Raises as :class:`ChaCha20` does.
    """

    variant = "XChaCha20"
    nonce_sizes = (24,)
    __slots__ = ()

    def _derive(self, key: bytes, nonce: bytes) -> tuple[bytes, bytes]:
        return hchacha20(key, nonce[:16]), nonce[16:]
