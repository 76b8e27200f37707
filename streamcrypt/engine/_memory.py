"""Output memory: the one place new output objects are made, and the allocator opt-in.

Theory of operation
-------------------
Fresh memory costs a page fault per 4 KiB on first touch (about 1 ms per MiB on this
project's VMs, more than AES-GCM itself), so output is written once, where it will be
read: a job writes straight into the ``bytes`` object the consumer keeps. On CPython that
object is created uninitialised through the C API (``PyBytes_FromStringAndSize(NULL,
n)``, as C extensions build them) and written through a writable view of its memory.

That is only sound under two rules, which :class:`Fresh` owns and nothing else needs to
know: the object is never handed out before every byte of it was written (else it would
carry whatever the heap held before: old plaintext, keys), and the object lives as long
as any view of its memory (else a write through the view lands in whatever object reuses
the memory). :meth:`Fresh.finish` returns the object only when every byte was written,
else a copy of the written prefix; every view of the memory, slices included, keeps the
object alive (:func:`_writable_bytes`). The view is never handed to anything but the jobs
of the engine.

Small outputs (under :data:`_IN_PLACE`) and other interpreters use a ``bytearray``,
copied once at the end. The one output not made here is a job of one segment whose
codec's kernel returns its own new object (``SegmentJob.run_new``): written whole by the
kernel, it needs neither rule.
"""

from __future__ import annotations

import ctypes
import os
import sys

from ..abc import Buffer

#: Below this a fresh output is a bytearray copied once; above it, filled in place. Made
#: in place, an object costs ~2 us of ctypes calls whatever its size; a bytearray
#: costs its zeroing and the copy, as much at about 16 KiB (64 KiB: 3.1 us).
_IN_PLACE = 16 << 10


def _bytes_c_api() -> tuple[object, object, type] | None:
    """CPython's ``PyBytes_FromStringAndSize`` and ``PyBytes_AsString``, and a ctypes
    array type that can stand over any object's memory and hold that object.

    The functions are private objects made from prototypes: the attributes of
    ``ctypes.pythonapi`` are shared with the host process, whose prototypes this must
    neither change nor depend on."""
    if sys.implementation.name != "cpython":  # pragma: no cover - others copy once
        return None
    new_type = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_ssize_t)
    new = new_type(("PyBytes_FromStringAndSize", ctypes.pythonapi))
    address_type = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object)
    address = address_type(("PyBytes_AsString", ctypes.pythonapi))

    class Span(ctypes.c_char * sys.maxsize):  # type: ignore[misc]  # sliced to the size
        """Memory of ``owner``; a view of it references this, so ``owner`` too."""

        __slots__ = ("owner",)

    return new, address, Span


_BYTES_C_API = _bytes_c_api()


def _writable_bytes(size: int) -> tuple[bytes, memoryview] | None:
    """A new, uninitialised ``bytes`` of ``size`` and a writable view of its memory that
    keeps it alive (as does every slice of the view); ``None`` off CPython.

    The only use of the C API for output memory. The view is built over a ctypes array at
    the object's address that references the object, so the object cannot be freed while
    any view of its memory exists (a view made by ``PyMemoryView_FromMemory`` references
    nothing, and wrote into whatever reused the memory after the object died)."""
    if _BYTES_C_API is None:  # pragma: no cover - not CPython
        return None
    new, address, span_type = _BYTES_C_API
    obj: bytes = new(None, size)  # type: ignore[operator]
    span = span_type.from_address(address(obj))  # type: ignore[operator, attr-defined]
    span.owner = obj
    return obj, memoryview(span).cast("B")[:size]


class Fresh:
    """A new output object of ``size`` bytes, written through :attr:`view` by the engine's
    jobs and handed out by :meth:`finish` (see the module docstring)."""

    __slots__ = ("_obj", "_view", "size")

    def __init__(self, size: int) -> None:
        self.size = size
        made = _writable_bytes(size) if size >= _IN_PLACE else None
        if made is None:
            buf = bytearray(size)
            self._obj: Buffer = buf
            self._view: memoryview | None = memoryview(buf)
        else:
            self._obj, self._view = made

    @property
    def view(self) -> memoryview:
        """The writable memory (until :meth:`finish`)."""
        assert self._view is not None, "finished output memory is not written again"
        return self._view

    def finish(self, written: int) -> bytes:
        """The output: the object itself when all ``size`` bytes were written, else a copy
        of the first ``written`` (never a byte nobody wrote). Once only."""
        view, self._view = self._view, None
        assert view is not None, "output memory is finished once"
        obj, self._obj = self._obj, b""
        if written == self.size and type(obj) is bytes:
            return obj
        return bytes(view[:written])


#: glibc's ``mallopt`` parameter numbers.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: The thresholds :func:`keep_freed_memory` has set so far (it only ever raises them).
_kept = (0, 0)


def keep_freed_memory(mmap_threshold: int = 8 << 20, trim_threshold: int = 16 << 20) -> None:
    """Opt in, as an application, to glibc keeping freed memory for reuse: blocks below
    ``mmap_threshold`` come from its heap, and the heap's top goes back to the kernel
    only past ``trim_threshold`` bytes free (``mallopt``). Never lowers what an earlier
    call set. A no-op off glibc and when the environment sets any of glibc's
    ``MALLOC_*`` tunables (the operator's choice wins).

    The library never calls this by itself: allocator policy belongs to the process,
    and setting it switches off glibc's dynamic threshold. By default glibc trims its
    heap whenever more than twice its *mmap threshold* is free at the top; the threshold
    starts at 128 KiB and rises only when a larger mmapped block is freed. A server
    turning over 256 KiB bodies (h11's buffers, the app's body bytes, the output) then
    trims and regrows the heap on nearly every body message and faults every page back
    in: measured under uvicorn, 1.2-1.5 faulted bytes per request-body byte; after this
    call, 0.00. The ``streamcrypt`` command, an application, calls it with 64 / 256 MiB.
    """
    global _kept
    mmap_threshold, trim_threshold = max(mmap_threshold, _kept[0]), max(trim_threshold, _kept[1])
    if (mmap_threshold, trim_threshold) == _kept:
        return
    _kept = (mmap_threshold, trim_threshold)
    if sys.platform != "linux" or any(name.startswith("MALLOC_") for name in os.environ):
        return
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # pragma: no cover - no C library, or no mallopt
        return
    if hasattr(libc, "gnu_get_libc_version"):  # musl's mallopt ignores these parameters
        mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
        mallopt(_M_MMAP_THRESHOLD, mmap_threshold)
        mallopt(_M_TRIM_THRESHOLD, trim_threshold)
