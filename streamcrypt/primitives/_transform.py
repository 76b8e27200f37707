"""The transform verbs the ciphers here share: AES's modes, ChaCha20, Salsa20, XOR.

:class:`KernelTransform` owns ``update``, ``update_into`` and ``finalize``: the lifecycle
check (open, finalized, broken), the output-size check against :meth:`output_bound`, and
one failure path (a kernel's ``ValueError`` becomes :class:`InvalidParameterError`; any
failure leaves the transform broken). A cipher writes only its own steps: ``_update``,
``_update_into`` and ``_finalize``.
"""

from __future__ import annotations

from ..abc import Buffer, Lifecycle
from ..errors import InvalidParameterError


class KernelTransform(Lifecycle):
    """``update``/``update_into``/``finalize`` around a cipher's own steps.

    They raise :class:`AlreadyFinalizedError` after ``finalize()`` and
    :class:`BrokenTransformError` after an earlier failure; a kernel refusal or an ``out``
    smaller than :meth:`output_bound` becomes :class:`InvalidParameterError`.
    """

    __slots__ = ()

    @property
    def name(self) -> str:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} state={self._state.value}>"

    def update(self, data: Buffer, /) -> bytes:
        """Process ``data``; return the output it completes (possibly ``b""``)."""
        self._check()
        try:
            return self._update(data)
        except Exception as exc:
            raise self._break_kernel(exc, self.name) from exc

    def update_into(self, data: Buffer, out: bytearray | memoryview, /) -> int:
        """Like ``update`` but write into ``out``; return the byte count written.

        ``out`` must hold ``output_bound(len(data))`` bytes, else
        :class:`InvalidParameterError`.
        """
        self._check()
        try:
            need = self.output_bound(len(data))
            if len(out) < need:
                raise InvalidParameterError(
                    f"{self.name} update_into needs an output buffer of {need} bytes "
                    f"for {len(data)} input bytes, got {len(out)}"
                )
            return self._update_into(data, out)
        except Exception as exc:
            raise self._break_kernel(exc, self.name) from exc

    def finalize(self) -> bytes:
        """Finish; return the last output. The transform cannot be used afterwards."""
        self._check()
        try:
            tail = self._finalize()
        except Exception as exc:
            raise self._break_kernel(exc, self.name) from exc
        self._finish()
        return tail

    def output_bound(self, n: int) -> int:
        """The most bytes ``update_into`` writes for ``n`` input bytes."""
        return n

    # -- the cipher's own steps --

    def _update(self, data: Buffer) -> bytes:
        raise NotImplementedError

    def _update_into(self, data: Buffer, out: bytearray | memoryview) -> int:
        raise NotImplementedError

    def _finalize(self) -> bytes:
        return b""
