"""Layer 3: the async engine that drives sans-I/O transforms between sources and sinks."""

from __future__ import annotations

from ._offload import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_INLINE_LIMIT,
    DEFAULT_MAX_IN_FLIGHT,
    DEFAULT_POLICY,
    DEFAULT_WORKERS,
    OffloadPolicy,
    wait_future,
)
from ._pipeline import Feeder, Pipeline, Sink, Source, pipeline

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_INLINE_LIMIT",
    "DEFAULT_MAX_IN_FLIGHT",
    "DEFAULT_POLICY",
    "DEFAULT_WORKERS",
    "Feeder",
    "OffloadPolicy",
    "Pipeline",
    "Sink",
    "Source",
    "pipeline",
    "wait_future",
]
