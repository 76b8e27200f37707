"""The one helper every format module uses: run transforms over a source on the engine."""

from __future__ import annotations

from collections.abc import AsyncIterator

from ..abc import Transform
from ..engine import OffloadPolicy, Source, pipeline

__all__ = ["stream"]


def stream(
    source: Source, *stages: Transform, policy: OffloadPolicy | None
) -> AsyncIterator[bytes]:
    """``stages`` applied to ``source`` as an async iterator of bytes."""
    return pipeline(*stages, policy=policy).stream(source)
