"""Content-defined chunking: FastCDC 2020 over a native kernel, as a sans-I/O transform.

Theory of operation
-------------------
A gear rolling hash runs over the bytes; a chunk ends where the hash matches a mask, so
a boundary depends only on the bytes just before it and an edit moves only the
boundaries near it: the chunks after an insertion are the same as before and
deduplicate. FastCDC 2020 (Xia et al., IEEE TC 2020) skips the first ``min_size`` bytes
of each chunk, uses a stricter mask before ``avg_size`` and a looser one after it
(normalized chunking, level 1), and forces a cut at ``max_size``.

The kernel is `pyfastcdc` (Cython, a port of the ``v2020`` module of nlfiedler's
``fastcdc`` crate; its cut loop runs without the GIL). ``seed`` is XORed into the gear
table, so the boundaries, visible as chunk sizes in an encrypted store, depend on a key
(a 63-bit seed: it makes boundaries unpredictable to an outsider, it does not hide chunk
sizes themselves).

Streaming: ``update(data)`` returns the chunks that are certainly complete; the last
chunk found in the buffered data is held back, because more data may move its end. The
held tail is at most ``max_size`` bytes and is rescanned with the next input, so any way
of cutting the input into ``update`` calls gives the same chunks. ``finalize()`` returns
the rest. An empty input gives no chunk.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import import_extra
from ..abc import Buffer, Lifecycle, State, as_bytes
from ..errors import InvalidParameterError
from ..keys import HoldsSecrets

if TYPE_CHECKING:
    from pyfastcdc import FastCDC

#: Default average chunk size of :class:`ContentChunker` (the real mean is about
#: ``avg + min``). restic averages 1 MiB, borg 2 MiB; smaller chunks store less after an
#: edit and cost one index entry (45 bytes) and one AEAD tag (16 bytes) each.
CDC_AVG_SIZE = 256 * 1024
#: Default minimum chunk size (FastCDC's ``avg / 4``).
CDC_MIN_SIZE = CDC_AVG_SIZE // 4
#: Default maximum chunk size (FastCDC's ``avg * 4``).
CDC_MAX_SIZE = CDC_AVG_SIZE * 4

# pyfastcdc shifts the seed left by one bit in a 64-bit integer: 63 bits fit.
_SEED_MAX = (1 << 63) - 1


def _kernel(avg: int, min_size: int, max_size: int, seed: int) -> FastCDC:
    module = import_extra(
        "pyfastcdc", "content-defined chunking needs the 'pyfastcdc' package", "backup"
    )
    kernel: FastCDC = module.FastCDC(avg, min_size=min_size, max_size=max_size, seed=seed)
    return kernel


class ContentChunker(Lifecycle, HoldsSecrets):
    """Cut a byte stream into content-defined chunks (FastCDC 2020, sans-I/O).

    ``update(data)`` returns the chunks completed so far (read-only ``memoryview`` s,
    possibly none), ``finalize()`` the last one. :meth:`cut` splits a whole buffer at
    once. ``seed`` (0 .. 2**63-1; 0 is FastCDC's published table) keys the boundaries.
    Raises :class:`InvalidParameterError` for sizes outside FastCDC's ranges
    (64 <= min <= avg <= max, avg 256 B .. 4 MiB, max <= 16 MiB).
    """

    __slots__ = ("_cdc", "_max", "_tail")

    def __init__(
        self,
        avg_size: int = CDC_AVG_SIZE,
        *,
        min_size: int | None = None,
        max_size: int | None = None,
        seed: int = 0,
    ) -> None:
        min_size = avg_size // 4 if min_size is None else min_size
        max_size = avg_size * 4 if max_size is None else max_size
        if not (
            64 <= min_size <= avg_size <= max_size
            and 256 <= avg_size <= 1 << 22
            and 1024 <= max_size <= 1 << 24
            and min_size <= 1 << 20
        ):
            raise InvalidParameterError(
                "chunk sizes must satisfy 64 <= min <= avg <= max, avg 256 B..4 MiB, "
                f"max 1 KiB..16 MiB; got min={min_size} avg={avg_size} max={max_size}"
            )
        if not 0 <= seed <= _SEED_MAX:
            raise InvalidParameterError("the chunker seed must be an integer in 0 .. 2**63-1")
        self._init_lifecycle()
        self._cdc = _kernel(avg_size, min_size, max_size, seed)
        self._max = max_size
        self._tail = b""

    @property
    def max_size(self) -> int:
        return self._max

    def cut(self, data: Buffer) -> list[int]:
        """The chunk lengths of ``data`` taken as a whole stream (no state is touched)."""
        return [c.length for c in self._cdc.cut_buf(data)]

    def update(self, data: Buffer) -> list[memoryview]:
        self._check()
        buf = self._tail + as_bytes(data, "data") if self._tail else as_bytes(data, "data")
        view = memoryview(buf)
        out: list[memoryview] = []
        pos = 0
        try:
            lengths = self.cut(view)
        except Exception as exc:  # pragma: no cover - the kernel does not fail on bytes
            raise self._break(exc) from None
        for length in lengths[:-1]:
            out.append(view[pos : pos + length])
            pos += length
        self._tail = buf[pos:] if pos else buf
        return out

    def finalize(self) -> list[memoryview]:
        self._check()
        self._state = State.FINALIZED
        tail, self._tail = self._tail, b""
        if not tail:
            return []
        view = memoryview(tail)
        out, pos = [], 0
        for length in self.cut(view):
            out.append(view[pos : pos + length])
            pos += length
        return out

    def __repr__(self) -> str:
        return (
            f"ContentChunker(min={self._cdc.min_size}, avg={self._cdc.avg_size}, "
            f"max={self._max}, seed=<hidden>)"
        )
